-- batch.lua: the entry point that decides several takes in one call, each as take.lua decides it
-- alone, one after the other in the order given: a script runs atomically, so the batch is the same
-- as those calls made in turn at one instant (docs/redis.md, "Coalescing"). Its assembly wraps the
-- take script's straight path (take_single.lua) and take.lua itself in functions, which see a
-- request's own keys and arguments through KEYS and ARGV (locals of the assembly, refilled for each
-- request), and the batch's time as the last argument, as a test assembly's take reads it.
--
-- KEYS          every request's keys, request after request
-- ARGV[1]       m, the number of requests: 1 … MAX_BATCH
-- ARGV[1 + j]   the number of keys of request j
-- ARGV[1+m+j]   the number of arguments of request j
-- then          every request's arguments, request after request (and, in a test assembly only, the
--               time in Unix microseconds last)
--
-- Reply: one element per request, in order: the take script's reply to it, or its error. A request's
-- error (ADMIT_INVALID, ADMIT_CORRUPT, or a failed command) ends that request alone, before any write
-- of its own, as it would end its own call.

local m = integer(BATCH_ARGV[1], 1, MAX_BATCH)
if not m then
  return redis.error_reply('ADMIT_INVALID batch needs a request count in 1..' .. MAX_BATCH)
end
local nargs = #BATCH_ARGV
if BATCH_TEST_CLOCK then
  nargs = nargs - 1
end
local nk, na = 0, 1 + 2 * m
for j = 1, m do
  local k, a = integer(BATCH_ARGV[1 + j], 1, 2 * MAX_REQUESTS + 1), integer(BATCH_ARGV[1 + m + j], 3, MAX)
  if not k or not a then
    return redis.error_reply('ADMIT_INVALID batch request ' .. j .. ' needs a key count and an argument count')
  end
  nk, na = nk + k, na + a
end
if nk ~= #BATCH_KEYS or na ~= nargs then
  return redis.error_reply('ADMIT_INVALID batch counts ' .. nk .. ' keys and ' .. na .. ' arguments, got ' ..
    #BATCH_KEYS .. ' and ' .. nargs)
end

local at
if BATCH_TEST_CLOCK then
  at = BATCH_ARGV[#BATCH_ARGV]
else
  local tm = redis.call('TIME')
  at = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
end

local function take_one()
  local r = take_straight()
  if r then
    return r
  end
  return take_general()
end

local reply = {}
local kx, ax, pk, pa = 0, 1 + 2 * m, 0, 0 -- the keys and arguments before request j's; the last request's counts
for j = 1, m do
  local k, a = tonumber(BATCH_ARGV[1 + j]), tonumber(BATCH_ARGV[1 + m + j])
  for x = 1, k do
    KEYS[x] = BATCH_KEYS[kx + x]
  end
  for x = pk, k + 1, -1 do
    KEYS[x] = nil
  end
  for x = 1, a do
    ARGV[x] = BATCH_ARGV[ax + x]
  end
  ARGV[a + 1] = at
  for x = pa + 1, a + 2, -1 do
    ARGV[x] = nil
  end
  kx, ax, pk, pa, ARGS, clock = kx + k, ax + a, k, a, a, nil
  local ok, r = pcall(take_one)
  if not ok then
    if type(r) ~= 'table' or not r.err then
      r = {err = 'ERR ' .. tostring(r)}
    end
  end
  reply[j] = r
end
return reply
