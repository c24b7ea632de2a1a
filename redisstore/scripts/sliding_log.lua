-- sliding_log.lua: the exact moving window (docs/sliding-log.md), a module of the take script.
--
-- A key is a sorted set with one member per admitted unit, '<t>:<seq>' scored t: the time of its
-- admission in Unix microseconds (Redis's TIME, through now()), and its number among the units
-- admitted in that microsecond, from 1, so that members are unique whatever the cost and however many
-- admissions share a microsecond. A request of n units is admitted when the entries in
-- (now − window, now] plus n fit the limit. An admission removes the entries that have left the
-- window (ZREMRANGEBYSCORE), adds its n members (ZADD) and sets the key to expire one window after
-- now (PEXPIREAT), when its newest entry leaves; a rejection writes nothing, not even the trim. A key
-- holds at most MAX_LOG (admit.MaxSlidingLogRate) entries, the largest limit.
--
-- Arguments, after the algorithm's name: limit (1 … MAX_LOG), window in milliseconds
-- (1 … MAX_WINDOW), cost (0 … limit; 0 is a peek).

local sliding_log = nil -- the module's table, when the call names sliding_log (prelude.lua)
if named_sliding_log then
  -- The table is made with its fields, so that filling them in does not grow it.
  sliding_log = {parse = false, read = false, decide = false, apply = false, settle = false}

  -- read reads the key's state at now into p: p.card, its entries; p.count, those in the window;
  -- p.newest, the newest entry's time; and p.kth, for a request of p.cost that does not fit, the time
  -- of the entry whose exit lets it fit. It returns true, or nil and why the key is corrupt.
  function sliding_log.read(key, p)
    local t = now()
    p.now = t
    local card, why = members(key, MAX_LOG, 'log holds more than ' .. MAX_LOG .. ' entries')
    if not card then
      return nil, why
    end
    if card == 0 then
      return true
    end
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    local score = integer(newest[2], 0, t)
    local at = string.match(newest[1], '^(%d+):[1-9]%d*$')
    if not score or at ~= newest[2] then
      return nil, "newest entry is not '<t>:<seq>' scored t, an integer time not after now"
    end
    if redis.call('PTTL', key) == -1 then
      return nil, 'log has no expiry'
    end
    local from = '(' .. string.format('%.0f', t - p.w)
    p.card, p.newest = card, score
    p.count = redis.call('ZCOUNT', key, from, '+inf')
    local k = p.count + p.cost - p.limit
    if k > 0 then
      -- The entries in the window are the newest count (none is after now): the k-th oldest of them
      -- has rank card − count + k − 1, found in logarithmic time.
      local rank = card - p.count + k - 1
      local kth = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
      p.kth = integer(kth[2], 0, t)
      if not p.kth then
        return nil, 'log holds an entry whose time is not an integer'
      end
    end
    return true
  end

  -- decide returns allowed (0 or 1), remaining, retry_after and reset_after in milliseconds for a
  -- request of cost units on the state read into p. cost is the policy's own, or 0 for a peek of a
  -- policy that admits its own cost (take.lua asks no other): a rejection waits for p.kth, read for
  -- the policy's own cost.
  function sliding_log.decide(p, cost)
    local count, limit = p.count, p.limit
    if count + cost <= limit then
      local reset = 0
      if cost > 0 then
        reset = p.window
      elseif count > 0 then
        reset = math.ceil((p.newest + p.w - p.now) / 1000)
      end
      return 1, limit - count - cost, 0, reset
    end
    local remaining = limit - count
    if remaining < 0 then
      remaining = 0
    end
    return 0, remaining, math.ceil((p.kth + p.w - p.now) / 1000), math.ceil((p.newest + p.w - p.now) / 1000)
  end

  -- apply makes the writes of an admission: the trim of entries that left the window, if any (every
  -- entry not in it is before it: none is after now), the cost's members, in batches that unpack can
  -- take, and the expiry.
  function sliding_log.apply(key, p)
    local units = p.cost
    if units == 0 then
      return
    end
    local t = p.now
    local at = string.format('%.0f', t)
    if p.card > p.count then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', t - p.w))
    end
    local seq = 0
    if p.newest == t then
      seq = redis.call('ZCOUNT', key, at, at)
    end
    --@fragment sliding_log_zadd
    -- Appends units entries '<at>:<seq + j>' scored at, j = 1 … units, 1000 to a ZADD (the straight
    -- paths run it too). Reads key, at, seq, units.
    local args = {}
    for j = 1, units do
      args[#args + 1] = at
      args[#args + 1] = at .. ':' .. (seq + j)
      if #args == 2000 or j == units then
        redis.call('ZADD', key, unpack(args))
        args = {}
      end
    end
    --@end
    redis.call('PEXPIREAT', key, string.format('%.0f', math.ceil((t + p.w) / 1000)))
    return t
  end

  if settling then -- only the settle script settles: a take makes no closure for it
    -- settle makes the write of settling a reservation whose token is the time its units were logged
    -- at (Unix µs) at delta = actual − reserved units, on the state read into p, and returns whether an
    -- overrun fit whole (algo.SlidingLogSettle). A refund, while the token is in the window, removes up
    -- to −delta of the members logged then: those of the highest sequence numbers, '<token>:<c>' down,
    -- so that the members of that microsecond stay '<token>:1' … and apply numbers the next ones after
    -- them. The expiry stays: the entries left leave the window no later. (Admissions of one microsecond
    -- are indistinguishable: removing one of theirs is the same as removing one of the reservation's.)
    function sliding_log.settle(key, p, token, delta)
      local t = p.now
      if delta < 0 then
        if token > t - p.w and token <= t then
          local at = string.format('%.0f', token)
          local c = redis.call('ZCOUNT', key, at, at)
          local r = math.min(-delta, c)
          --@fragment sliding_log_zrem
          -- Removes the r members logged at at with the highest sequence numbers, '<at>:<c>' down to
          -- '<at>:<c − r + 1>', 1000 to a ZREM (the straight paths run it too). Reads key, at, c (how
          -- many were logged at at), r.
          local members = {}
          for j = c, c - r + 1, -1 do
            members[#members + 1] = at .. ':' .. j
            if #members == 1000 or j == c - r + 1 then
              redis.call('ZREM', key, unpack(members))
              members = {}
            end
          end
          --@end
        end
        return true
      end
      local left = math.max(0, p.limit - p.count)
      local n = math.min(delta, left)
      if n > 0 then
        p.cost = n
        sliding_log.apply(key, p)
      end
      return n == delta
    end
  end

  -- parse reads the arguments from ARGV[i] on and returns the policy's table and the index after them,
  -- or nil and why they are invalid.
  function sliding_log.parse(i)
    local limit, window = integer(ARGV[i], 1, MAX_LOG), integer(ARGV[i + 1], 1, MAX_WINDOW)
    if not limit or not window then
      return nil, 'sliding_log needs a limit in 1..' .. MAX_LOG .. ' and a window in 1..' .. MAX_WINDOW .. ' ms'
    end
    local cost = integer(ARGV[i + 2], 0, limit)
    if not cost then
      return nil, 'cost must be an integer in 0..limit'
    end
    return {alg = sliding_log, limit = limit, window = window, cost = cost, w = window * 1000,
      now = 0, card = 0, count = 0, newest = 0, kth = 0}, i + 3
  end
end
