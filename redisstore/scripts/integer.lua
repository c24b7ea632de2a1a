-- integer.lua: the strict integer parser that the prelude and the batch script share. An assembly
-- puts it before the prelude (docs/redis.md, "Scripts"); the batch script's puts it once, at its top,
-- before the functions that run the prelude for each request. The straight paths parse their own
-- arguments inline and never see it.

-- integer returns s as a strict decimal integer in lo … hi, or nil. It refuses "1.5", "1e3", "0x10",
-- " 5", "+5" and "007", and nil (an argument missing). s is a string or nil: ARGV and replies hold
-- nothing else. '0' and '1', the most common costs, skip the pattern and the parse; string.match and
-- tonumber are looked up once per call (each costs about as much as the parse, bench/scriptcost.md).
local match, tonumber = string.match, tonumber
local function integer(s, lo, hi)
  local v
  if s == '1' then
    v = 1
  elseif s == '0' then
    v = 0
  elseif not s or #s > MAX_DIGITS or not match(s, '^[1-9]%d*$') then
    return nil
  else
    v = tonumber(s)
  end
  if v < lo or v > hi then
    return nil
  end
  return v
end
