-- The fixed-window script redisstore called before the request model (commit 1225b09), kept for the
-- benchmark BenchmarkPreviousScriptRueidis: the single-policy path before and after, in one run.
local MAX = 1000000000000000
local MAX_WINDOW = 31622400000
local MAX_DIGITS = 16
-- fixed_window.lua: one fixed-window decision (docs/fixed-window.md), the origin design's algorithm.
--
-- KEYS[1]  the counter key
-- ARGV[1]  limit: units per window, 1 … MAX
-- ARGV[2]  window in milliseconds, 1 … MAX_WINDOW
-- ARGV[3]  cost n, 0 … limit (0 = peek: report, consume nothing)
--
-- Reply: {allowed (0|1), remaining, retry_after_ms, reset_after_ms}, integers only.
-- Errors: "ADMIT_INVALID <why>" for bad arguments, "ADMIT_CORRUPT <why>" for a key that holds
-- something this script never writes. Both are raised before any write.
--
-- The window starts at the first admitted request: a missing key is created with SET ... PX, value
-- and expiry in one command. A rejection writes nothing: neither the counter nor its expiry changes.
-- Every check comes first; the only write is the last command. Writes pass the caller's own decimal
-- strings, never a Lua number (which Redis would format as a double).
--
-- MAX, MAX_WINDOW and MAX_DIGITS are defined by a prelude that redisstore renders from the Go
-- constants admit.MaxRate and admit.MaxPeriod, so the script and Go share one source of truth.

-- Strict decimal integer in lo … hi, or nil. Rejects "1.5", "1e3", "0x10", " 5", "+5", "007".
local function integer(s, lo, hi)
  if type(s) ~= 'string' or #s > MAX_DIGITS or not (s == '0' or string.match(s, '^[1-9]%d*$')) then
    return nil
  end
  local v = tonumber(s)
  if v < lo or v > hi then
    return nil
  end
  return v
end

local key = KEYS[1]
local limit = integer(ARGV[1], 1, MAX)
local window = integer(ARGV[2], 1, MAX_WINDOW)
if #KEYS ~= 1 or not limit or not window then
  return redis.error_reply('ADMIT_INVALID fixed_window needs one key, a limit in 1..' .. MAX .. ' and a window in 1..' .. MAX_WINDOW .. ' ms')
end
local n = integer(ARGV[3], 0, limit)
if not n then
  return redis.error_reply('ADMIT_INVALID cost must be an integer in 0..limit')
end

local raw = redis.pcall('GET', key)
if type(raw) == 'table' and raw.err then
  return redis.error_reply('ADMIT_CORRUPT key holds a value that is not a string')
end

local count, ttl
if raw then
  count = integer(raw, 1, MAX)
  if not count then
    return redis.error_reply('ADMIT_CORRUPT counter is not an integer in 1..' .. MAX)
  end
  ttl = redis.call('PTTL', key)
  if ttl == -1 then
    return redis.error_reply('ADMIT_CORRUPT counter has no expiry')
  end
  if ttl > window then
    return redis.error_reply('ADMIT_CORRUPT counter expires after more than one window')
  end
  -- PTTL 0 is the key's expiry millisecond: Redis still returns the key from GET, but its window
  -- ends now. Decide as if it were missing, exactly as memstore decides the same instant: the old
  -- window is over and a new one starts. (-2, gone, cannot follow a GET in one script; it would
  -- mean missing too.)
  if ttl <= 0 then
    raw = nil
  end
end

if not raw then
  if n == 0 then
    return {1, limit, 0, 0}
  end
  redis.call('SET', key, ARGV[3], 'PX', ARGV[2])
  return {1, limit - n, 0, window}
end

if count + n > limit then
  local remaining = limit - count
  if remaining < 0 then
    remaining = 0
  end
  return {0, remaining, ttl, ttl}
end
if n > 0 then
  redis.call('INCRBY', key, ARGV[3])
end
return {1, limit - count - n, 0, ttl}
