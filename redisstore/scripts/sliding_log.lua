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
    local now, limit, cost, w = now(), p.limit, p.cost, p.w
    local card, why, count, newest, kth = redis.pcall('ZCARD', key), nil, 0, 0, nil
    --@fragment sliding_log_read
    -- A sliding log's key read as admit writes it, after card = pcall ZCARD key. Reads key, card,
    -- limit, cost, now (µs), w (the window in µs), match, tonumber. Sets why (declared nil) to why the
    -- key is corrupt, else count (declared 0) to the entries in the window, newest (declared 0) to the
    -- newest entry's time, and kth (declared nil), when count + cost is above limit, to the time of
    -- the entry whose exit lets cost fit.
    if type(card) == 'table' then
      why = 'key holds a value that is not a sorted set'
    elseif card > MAX_LOG then
      why = 'log holds more than ' .. MAX_LOG .. ' entries'
    elseif card > 0 then
      -- The newest entry is '<t>:<seq>' scored t, an integer time not after now.
      local r = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
      local sc = r[2]
      newest = sc == '0' and 0 or #sc <= MAX_DIGITS and match(sc, '^[1-9]%d*$') and tonumber(sc)
      if not (newest and newest <= now and match(r[1], '^(%d+):[1-9]%d*$') == sc) then
        why = "newest entry is not '<t>:<seq>' scored t, an integer time not after now"
      elseif redis.call('PTTL', key) == -1 then
        why = 'log has no expiry'
      else
        count = redis.call('ZCOUNT', key, '(' .. string.format('%d', now - w), '+inf')
        local k = count + cost - limit
        if k > 0 then
          -- The entries in the window are the newest count (none is after now): the k-th oldest of
          -- them has rank card − count + k − 1, found in logarithmic time.
          local rank = card - count + k - 1
          sc = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2]
          kth = sc == '0' and 0 or #sc <= MAX_DIGITS and match(sc, '^[1-9]%d*$') and tonumber(sc)
          if not (kth and kth <= now) then
            why = 'log holds an entry whose time is not an integer'
          end
        end
      end
    end
    --@end
    if why then
      return nil, why
    end
    p.now, p.card, p.count, p.newest, p.kth = now, card, count, newest, kth or 0
    return true
  end

  -- decide returns allowed (0 or 1), remaining, retry_after and reset_after in milliseconds for a
  -- request of cost units on the state read into p. cost is the policy's own, or 0 for a peek of a
  -- policy that admits its own cost (take.lua asks no other): a rejection waits for p.kth, read for
  -- the policy's own cost.
  function sliding_log.decide(p, cost)
    local w = p.w
    return count_decide(p.count, cost, p.limit, p.window, p.newest + w, p.kth + w, p.now, w)
  end

  -- apply makes the writes of an admission of p.cost units (1 or more: take.lua and settle.lua call it
  -- for no other) on the state read into p.
  function sliding_log.apply(key, p)
    local units = p.cost
    local now, card, count, newest, w = p.now, p.card, p.count, p.newest, p.w
    --@fragment sliding_log_append
    -- A sliding log's admission of units (1 or more) on the state sliding_log_read read: the trim of
    -- the entries that left the window, if any (every entry not in it is before it: none is after
    -- now), units members '<now>:<seq + j>' scored now, j = 1 … units, where seq counts those logged
    -- at now already (1000 to a ZADD, which unpack can take), and the expiry one window after now,
    -- when the newest entry leaves. Reads key, units, card, count, newest, now (µs), w.
    local at = string.format('%d', now)
    if card > count then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - w))
    end
    local seq = 0
    if newest == now then
      seq = redis.call('ZCOUNT', key, at, at)
    end
    if units == 1 then
      redis.call('ZADD', key, at, at .. ':' .. (seq + 1))
    else
      local args = {}
      for j = 1, units do
        args[#args + 1] = at
        args[#args + 1] = at .. ':' .. (seq + j)
        if #args == 2000 or j == units then
          redis.call('ZADD', key, unpack(args))
          args = {}
        end
      end
    end
    local ends = now + w + 999
    redis.call('PEXPIREAT', key, string.format('%d', (ends - ends % 1000) / 1000))
    --@end
    return now
  end

  if settling then -- only the settle script settles: a take makes no closure for it
    -- settle settles a reservation whose token is the time its units were logged at (Unix µs) at delta
    -- = actual − reserved units, on the state read into p (algo.SlidingLogSettle): a refund (delta
    -- below 0) makes its write and returns 0, an overrun writes nothing and returns the units of it
    -- that fit now, which settle.lua admits.
    function sliding_log.settle(key, p, token, delta)
      local now, w = p.now, p.w
      if delta < 0 then
        --@fragment sliding_log_refund
        -- A sliding log's refund of −delta units (delta below 0) of the reservation logged at token:
        -- while token is in the window, up to −delta of the members logged then are removed, those of
        -- the highest sequence numbers, '<token>:<c>' down, so that the members of that microsecond
        -- stay '<token>:1' … and an admission numbers the next ones after them, 1000 to a ZREM. The
        -- expiry stays: the entries left leave the window no later. (Admissions of one microsecond
        -- are indistinguishable: removing one of theirs is the same as removing one of the
        -- reservation's.) Reads key, token, delta, now (µs), w.
        if token > now - w and token <= now then
          local at = string.format('%d', token)
          local c = redis.call('ZCOUNT', key, at, at)
          local r = -delta
          if r > c then
            r = c
          end
          local members = {}
          for j = c, c - r + 1, -1 do
            members[#members + 1] = at .. ':' .. j
            if #members == 1000 or j == c - r + 1 then
              redis.call('ZREM', key, unpack(members))
              members = {}
            end
          end
        end
        --@end
        return 0
      end
      local count, limit = p.count, p.limit
      --@fragment sliding_log_overrun
      -- How many units of an overrun of delta (0 or more) a sliding log admits now: what is left of
      -- limit after count, at most delta. Reads count, limit, delta; declares units.
      local units = limit - count
      if units < 0 then
        units = 0
      end
      if units > delta then
        units = delta
      end
      --@end
      return units
    end
  end

  -- parse reads the arguments from ARGV[i] on and returns the policy's table and the index after them,
  -- or nil and why they are invalid.
  function sliding_log.parse(i)
    -- No override's rate (orate): take.lua passes one as an argument.
    local limit, window, cost, why = window_parse(ARGV[i] or '', ARGV[i + 1] or '', ARGV[i + 2] or '', nil, MAX_LOG,
      'sliding_log')
    if why then
      return nil, why
    end
    return {alg = sliding_log, limit = limit, window = window, cost = cost, w = window * 1000,
      now = 0, card = 0, count = 0, newest = 0, kth = 0}, i + 3
  end
end
