-- prelude.lua: what every admit script shares (docs/redis.md, "Scripts").
--
-- redisstore renders these constants from the Go ones above this file, so that Lua and Go check the
-- same bounds:
--   MAX           the largest limit, count or cost (admit.MaxRate)
--   MAX_WINDOW    the longest window, in milliseconds (admit.MaxPeriod)
--   MAX_DIGITS    the most decimal digits either may have
--   MAX_REQUESTS  the most policies one call decides together (admit.MaxRequests)
--   MAX_LOG       the largest limit of a sliding log, and the most entries its key holds
--                 (admit.MaxSlidingLogRate)
--   MAX_LEASES    the largest limit of a concurrency key, and the most leases it holds
--                 (admit.MaxConcurrency)
--   MAX_REASON    the longest reason of an override, in bytes
-- and CLOCK_FROM_ARGV, false but in a test assembly, which takes the time from its last argument.
--
-- Errors are raised as 'ADMIT_INVALID <why>' for bad arguments and 'ADMIT_CORRUPT <why>' for a key
-- that holds something no admit script writes, always before any write.
--
-- Every function a script defines is a new closure on every call (Redis runs the whole chunk each
-- time), and every table a new allocation, which Redis's CPU pays for twice, making it and collecting
-- it (bench/scriptcost.md measures both). So the prelude defines only now, after integer.lua's integer (and, below,
-- the two pieces modules share, when the call names a module that runs them), a module defines its
-- functions only when the call names its algorithm (named_*, below), and error replies and formats
-- are written where they are needed. Replies hold integers only, and writes pass
-- decimal strings, never a Lua number (Redis would format a large one as a double).
--
-- The straight paths (take_single.lua, settle_single.lua) run before all this, with no function of
-- their own: each module's parse, read, decision and writes are --@fragment regions, code the module
-- runs itself, which internal/tools/luagen splices into them as text (go generate), so that every
-- algorithm is written once. A region reads and sets locals its header names, and sets why where the
-- module would return an error.

-- integer, match and tonumber are integer.lua's, which every assembly puts before this file.

-- ARGS is the number of arguments the entry point reads: all, but the time of a test assembly.
local ARGS = #ARGV
if CLOCK_FROM_ARGV then
  ARGS = ARGS - 1
end

-- now returns the time in Unix microseconds, read once per call from Redis's clock (TIME), never the
-- application's: application servers with skewed clocks still agree. A test assembly reads it from
-- its last argument instead.
local clock = nil
local function now()
  if not clock then
    local now
    --@fragment clock_us
    -- Now, Unix µs: Redis's TIME, or a test assembly's last argument (CLOCK_FROM_ARGV). Sets now,
    -- which the site declares.
    if CLOCK_FROM_ARGV then
      now = tonumber(ARGV[#ARGV])
    else
      local tm = redis.call('TIME')
      now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
    end
    --@end
    clock = now
  end
  return clock
end

-- named_<algorithm> says whether the call names that algorithm: the take script names each policy's
-- at ARGV[4] and after each policy's arguments, the settle script its one at ARGV[1]. A module
-- defines its functions only when its algorithm is named, so that a call pays for the closures of the
-- modules it uses and no other. The walk reads the names only, not every argument (each Lua
-- instruction costs Redis ~50 machine instructions, bench/scriptcost.md), so it knows how many
-- arguments follow each name: 4, or 3 for the sliding ones (the modules' parse). Should it go wrong,
-- a module the call needs is missing, and the call fails as if its algorithm were unknown. settling
-- says whether ARGV[1] names an algorithm: the settle script's call, whose module defines settle too.
local named_fixed_window, named_gcra, named_sliding_window, named_sliding_log, named_concurrency = false, false,
  false, false, false
local j = 1
while true do
  local a = ARGV[j]
  if a == 'fixed_window' then
    named_fixed_window, j = true, j + 5
  elseif a == 'sliding_window' then
    named_sliding_window, j = true, j + 4
  elseif a == 'gcra' then
    named_gcra, j = true, j + 5
  elseif a == 'concurrency' then
    named_concurrency, j = true, j + 5
  elseif a == 'sliding_log' then
    named_sliding_log, j = true, j + 4
  elseif j == 1 then
    j = 4 -- not the settle script's algorithm: the take script's first policy, if any
  else
    break
  end
end
local first = ARGV[1]
local settling = first == 'fixed_window' or first == 'gcra' or first == 'sliding_window' or first == 'sliding_log'

-- The pieces modules share, defined only when the call names a module that runs them (a function
-- is a closure made on every call): window_parse, the arguments of the fixed window, the sliding
-- window and the sliding log; count_decide, the decision of the sliding log and of concurrency,
-- keys that count the units in force. The straight paths splice their --@fragment regions in.
local window_parse, count_decide = nil, nil
if named_fixed_window or named_sliding_window or named_sliding_log then
  -- window_parse returns limit, window and cost parsed from ls, ws and cs, and why they are invalid
  -- (nil when they are not) under hi, the largest limit of the algorithm named alg.
  function window_parse(ls, ws, cs, orate, hi, alg)
    local why = nil
    --@fragment window_parse
    -- A window's arguments, parsed strictly from their decimal strings ls, ws, cs (at most
    -- MAX_DIGITS digits matching ^[1-9]%d*$, then tonumber, then the range; a cost of '0' or '1'
    -- compared, not parsed), for the algorithm named alg, whose largest limit is hi. Declares
    -- limit, window and cost; sets why (declared nil) to why they are invalid.
    -- orate (declared), when not nil, is an override's rate, already parsed: the limit.
    local limit = orate or #ls <= MAX_DIGITS and match(ls, '^[1-9]%d*$') and tonumber(ls)
    local window = #ws <= MAX_DIGITS and match(ws, '^[1-9]%d*$') and tonumber(ws)
    local cost = cs == '1' and 1 or cs == '0' and 0 or #cs <= MAX_DIGITS and match(cs, '^[1-9]%d*$') and tonumber(cs)
    if not (limit and limit <= hi and window and window <= MAX_WINDOW) then
      why = alg .. ' needs a limit in 1..' .. hi .. ' and a window in 1..' .. MAX_WINDOW .. ' ms'
    elseif not (cost and cost <= limit) then
      why = 'cost must be an integer in 0..limit'
    end
    --@end
    return limit, window, cost, why
  end
end
if named_sliding_log or named_concurrency then
  -- count_decide returns allowed (0 or 1), remaining, retry_after and reset_after in milliseconds
  -- for a request of cost units on n units in force under limit.
  function count_decide(n, cost, limit, window, ends, frees, now, w)
    --@fragment count_decide
    -- The decision for cost units of a key that counts the units in force, a sliding log's entries
    -- in the window or a concurrency key's live leases. Reads n, those in force, cost, limit, window
    -- (ms), ends, when the last of the n leaves (µs), frees, when the one whose exit lets cost fit
    -- leaves (µs; read only when it does not fit), now (µs) and w (the window or lease TTL, µs).
    -- Declares allowed (0 or 1), remaining, retry and reset: the milliseconds until an exit, rounded
    -- up (ceil(a / 1000) is (a + 999 - (a + 999) % 1000) / 1000, exact below 2^53), and at most w (a
    -- lease acquired under a longer TTL is reported as ending within this one).
    local allowed, remaining, retry, reset = 1, limit - n - cost, 0, 0
    if n + cost <= limit then
      if cost > 0 then
        reset = window
      elseif n > 0 then
        reset = ends - now
        if reset > w then
          reset = w
        end
        reset = reset + 999
        reset = (reset - reset % 1000) / 1000
      end
    else
      allowed, remaining, retry, reset = 0, limit - n, frees - now, ends - now
      if retry > w then
        retry = w
      end
      if reset > w then
        reset = w
      end
      if remaining < 0 then
        remaining = 0
      end
      retry, reset = retry + 999, reset + 999
      retry, reset = (retry - retry % 1000) / 1000, (reset - reset % 1000) / 1000
    end
    --@end
    return allowed, remaining, retry, reset
  end
end
