-- gcra.lua: the generic cell rate algorithm, a token bucket (docs/gcra.md), a module of the take
-- script; internal/algo/gcra.go is its executable spec.
--
-- A key holds one decimal integer, the theoretical arrival time (TAT) in Unix microseconds: when the
-- bucket is full again. With T the emission interval (the period over the rate, rounded up to the
-- microsecond) and tolerance = burst × T, a request for n units at now fits when
-- max(TAT, now) + n·T − now ≤ tolerance; an admission writes the new TAT with SET ... PX, value and
-- expiry in one command, the expiry just after the TAT (from then on the key is as good as missing);
-- a rejection or a peek writes nothing. Time comes from now() (Redis's TIME, read once per call).
-- All arithmetic is on integers below 2^53, exact in Lua's doubles: the TAT is below MAX_TAT and the
-- tolerance at most MAX_TOLERANCE (redisstore renders these bounds from Go).
--
-- Arguments, after the algorithm's name: rate (1 … MAX), window in milliseconds (1 … MAX_WINDOW),
-- cost (0 … burst; 0 is a peek), burst (1 … MAX), where the interval must be at least 1 µs, rounding
-- it up must slow the rate by less than 1/INTERVAL_ROUNDING, and the tolerance must be at most
-- MAX_TOLERANCE: admit.Limit.Validate's rules.

local gcra = nil -- the module's table, when the call names gcra (prelude.lua)
if named_gcra then
  -- The table is made with its fields, so that filling them in does not grow it.
  gcra = {parse = false, read = false, decide = false, apply = false, settle = false}

  -- parse reads the arguments from ARGV[i] on and returns the policy's table and the index after them,
  -- or nil and why they are invalid. limit is the burst, the most remaining can be.
  function gcra.parse(i)
    local rs, ws, cs, bs, why, orate, ocap = ARGV[i] or '', ARGV[i + 1] or '', ARGV[i + 2] or '', ARGV[i + 3] or '', nil,
      nil, nil -- take.lua passes an override's numbers as arguments
    --@fragment gcra_parse
    -- A gcra bucket's arguments, parsed strictly from their decimal strings rs, ws, cs, bs, as
    -- fixed_window_parse parses them, and checked as admit.Limit.Validate checks them. Declares rate,
    -- window, burst, cost, and interval (the emission interval, µs, rounded up: exact, the period is
    -- below 2^53) and tolerance (burst × interval, exact when at most MAX_TOLERANCE); sets why
    -- (declared nil) to why they are invalid.
    -- orate and ocap (declared), when not nil, are an override's rate and burst, already parsed.
    local rate = orate or #rs <= MAX_DIGITS and match(rs, '^[1-9]%d*$') and tonumber(rs)
    local window = #ws <= MAX_DIGITS and match(ws, '^[1-9]%d*$') and tonumber(ws)
    local burst = ocap or #bs <= MAX_DIGITS and match(bs, '^[1-9]%d*$') and tonumber(bs)
    local cost = cs == '1' and 1 or cs == '0' and 0 or #cs <= MAX_DIGITS and match(cs, '^[1-9]%d*$') and tonumber(cs)
    local interval, tolerance
    if not (rate and rate <= MAX and window and window <= MAX_WINDOW and burst and burst <= MAX) then
      why = 'gcra needs a rate and a burst in 1..' .. MAX .. ' and a window in 1..' .. MAX_WINDOW .. ' ms'
    elseif rate > window * 1000 then
      why = 'gcra needs an emission interval (window / rate) of at least 1 us'
    else
      local period = window * 1000
      interval = math.ceil(period / rate)
      tolerance = burst * interval
      if (interval * rate - period) * INTERVAL_ROUNDING >= period then
        why = 'gcra needs an interval that rounding up to the us slows by less than 1/' .. INTERVAL_ROUNDING
      elseif tolerance > MAX_TOLERANCE then
        why = 'gcra needs burst * interval at most ' .. MAX_TOLERANCE .. ' us'
      elseif not (cost and cost <= burst) then
        why = 'cost must be an integer in 0..burst'
      end
    end
    --@end
    if why then
      return nil, why
    end
    return {alg = gcra, limit = burst, window = window, cost = cost, interval = interval,
      tolerance = tolerance, max_wait = math.ceil(tolerance / 1000), backlog = 0, clamp = false}, i + 4
  end

  -- read reads the key's state into p: p.backlog, how far the TAT is ahead of now, stays 0 when the key
  -- is missing or its bucket has emptied (TAT at or before now). It returns true, or nil and why the key
  -- is corrupt. p.clamp is true for a request with an override key (take.lua).
  function gcra.read(key, p)
    local now, tolerance, why, backlog, clamp = now(), p.tolerance, nil, 0, p.clamp
    --@fragment gcra_read
    -- A gcra bucket's key read as admit writes it. Reads key, tolerance, now (µs), match, tonumber,
    -- clamp. Sets why (declared nil) to why the key is corrupt, else backlog (declared 0) to the
    -- stored TAT's lead over now, 0 to tolerance. With clamp (a request with an override key, whose
    -- numbers may have changed since the TAT was written) a TAT further ahead than a full bucket, or
    -- expiring later than one empties, reads as a full bucket (backlog = tolerance), not as corrupt.
    local raw = redis.pcall('GET', key)
    if raw then
      if type(raw) == 'table' then
        why = 'key holds a value that is not a string'
      else
        local tat = #raw <= MAX_DIGITS and match(raw, '^[1-9]%d*$') and tonumber(raw)
        if not tat or tat > MAX_TAT then
          why = 'theoretical arrival time is not an integer in 1..' .. MAX_TAT
        else
          local ttl = redis.call('PTTL', key)
          if ttl < 0 then
            why = 'theoretical arrival time has no expiry'
          elseif ttl > math.ceil(tolerance / 1000) + 1 then
            if clamp then
              backlog = tolerance
            else
              why = 'theoretical arrival time expires later than a full bucket empties'
            end
          else
            backlog = tat - now
            if backlog <= tolerance then
              if backlog < 0 then
                backlog = 0
              end
            elseif clamp then
              backlog = tolerance
            else
              why = 'theoretical arrival time is further ahead than a full bucket'
            end
          end
        end
      end
    end
    --@end
    if why then
      return nil, why
    end
    p.backlog = backlog
    return true
  end

  -- decide returns allowed (0 or 1), remaining, retry_after and reset_after in milliseconds (rounded up)
  -- for a request of cost units (the policy's own, or 0 for a peek) on the state read into p.
  function gcra.decide(p, cost)
    local tolerance, backlog, interval = p.tolerance, p.backlog, p.interval
    --@fragment gcra_decide
    -- A gcra bucket's decision for cost units on the state gcra_read read. Reads tolerance, backlog,
    -- cost, interval. Declares need (cost × interval), room, allowed (0 or 1), remaining, retry and
    -- reset (ms, rounded up). floor(a / b) is (a - a % b) / b and ceil(a / 1000) is
    -- floor((a + 999) / 1000), exact on these integers (below 2^53) and cheaper than calling
    -- math.floor and math.ceil.
    local room, need = tolerance - backlog, cost * interval
    local allowed, retry, reset = 1, 0, backlog + need + 999
    if need > room then
      allowed, retry, reset = 0, need - room + 999, backlog + 999
      retry = (retry - retry % 1000) / 1000
    else
      room = room - need
    end
    local remaining = (room - room % interval) / interval
    reset = (reset - reset % 1000) / 1000
    --@end
    return allowed, remaining, retry, reset
  end

  -- apply makes the one write of an admission of p.cost units (1 or more: take.lua and settle.lua call
  -- it for no other), and returns its token: the TAT just after it.
  function gcra.apply(key, p)
    local now, backlog = now(), p.backlog + p.cost * p.interval
    --@fragment gcra_set
    -- Writes a gcra bucket's new TAT, now + backlog (µs), expiring 1 ms after it (rounded up to the
    -- millisecond): Redis counts PX from the millisecond its command started, up to 1 ms before now.
    -- Both are written as decimal strings with '%d' (Lua 5.1 formats it from a C long: exact for
    -- integers below 2^53, and twice as fast as '%.0f'). Reads key, now, backlog (above 0).
    local expires = backlog + 999
    redis.call('SET', key, string.format('%d', now + backlog), 'PX', string.format('%d', (expires - expires % 1000) / 1000 + 1))
    --@end
    return now + backlog
  end

  if settling then -- only the settle script settles: a take makes no closure for it
    -- settle settles a reservation whose token is the TAT its admission left (Unix µs) at delta =
    -- actual − reserved units, on the state read into p (algo.GCRASettle): a refund (delta below 0)
    -- makes its write and returns 0, an overrun writes nothing and returns the units of it that fit
    -- now, which settle.lua admits.
    function gcra.settle(key, p, token, delta)
      local now, backlog, interval, tolerance = now(), p.backlog, p.interval, p.tolerance
      if delta < 0 then
        --@fragment gcra_refund
        -- A gcra bucket's refund of −delta units (delta below 0) of the reservation whose TAT was
        -- token: the TAT moves back by min(−delta × interval, token − now), the part of the
        -- reservation the bucket has not drained yet, and never before now: a TAT taken back to now
        -- is a full bucket, and the key is deleted. Reads key, delta, token, now, interval; sets
        -- backlog to the key's after it.
        if backlog > 0 and token > now then
          local back = -delta * interval
          if back > token - now then
            back = token - now
          end
          backlog = backlog - back
          if backlog <= 0 then
            redis.call('DEL', key)
            backlog = 0
          else
            local expires = backlog + 999
            redis.call('SET', key, string.format('%d', now + backlog), 'PX', string.format('%d', (expires - expires % 1000) / 1000 + 1))
          end
        end
        --@end
        return 0
      end
      --@fragment gcra_overrun
      -- How many units of an overrun of delta (0 or more) a gcra bucket admits now: what fits, at
      -- most delta. Reads tolerance, backlog, interval, delta; declares n.
      local room = tolerance - backlog
      local n = (room - room % interval) / interval
      if n > delta then
        n = delta
      end
      --@end
      return n
    end
  end
end
