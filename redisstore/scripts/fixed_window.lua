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
  -- ended. Aligned, read adds span, how long a window started now lasts, and ends, its end.
  function fixed_window.parse(i)
    local limit, window = integer(ARGV[i], 1, MAX), integer(ARGV[i + 1], 1, MAX_WINDOW)
    if not limit or not window then
      return nil, 'fixed_window needs a limit in 1..' .. MAX .. ' and a window in 1..' .. MAX_WINDOW .. ' ms'
    end
    local cost = integer(ARGV[i + 2], 0, limit)
    if not cost then
      return nil, 'cost must be an integer in 0..limit'
    end
    local aligned = ARGV[i + 3]
    if aligned ~= '0' and aligned ~= '1' then
      return nil, 'fixed_window needs aligned 0 or 1'
    end
    return {alg = fixed_window, limit = limit, window = window, cost = cost, arg = i, aligned = aligned == '1',
      count = 0, ttl = 0}, i + 4
  end

  -- read reads the key's state into p: p.count stays 0 when the key is missing or its window has
  -- ended, else p.count and p.ttl hold it. It returns true, or nil and why the key is corrupt. PTTL 0
  -- is the key's expiry millisecond: Redis still returns the key from GET, but its window ends now, so
  -- it is read as missing, exactly as memstore reads the same instant. (-2, gone, cannot follow a GET
  -- in one script; it would mean missing too.) Aligned, it first sets p.ends and p.span from now().
  function fixed_window.read(key, p)
    local t -- aligned: now, in Unix milliseconds
    if p.aligned then
      t = math.floor(now() / 1000)
      p.ends = t - t % p.window + p.window
      p.span = p.ends - t
    end
    local raw = redis.pcall('GET', key)
    if not raw then
      return true
    end
    if type(raw) == 'table' then
      return nil, 'key holds a value that is not a string'
    end
    local count = integer(raw, 1, MAX)
    if not count then
      return nil, 'counter is not an integer in 1..' .. MAX
    end
    if p.aligned then
      local at = redis.call('PEXPIRETIME', key)
      if at == -1 then
        return nil, 'counter has no expiry'
      end
      if at > p.ends then
        return nil, 'counter expires after its aligned window ends'
      end
      if at > t then
        p.count, p.ttl = count, at - t
      end
      return true
    end
    local ttl = redis.call('PTTL', key)
    if ttl == -1 then
      return nil, 'counter has no expiry'
    end
    if ttl > p.window then
      return nil, 'counter expires after more than one window'
    end
    if ttl > 0 then
      p.count, p.ttl = count, ttl
    end
    return true
  end

  -- decide returns allowed (0 or 1), remaining, retry_after and reset_after in milliseconds for a
  -- request of cost units (the policy's own, or 0 for a peek) on the state read into p.
  function fixed_window.decide(p, cost)
    if p.count == 0 then
      if cost == 0 then
        return 1, p.limit, 0, 0
      end
      return 1, p.limit - cost, 0, p.span or p.window
    end
    local count, ttl = p.count, p.ttl
    if count + cost > p.limit then
      local remaining = p.limit - count
      if remaining < 0 then
        remaining = 0
      end
      return 0, remaining, ttl, ttl
    end
    return 1, p.limit - count - cost, 0, ttl
  end

  -- apply makes the one write of an admission, and returns its token: the window's end, the key's
  -- absolute expiry in Unix milliseconds (PEXPIRETIME), which INCRBY never changes, so that settle can
  -- tell the window apart from any later one. Aligned, read knows it already: now + ttl, where now is
  -- ends − span. The cost is written as its argument's own string (settle's overrun sets cost_arg).
  function fixed_window.apply(key, p)
    if p.cost == 0 then
      return
    end
    local cost_arg = p.cost_arg or ARGV[p.arg + 2]
    if p.count > 0 then
      redis.call('INCRBY', key, cost_arg)
      if p.aligned then
        return p.ends - p.span + p.ttl
      end
    elseif p.aligned then
      redis.call('SET', key, cost_arg, 'PXAT', string.format('%.0f', p.ends))
      return p.ends
    else
      redis.call('SET', key, cost_arg, 'PX', ARGV[p.arg + 1])
    end
    return redis.call('PEXPIRETIME', key)
  end

  if settling then -- only the settle script settles: a take makes no closure for it
    -- settle makes the write of settling a reservation whose token is token at delta = actual − reserved
    -- units, on the state read into p, and returns whether an overrun fit whole (algo.FixedWindowSettle).
    -- A refund lands only while the key is live with the window end token: it decrements, never below 0,
    -- and deletes a counter it takes to 0 (a stored 0 is corrupt state). An overrun consumes what is left
    -- now, as an admission of that many units.
    function fixed_window.settle(key, p, token, delta)
      if delta < 0 then
        if p.count > 0 and redis.call('PEXPIRETIME', key) == token then
          if -delta >= p.count then
            redis.call('DEL', key)
          else
            redis.call('DECRBY', key, string.format('%d', -delta))
          end
        end
        return true
      end
      local left = p.limit
      if p.count > 0 then
        left = math.max(0, p.limit - p.count)
      end
      local n = math.min(delta, left)
      if n > 0 then
        p.cost, p.cost_arg = n, string.format('%d', n)
        fixed_window.apply(key, p)
      end
      return n == delta
    end
  end
end
