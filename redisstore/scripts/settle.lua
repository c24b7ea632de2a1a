-- settle.lua: the entry point that settles one reservation at its actual cost (docs/reserve-settle.md).
--
-- KEYS[1]   the reservation's key
-- ARGV[1]   the algorithm's name: fixed_window, sliding_window, sliding_log or gcra
-- ARGV[2..] that algorithm's own arguments, as take.lua passes them, with the cost reserved
-- then      the token take.lua reported for the reservation (0 … MAX_TAT), and the actual cost
--           (0 … MAX)
--           (and, in a test assembly only, the time in Unix microseconds last)
--
-- Reply: {allowed, remaining, retry_after_ms, reset_after_ms}: the key's decision after settling, a
-- peek of it, or, when an overrun did not fit whole, the rejection of one unit more.
--
-- The key is read and checked as take.lua reads it (corrupt state is refused before any write); the
-- module's settle makes a refund's write, or says how many units of an overrun fit now, which are
-- admitted as take.lua admits them, with the module's apply (no write when nothing changes); then the
-- key is read again, into a fresh policy, and decided as take.lua decides, so that the reply is the
-- stored state's.

local name = ARGV[1]
local alg = name == 'fixed_window' and fixed_window or name == 'gcra' and gcra or name == 'sliding_window' and
  sliding_window or name == 'sliding_log' and sliding_log
if not alg or #KEYS ~= 1 then
  return redis.error_reply('ADMIT_INVALID settle needs one key and an algorithm that settles')
end
local p, i = alg.parse(2)
if not p then
  return redis.error_reply('ADMIT_INVALID ' .. i)
end
if i + 1 ~= ARGS then
  return redis.error_reply('ADMIT_INVALID settle got ' .. ARGS .. ' arguments, want ' .. (i + 1))
end
local ts, as = ARGV[i], ARGV[i + 1]
--@fragment settle_token_actual
-- The settle script's token and actual cost, parsed strictly from their decimal strings ts and as,
-- as fixed_window_parse parses a cost. Declares token and actual; the site checks their ranges.
local token = ts == '0' and 0 or #ts <= MAX_DIGITS and match(ts, '^[1-9]%d*$') and tonumber(ts)
local actual = as == '0' and 0 or as == '1' and 1 or #as <= MAX_DIGITS and match(as, '^[1-9]%d*$') and tonumber(as)
--@end
if not token or token > MAX_TAT or not actual or actual > MAX or p.cost == 0 then
  return redis.error_reply('ADMIT_INVALID settle needs a reserved cost of at least 1, a token and an actual cost')
end

local ok, why = alg.read(KEYS[1], p)
if not ok then
  return redis.error_reply('ADMIT_CORRUPT ' .. why)
end
local probe, delta = 0, actual - p.cost
local n = alg.settle(KEYS[1], p, token, delta)
if n > 0 then
  p.cost, p.cost_arg = n, string.format('%d', n)
  alg.apply(KEYS[1], p)
end
if n < delta then
  probe = 1 -- an overrun that did not fit whole: the key is full
end

local after = alg.parse(2)
after.cost = probe
ok, why = alg.read(KEYS[1], after)
if not ok then
  return redis.error_reply('ADMIT_CORRUPT after settling: ' .. why) -- no admit write makes this
end
local allowed, remaining, retry, reset = alg.decide(after, probe)
return {allowed, remaining, retry, reset}
