-- concurrency.lua: the in-flight limit (docs/concurrency.md), a module of the take script.
--
-- A key is a sorted set with one member per lease: the lease's token, a decimal uint64 that the store
-- makes and passes in, scored with its expiry in Unix microseconds (Redis's TIME, through now(), plus
-- the lease TTL). A lease is live while its expiry is after now. A request of cost 1 is admitted when
-- the live leases plus 1 fit the limit; a cost of 0 is a peek. An admission removes the expired leases
-- (ZREMRANGEBYSCORE), adds its own (ZADD) and makes the key expire when its last lease does, never
-- sooner than it would (PEXPIREAT); a rejection and a peek write nothing, not even the removal. A key
-- holds at most MAX_LEASES (admit.MaxConcurrency) leases. The release script removes one lease.
--
-- Arguments, after the algorithm's name: limit (1 … MAX_LEASES), lease TTL in milliseconds
-- (1 … MAX_WINDOW), cost (0 or 1), and the token of the lease an admission acquires ('0' for a peek).

local concurrency = nil -- the module's table, when the call names concurrency (prelude.lua)
if named_concurrency then
  -- The table is made with its fields, so that filling them in does not grow it.
  concurrency = {parse = false, read = false, decide = false, apply = false}

  -- token reports whether s is a lease token: a decimal integer in 1 … 2^64 − 1, kept as a string (a
  -- Lua number cannot hold every one).
  local function token(s)
    if type(s) ~= 'string' or #s > 20 or not string.match(s, '^[1-9]%d*$') then
      return false
    end
    return #s < 20 or s <= '18446744073709551615'
  end

  -- lease returns the expiry of the lease in a ZRANGE … WITHSCORES reply r, or nil when its member
  -- is not a decimal token or its score is not an integer in 0 … hi.
  local function lease(r, hi)
    if not token(r[1]) then
      return nil
    end
    return integer(r[2], 0, hi)
  end

  -- read reads the key's state at now into p: p.card, its leases; p.live, those live; p.last, the
  -- last expiry; and p.kth, for a request that does not fit, the expiry of the lease whose end lets
  -- it fit. It checks the first and last leases, and that one; the others lie between them. It
  -- returns true, or nil and why the key is corrupt.
  function concurrency.read(key, p)
    local t = now()
    p.now = t
    local card, why = members(key, MAX_LEASES, 'key holds more than ' .. MAX_LEASES .. ' leases')
    if not card then
      return nil, why
    end
    if card == 0 then
      return true
    end
    local hi = t + MAX_WINDOW * 1000 -- leases of a longer TTL than this policy's keep their expiry
    local first = lease(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES'), hi)
    local last = lease(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES'), hi)
    if not first or not last then
      return nil, 'a lease is not a decimal token scored with an integer expiry at most MAX_WINDOW from now'
    end
    if redis.call('PTTL', key) == -1 then
      return nil, 'leases have no expiry'
    end
    p.card, p.last = card, last
    p.live = redis.call('ZCOUNT', key, '(' .. string.format('%.0f', t), '+inf')
    local k = p.live + p.cost - p.limit
    if k > 0 then
      local rank = card - p.live + k - 1
      p.kth = lease(redis.call('ZRANGE', key, rank, rank, 'WITHSCORES'), hi)
      if not p.kth then
        return nil, 'a lease is not a decimal token scored with an integer expiry'
      end
    end
    return true
  end

  -- left returns the milliseconds until expiry, rounded up, and at most the policy's TTL: a lease
  -- acquired under a longer TTL is reported as ending within this one (algo.Concurrency).
  local function left(p, expiry)
    local us = expiry - p.now
    if us > p.w then
      us = p.w
    end
    return math.ceil(us / 1000)
  end

  -- decide returns allowed (0 or 1), remaining, retry_after and reset_after in milliseconds for a
  -- request of cost leases on the state read into p (see sliding_log.lua for cost).
  function concurrency.decide(p, cost)
    local live, limit = p.live, p.limit
    if live + cost <= limit then
      local reset = 0
      if cost > 0 then
        reset = p.window
      elseif live > 0 then
        reset = left(p, p.last)
      end
      return 1, limit - live - cost, 0, reset
    end
    local remaining = limit - live
    if remaining < 0 then
      remaining = 0
    end
    return 0, remaining, left(p, p.kth), left(p, p.last)
  end

  -- apply makes the writes of an admission: the removal of expired leases, if any, the new lease, and
  -- the key's expiry at its last lease's, rounded up to the millisecond.
  function concurrency.apply(key, p)
    if p.cost == 0 then
      return
    end
    local t = p.now
    if p.card > p.live then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', t))
    end
    local expiry = t + p.w
    redis.call('ZADD', key, string.format('%.0f', expiry), p.token)
    if p.last > expiry then
      expiry = p.last
    end
    redis.call('PEXPIREAT', key, string.format('%.0f', math.ceil(expiry / 1000)))
  end

  -- parse reads the arguments from ARGV[i] on and returns the policy's table and the index after them,
  -- or nil and why they are invalid.
  function concurrency.parse(i)
    local limit, window = integer(ARGV[i], 1, MAX_LEASES), integer(ARGV[i + 1], 1, MAX_WINDOW)
    if not limit or not window then
      return nil, 'concurrency needs a limit in 1..' .. MAX_LEASES .. ' and a lease TTL in 1..' .. MAX_WINDOW .. ' ms'
    end
    local cost, tok = integer(ARGV[i + 2], 0, 1), ARGV[i + 3]
    if not cost or (cost == 1 and not token(tok)) or (cost == 0 and tok ~= '0') then
      return nil, "concurrency needs a cost of 0 or 1, and a lease token for a cost of 1 ('0' for 0)"
    end
    return {alg = concurrency, limit = limit, window = window, cost = cost, token = tok, w = window * 1000,
      now = 0, card = 0, live = 0, last = 0, kth = 0}, i + 4
  end
end
