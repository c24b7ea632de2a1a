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

  -- read reads the key's state at now into p: p.card, its leases; p.live, those live; p.last, the
  -- last expiry; and p.kth, for a request that does not fit, the expiry of the lease whose end lets
  -- it fit. It returns true, or nil and why the key is corrupt.
  function concurrency.read(key, p)
    local now, limit, cost = now(), p.limit, p.cost
    local card, why, live, last, kth = redis.pcall('ZCARD', key), nil, 0, 0, nil
    --@fragment concurrency_read
    -- A concurrency key read as admit writes it, after card = pcall ZCARD key. Reads key, card,
    -- limit, cost, now (µs), match, tonumber. Sets why (declared nil) to why the key is corrupt, else
    -- live (declared 0) to the live leases, last (declared 0) to the last expiry, and kth (declared
    -- nil), for a request that does not fit, to the expiry of the lease whose end lets it fit. It
    -- checks the first and last leases, and that one, as a decimal token (1 … 2^64 − 1) scored with
    -- an integer expiry in 0 … now + MAX_WINDOW ms (leases of a longer TTL than this policy's keep
    -- their expiry); the others lie between them.
    if type(card) == 'table' then
      why = 'key holds a value that is not a sorted set'
    elseif card > MAX_LEASES then
      why = 'key holds more than ' .. MAX_LEASES .. ' leases'
    elseif card > 0 then
      local hi = now + MAX_WINDOW * 1000
      local r1, r2 = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES'), redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
      local m1, s1, m2, s2 = r1[1], r1[2], r2[1], r2[2]
      local first = #m1 <= 20 and match(m1, '^[1-9]%d*$') and (#m1 < 20 or m1 <= '18446744073709551615') and
        (s1 == '0' and 0 or #s1 <= MAX_DIGITS and match(s1, '^[1-9]%d*$') and tonumber(s1))
      last = #m2 <= 20 and match(m2, '^[1-9]%d*$') and (#m2 < 20 or m2 <= '18446744073709551615') and
        (s2 == '0' and 0 or #s2 <= MAX_DIGITS and match(s2, '^[1-9]%d*$') and tonumber(s2))
      if not (first and first <= hi and last and last <= hi) then
        why = 'a lease is not a decimal token scored with an integer expiry at most MAX_WINDOW from now'
      elseif redis.call('PTTL', key) == -1 then
        why = 'leases have no expiry'
      else
        live = redis.call('ZCOUNT', key, '(' .. string.format('%d', now), '+inf')
        local k = live + cost - limit
        if k > 0 then
          local rank = card - live + k - 1
          local r = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
          local m, sc = r[1], r[2]
          kth = #m <= 20 and match(m, '^[1-9]%d*$') and (#m < 20 or m <= '18446744073709551615') and
            (sc == '0' and 0 or #sc <= MAX_DIGITS and match(sc, '^[1-9]%d*$') and tonumber(sc))
          if not (kth and kth <= hi) then
            why = 'a lease is not a decimal token scored with an integer expiry'
          end
        end
      end
    end
    --@end
    if why then
      return nil, why
    end
    p.now, p.card, p.live, p.last, p.kth = now, card, live, last, kth or 0
    return true
  end

  -- decide returns allowed (0 or 1), remaining, retry_after and reset_after in milliseconds for a
  -- request of cost leases on the state read into p (see sliding_log.lua for cost).
  function concurrency.decide(p, cost)
    return count_decide(p.live, cost, p.limit, p.window, p.last, p.kth, p.now, p.w)
  end

  -- apply makes the writes of an admission (p.cost 1; take.lua calls it for no other) on the state
  -- read into p.
  function concurrency.apply(key, p)
    local card, live, last, now, w, tok = p.card, p.live, p.last, p.now, p.w, p.token
    --@fragment concurrency_apply
    -- A concurrency key's admission of the lease tok on the state concurrency_read read: the removal
    -- of expired leases, if any, the new lease, and the key's expiry at its last lease's, rounded up
    -- to the millisecond. Reads key, card, live, last, now (µs), w (the TTL in µs), tok.
    if card > live then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now))
    end
    local expiry = now + w
    redis.call('ZADD', key, string.format('%d', expiry), tok)
    if last > expiry then
      expiry = last
    end
    expiry = expiry + 999
    redis.call('PEXPIREAT', key, string.format('%d', (expiry - expiry % 1000) / 1000))
    --@end
  end

  -- parse reads the arguments from ARGV[i] on and returns the policy's table and the index after them,
  -- or nil and why they are invalid.
  function concurrency.parse(i)
    local ls, ws, cs, tok, why = ARGV[i] or '', ARGV[i + 1] or '', ARGV[i + 2], ARGV[i + 3] or '', nil
    local orate = nil -- take.lua passes an override's rate as an argument
    --@fragment concurrency_parse
    -- A concurrency limit's arguments, parsed strictly from their decimal strings ls, ws (as
    -- window_parse parses them), cs ('0' or '1') and tok, the lease's token: a decimal integer
    -- in 1 … 2^64 − 1, kept as a string (a Lua number cannot hold every one), or '0' for a peek.
    -- Declares limit, window and cost; sets why (declared nil) to why they are invalid.
    -- orate (declared), when not nil, is an override's rate, already parsed: the limit.
    local limit = orate or #ls <= MAX_DIGITS and match(ls, '^[1-9]%d*$') and tonumber(ls)
    local window = #ws <= MAX_DIGITS and match(ws, '^[1-9]%d*$') and tonumber(ws)
    local cost = cs == '1' and 1 or cs == '0' and 0
    if not (limit and limit <= MAX_LEASES and window and window <= MAX_WINDOW) then
      why = 'concurrency needs a limit in 1..' .. MAX_LEASES .. ' and a lease TTL in 1..' .. MAX_WINDOW .. ' ms'
    elseif not (cost == 0 and tok == '0' or cost == 1 and #tok <= 20 and match(tok, '^[1-9]%d*$') and
      (#tok < 20 or tok <= '18446744073709551615')) then
      why = "concurrency needs a cost of 0 or 1, and a lease token for a cost of 1 ('0' for 0)"
    end
    --@end
    if why then
      return nil, why
    end
    return {alg = concurrency, limit = limit, window = window, cost = cost, token = tok, w = window * 1000,
      now = 0, card = 0, live = 0, last = 0, kth = 0}, i + 4
  end
end
