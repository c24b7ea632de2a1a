-- The minimal fixed-window script: the floor admit's scripts are measured against (issue 13), in
-- BenchmarkScriptCost_ReferenceMinimalFixedWindow. GET, then PTTL and INCRBY on a live key or SET ... PX on a missing
-- one, with plain tonumber and no validation of the arguments or the stored state.
--
-- KEYS[1]  the counter
-- ARGV     limit, window in milliseconds, cost
-- Reply    {allowed, remaining, retry_after_ms, reset_after_ms}
local limit, cost = tonumber(ARGV[1]), tonumber(ARGV[3])
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
  return {1, limit - cost, 0, tonumber(ARGV[2])}
end
local count = tonumber(v)
local ttl = redis.call('PTTL', KEYS[1])
if count + cost > limit then
  return {0, limit - count, ttl, ttl}
end
redis.call('INCRBY', KEYS[1], ARGV[3])
return {1, limit - count - cost, 0, ttl}
