-- take_single.lua: the take script's single-policy path, the first part of take.lua's assembly,
-- before the prelude. A take of one fixed_window or gcra policy without a request ID and without
-- shadow mode — by far the most common call — is decided here, straight: read, decide, write, with
-- no closure, no table but the reply and no loop. Redis runs the whole chunk on every call, and each
-- closure, table and Lua instruction costs it (bench/scriptcost2.md), so this part comes first and
-- returns before the prelude and the modules define anything.
--
-- It decides exactly as take.lua and the module do (fixed_window.lua, gcra.lua: their comments are
-- the algorithms' own), with the same strict checks of the arguments and of the stored state, and
-- it never errs: an argument it would refuse, and a key it finds corrupt, make it fall through,
-- before any write, to the general path, which reads the same key again and refuses the call with
-- the error of the module. Anything else it does not take (several policies, a request ID, shadow
-- mode, another algorithm) falls through too, after comparing a few arguments.
--
-- Strict parsing, inline (a function would be a closure made on every call): a decimal integer is
-- at most MAX_DIGITS digits matching ^[1-9]%d*$, then tonumber, then its range; '0' and '1', the
-- usual costs, are compared, not parsed. The reply is take.lua's for one policy: {allowed, 0,
-- allowed, remaining, retry_after_ms, reset_after_ms, token}.
if ARGV[1] == '1' and ARGV[2] == '' and ARGV[3] == '' and #KEYS == 1 then
  local name, match, tonumber = ARGV[4], string.match, tonumber
  if name == 'fixed_window' and #ARGV == (CLOCK_FROM_ARGV and 9 or 8) then
    local ls, ws, cs, key = ARGV[5], ARGV[6], ARGV[7], KEYS[1]
    local limit = #ls <= MAX_DIGITS and match(ls, '^[1-9]%d*$') and tonumber(ls)
    local window = #ws <= MAX_DIGITS and match(ws, '^[1-9]%d*$') and tonumber(ws)
    local cost = cs == '1' and 1 or cs == '0' and 0 or #cs <= MAX_DIGITS and match(cs, '^[1-9]%d*$') and tonumber(cs)
    local aligned = ARGV[8]
    if limit and limit <= MAX and window and window <= MAX_WINDOW and cost and cost <= limit and
      (aligned == '0' or aligned == '1') then
      local count, ttl, t, ends = 0, 0, nil, nil -- count 0: missing, or its window has ended
      if aligned == '1' then
        if CLOCK_FROM_ARGV then
          t = math.floor(tonumber(ARGV[9]) / 1000)
        else
          local tm = redis.call('TIME')
          t = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
        end
        ends = t - t % window + window
      end
      local raw, ok = redis.pcall('GET', key), true
      if raw then
        ok = false -- until the key is read as admit writes it
        if type(raw) == 'string' and #raw <= MAX_DIGITS and match(raw, '^[1-9]%d*$') then
          local stored = tonumber(raw)
          if stored <= MAX then
            if t then
              local at = redis.call('PEXPIRETIME', key)
              if at ~= -1 and at <= ends then
                ok = true
                if at > t then
                  count, ttl = stored, at - t
                end
              end
            else
              local left = redis.call('PTTL', key)
              if left ~= -1 and left <= window then
                ok = true
                if left > 0 then
                  count, ttl = stored, left
                end
              end
            end
          end
        end
      end
      if ok then
        if count == 0 then
          if cost == 0 then
            return {1, 0, 1, limit, 0, 0, 0}
          end
          if t then
            redis.call('SET', key, cs, 'PXAT', string.format('%d', ends))
            return {1, 0, 1, limit - cost, 0, ends - t, ends}
          end
          redis.call('SET', key, cs, 'PX', ws)
          return {1, 0, 1, limit - cost, 0, window, redis.call('PEXPIRETIME', key)}
        end
        if count + cost > limit then
          local remaining = limit - count
          if remaining < 0 then
            remaining = 0
          end
          return {0, 0, 0, remaining, ttl, ttl, 0}
        end
        if cost == 0 then
          return {1, 0, 1, limit - count, 0, ttl, 0}
        end
        redis.call('INCRBY', key, cs)
        if t then
          return {1, 0, 1, limit - count - cost, 0, ttl, t + ttl}
        end
        return {1, 0, 1, limit - count - cost, 0, ttl, redis.call('PEXPIRETIME', key)}
      end
    end
  elseif name == 'gcra' and #ARGV == (CLOCK_FROM_ARGV and 9 or 8) then
    local rs, ws, cs, bs, key = ARGV[5], ARGV[6], ARGV[7], ARGV[8], KEYS[1]
    local rate = #rs <= MAX_DIGITS and match(rs, '^[1-9]%d*$') and tonumber(rs)
    local window = #ws <= MAX_DIGITS and match(ws, '^[1-9]%d*$') and tonumber(ws)
    local burst = #bs <= MAX_DIGITS and match(bs, '^[1-9]%d*$') and tonumber(bs)
    local cost = cs == '1' and 1 or cs == '0' and 0 or #cs <= MAX_DIGITS and match(cs, '^[1-9]%d*$') and tonumber(cs)
    if rate and rate <= MAX and window and window <= MAX_WINDOW and burst and burst <= MAX and cost and cost <= burst and
      rate <= window * 1000 then
      local period = window * 1000
      local interval = math.ceil(period / rate)
      local tolerance = burst * interval
      if (interval * rate - period) * INTERVAL_ROUNDING < period and tolerance <= MAX_TOLERANCE then
        local raw, now, backlog = redis.pcall('GET', key), nil, 0
        if raw then
          if type(raw) == 'string' and #raw <= MAX_DIGITS and match(raw, '^[1-9]%d*$') then
            local tat = tonumber(raw)
            if tat <= MAX_TAT then
              local ttl = redis.call('PTTL', key)
              if ttl >= 0 and ttl <= math.ceil(tolerance / 1000) + 1 then
                if CLOCK_FROM_ARGV then
                  now = tonumber(ARGV[9])
                else
                  local tm = redis.call('TIME')
                  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
                end
                backlog = tat - now
                if backlog > tolerance then
                  now = nil -- corrupt
                elseif backlog < 0 then
                  backlog = 0
                end
              end
            end
          end
        elseif CLOCK_FROM_ARGV then
          now = tonumber(ARGV[9])
        else
          local tm = redis.call('TIME')
          now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
        end
        if now then -- nil: the key is corrupt
          -- floor(a / b) is (a - a % b) / b and ceil(a / 1000) is floor((a + 999) / 1000), exact on these
          -- integers (below 2^53) and cheaper than calling math.floor and math.ceil.
          local room, need, wait = tolerance - backlog, cost * interval, backlog + 999
          wait = (wait - wait % 1000) / 1000
          if need > room then
            local retry = need - room + 999
            return {0, 0, 0, (room - room % interval) / interval, (retry - retry % 1000) / 1000, wait, 0}
          end
          room = room - need
          if cost == 0 then
            return {1, 0, 1, (room - room % interval) / interval, 0, wait, 0}
          end
          backlog = backlog + need
          wait = backlog + 999
          wait = (wait - wait % 1000) / 1000
          redis.call('SET', key, string.format('%d', now + backlog), 'PX', string.format('%d', wait + 1))
          return {1, 0, 1, (room - room % interval) / interval, 0, wait, now + backlog}
        end
      end
    end
  end
end
