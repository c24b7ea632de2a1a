-- fixed_window.lua: the origin design's algorithm (docs/fixed-window.md), a module of the take script.
--
-- A key holds one decimal counter with an expiry. The window starts at the first admitted request: a
-- missing key is created with SET ... PX, value and expiry in one command; an admission adds with
-- INCRBY, leaving the expiry alone; a rejection writes nothing. Time comes only from the key's own
-- expiry, Redis's clock.
--
-- Aligned (admit.Limit.Aligned): the windows are [k * window, (k + 1) * window) in Unix milliseconds,
-- as envoyproxy/ratelimit counts, from now() (Redis's TIME). A missing key is created with
-- SET ... PXAT the window's end, so its expiry is that end, exactly; the key is read with
-- PEXPIRETIME, the absolute expiry, which does not depend on when the script runs. A counter whose
-- expiry is at or before now has ended (the key's expiry millisecond, or earlier); one whose expiry
-- lies after the end of the window of now is corrupt.
--
-- Arguments, after the algorithm's name: limit (1 … MAX), window in milliseconds (1 … MAX_WINDOW),
-- cost (0 … limit; 0 is a peek), aligned ('1') or from the first admission ('0').

local fixed_window = nil -- the module's table, when the call names fixed_window (prelude.lua)
if named_fixed_window then
  -- The table is made with its fields, so that filling them in does not grow it.
  fixed_window = {parse = false, read = false, decide = false, apply = false, settle = false}

  -- parse reads the arguments from ARGV[i] on and returns the policy's table and the index after them,
  -- or nil and why they are invalid. The table is made whole in one constructor (growing it field by
  -- field would rehash it three times), with room for the state read reads into it, and no more than
  -- 8 fields (its hash part would double): arg is i, where the window's and the cost's own decimal
  -- strings are read from for the writes; count stays 0 while the key is missing or its window has
  -- ended. Aligned, read adds t, now in ms, ends, the window's end, and expires, the key's.
  function fixed_window.parse(i)
    local ls, ws, cs, aligned, why = ARGV[i] or '', ARGV[i + 1] or '', ARGV[i + 2] or '', ARGV[i + 3], nil
    local orate = nil -- take.lua passes an override's rate as an argument
    local limit, window, cost
    limit, window, cost, why = window_parse(ls, ws, cs, orate, MAX, 'fixed_window')
    --@fragment fixed_window_parse
    -- A fixed window's aligned argument, after window_parse: sets why, unless window_parse set it,
    -- when aligned is neither '0' nor '1'. Reads aligned.
    if not why and aligned ~= '0' and aligned ~= '1' then
      why = 'fixed_window needs aligned 0 or 1'
    end
    --@end
    if why then
      return nil, why
    end
    return {alg = fixed_window, limit = limit, window = window, cost = cost, arg = i, aligned = aligned == '1',
      count = 0, ttl = 0}, i + 4
  end

  -- read reads the key's state into p: p.count stays 0 when the key is missing or its window has
  -- ended, else p.count and p.ttl hold it. It returns true, or nil and why the key is corrupt.
  -- Aligned, it first sets p.t and p.ends from now(), and p.expires to the key's PEXPIRETIME.
  function fixed_window.read(key, p)
    local window, count, ttl, t, ends, expires, why = p.window, 0, 0, nil, nil, nil, nil
    if p.aligned then
      local now = now()
      --@fragment fixed_window_aligned
      -- An aligned fixed window's now and end, in Unix ms, from now (µs). Reads now, window; sets t
      -- and ends, which the site declares nil.
      t = (now - now % 1000) / 1000
      ends = t - t % window + window
      --@end
    end
    local raw = redis.pcall('GET', key)
    --@fragment fixed_window_read
    -- A fixed window's key read as admit writes it, after raw = pcall GET key. PTTL 0 is the key's
    -- expiry millisecond: Redis still returns the key from GET, but its window ends now, so it is read
    -- as missing, exactly as memstore reads the same instant. (-2, gone, cannot follow a GET in one
    -- script; it would mean missing too.) Aligned, the key is read with PEXPIRETIME, the absolute
    -- expiry, which does not depend on when the script runs: a counter whose expiry is at or before
    -- now has ended; one whose expiry lies after the end of the window of now is corrupt. Reads key,
    -- raw, window, match, tonumber, and t and ends (fixed_window_aligned; nil unless the window is
    -- aligned). Sets why (declared nil) to why the key is corrupt, else count and ttl (declared 0) to
    -- the key's count and ms to live while its window lasts, and expires (declared nil) to the key's
    -- PEXPIRETIME, aligned windows only.
    if raw then
      if type(raw) == 'table' then
        why = 'key holds a value that is not a string'
      else
        local stored = #raw <= MAX_DIGITS and match(raw, '^[1-9]%d*$') and tonumber(raw)
        if not stored or stored > MAX then
          why = 'counter is not an integer in 1..' .. MAX
        elseif t then
          expires = redis.call('PEXPIRETIME', key)
          if expires == -1 then
            why = 'counter has no expiry'
          elseif expires > ends then
            why = 'counter expires after its aligned window ends'
          elseif expires > t then
            count, ttl = stored, expires - t
          end
        else
          local left = redis.call('PTTL', key)
          if left == -1 then
            why = 'counter has no expiry'
          elseif left > window then
            why = 'counter expires after more than one window'
          elseif left > 0 then
            count, ttl = stored, left
          end
        end
      end
    end
    --@end
    if why then
      return nil, why
    end
    p.count, p.ttl, p.t, p.ends, p.expires = count, ttl, t, ends, expires
    return true
  end

  -- decide returns allowed (0 or 1), remaining, retry_after and reset_after in milliseconds for a
  -- request of cost units (the policy's own, or 0 for a peek) on the state read into p.
  function fixed_window.decide(p, cost)
    local count, ttl, limit, window, t, ends = p.count, p.ttl, p.limit, p.window, p.t, p.ends
    --@fragment fixed_window_decide
    -- A fixed window's decision for cost units on the state fixed_window_read read. Reads count, ttl,
    -- limit, cost, window, t, ends. Declares allowed (0 or 1), remaining, retry and reset (ms): a
    -- window an admission starts lasts window, or aligned until ends.
    local allowed, remaining, retry, reset = 1, limit - count - cost, 0, ttl
    if count == 0 then
      if cost == 0 then
        reset = 0
      elseif t then
        reset = ends - t
      else
        reset = window
      end
    elseif count + cost > limit then
      allowed, remaining, retry = 0, limit - count, ttl
      if remaining < 0 then
        remaining = 0
      end
    end
    --@end
    return allowed, remaining, retry, reset
  end

  -- apply makes the one write of an admission, and returns its token: the window's end, the key's
  -- absolute expiry in Unix milliseconds (PEXPIRETIME), which INCRBY never changes, so that settle can
  -- tell the window apart from any later one. Aligned, read knows it already: t + ttl, or ends for a
  -- new window. The cost (1 or more: take.lua and settle.lua call it for no other) is written as its
  -- argument's own string (settle's overrun sets cost_arg).
  function fixed_window.apply(key, p)
    local count, t, ends, cs, ws = p.count, p.t, p.ends, p.cost_arg or ARGV[p.arg + 2], ARGV[p.arg + 1]
    --@fragment fixed_window_write
    -- A fixed window's write of an admission of cs units (a decimal string) on the state
    -- fixed_window_read read: INCRBY of a live counter, which leaves its expiry alone, else a new
    -- counter with SET, value and expiry in one command: PXAT ends aligned, PX ws (the window's own
    -- decimal string) otherwise. Reads key, count, cs, ws, t, ends.
    if count > 0 then
      redis.call('INCRBY', key, cs)
    elseif t then
      redis.call('SET', key, cs, 'PXAT', string.format('%d', ends))
    else
      redis.call('SET', key, cs, 'PX', ws)
    end
    --@end
    if not t then
      return redis.call('PEXPIRETIME', key)
    end
    if count > 0 then
      return t + p.ttl
    end
    return ends
  end

  if settling then -- only the settle script settles: a take makes no closure for it
    -- settle settles a reservation whose token is token at delta = actual − reserved units, on the state
    -- read into p (algo.FixedWindowSettle): a refund (delta below 0) makes its write and returns 0, an
    -- overrun writes nothing and returns the units of it that fit now, which settle.lua admits.
    function fixed_window.settle(key, p, token, delta)
      local count, expires, limit = p.count, p.expires, p.limit
      if delta < 0 then
        --@fragment fixed_window_refund
        -- A fixed window's refund of −delta units (delta below 0): it lands only while the key is live
        -- with the window end token; it decrements, never below 0, and deletes a counter it takes to 0
        -- (a stored 0 is corrupt state). Reads key, delta, token, expires (fixed_window_read); sets
        -- count to the key's after it.
        if count > 0 and (expires or redis.call('PEXPIRETIME', key)) == token then
          if -delta >= count then
            redis.call('DEL', key)
            count = 0
          else
            redis.call('DECRBY', key, string.format('%d', -delta))
            count = count + delta
          end
        end
        --@end
        return 0
      end
      --@fragment fixed_window_overrun
      -- How many units of an overrun of delta (0 or more) a fixed window admits now, as an admission
      -- of that many units: what is left of limit, at most delta. Reads limit, count, delta; declares n.
      local n = limit
      if count > 0 then
        n = limit - count
        if n < 0 then
          n = 0
        end
      end
      if n > delta then
        n = delta
      end
      --@end
      return n
    end
  end
end
