-- sliding_log_zadd: appends units entries '<at>:<seq + j>' scored at to a sliding log, j = 1 … units,
-- 1000 to a ZADD. Reads key, at, seq (sliding_log_trim), units.
local args = {}
for j = 1, units do
  args[#args + 1] = at
  args[#args + 1] = at .. ':' .. (seq + j)
  if #args == 2000 or j == units then
    redis.call('ZADD', key, unpack(args))
    args = {}
  end
end
