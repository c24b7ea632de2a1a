-- sliding_log_zrem: removes from a sliding log the r members logged at at with the highest sequence
-- numbers, '<at>:<c>' down to '<at>:<c − r + 1>', 1000 to a ZREM. Reads key, at, c (how many were
-- logged at at), r.
local members = {}
for j = c, c - r + 1, -1 do
  members[#members + 1] = at .. ':' .. j
  if #members == 1000 or j == c - r + 1 then
    redis.call('ZREM', key, unpack(members))
    members = {}
  end
end
