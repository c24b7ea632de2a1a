-- take_single.lua: the take script's straight paths, the first part of take.lua's assembly, before
-- the prelude. A take without a request ID — by far the most common call — of one policy of any
-- algorithm, or of several fixed windows, gcra buckets and sliding windows, in shadow mode or not, is
-- decided here, straight: read, decide, write, with no closure, no table but the reply, and no loop
-- but over the policies. Redis runs the whole chunk on every call, and each closure, table and Lua
-- instruction costs it (BENCHMARKS.md, "Redis CPU per decision"), so this part comes first and returns before the
-- prelude and the modules define anything.
--
-- It decides as take.lua and the modules do, with the modules' own code: each algorithm's parse,
-- read, decision and writes are --@fragment regions of its module (fixed_window.lua, gcra.lua,
-- sliding_window.lua, sliding_log.lua, concurrency.lua: their comments are the algorithms' own),
-- spliced in here. What this file writes itself is how a take composes them: the reply, shadow mode,
-- all-or-nothing over several policies. It never errs: an argument it would refuse,
-- and a key it finds corrupt, make it fall through, before any write, to the general path, which
-- reads the keys again and refuses the call with the error of the module. So does a sliding window
-- whose exact integer arithmetic would need the module's muldiv (products of 2^52 or more). Anything
-- else (a request ID, several policies of which one is a sliding log or a concurrency limit) falls
-- through too, after comparing a few arguments. redisstore's tests hold each path to the
-- general one, step by step (take_single_test.go).
--
-- The fragments parse strictly, inline (a function would be a closure made on every call): a decimal
-- integer is at most MAX_DIGITS digits matching ^[1-9]%d*$, then tonumber, then its range; '0' and
-- '1', the usual costs, are compared, not parsed. Integer division is (a - a % b) / b, exact below
-- 2^53 and cheaper than math.floor; ceil(a / 1000) is that of a + 999. Writes pass decimal strings
-- made by string.format('%d'), cheaper for Redis than a Lua number (which it formats with %.17g). A
-- fragment sets why where the module returns an error: here, a why falls through. The reply is
-- take.lua's: {allowed, 0, then per policy allowed, remaining, retry_after_ms, reset_after_ms, token}.
--
-- This file is a template: a line --@inline <name> asks for the fragment <name>, and
-- internal/tools/luagen (go generate) writes ../take_single.lua with each fragment's text spliced in,
-- indented as the line, so the script runs the same statements as if each were written out, with
-- no function. A fragment's header comment names the locals it reads and sets.
--
-- A policy with an override key (its flag 2, 3, 6 or 7, take.lua) reads it first: an override's rate,
-- and for gcra its burst (or its rate, when the policy's burst follows the rate: flag 6 or 7), stand
-- in for the arguments' (orate, ocap: the parse fragments take them as parsed), and the reply ends
-- with the policy's number and the override's rate and burst (o1, orate, oburst: nil, and so left
-- out, without an override). Corrupt override bytes fall through, as a corrupt key does. A call
-- without override keys pays the comparisons that pick the path and three nils in each reply.
-- KEYS and ARGV are read from locals: a global's every read is a lookup in the globals table.
local KEYS, ARGV = KEYS, ARGV
local mask, nkeys = ARGV[3], #KEYS -- the policies' flags: '' for none, else a digit per policy (take.lua)
if ARGV[1] == '1' and ARGV[2] == '' and (nkeys == 1 and (mask == '' or mask == '0' or mask == '1') or
    nkeys == 2 and (mask == '2' or mask == '3' or mask == '6' or mask == '7')) then
  local name, match, tonumber = ARGV[4], string.match, tonumber
  -- refused: a rejection's first element, 1 in shadow mode (a shadow rejection rejects nothing);
  -- clamp: an override key (gcra_read's clamp)
  local refused, ors, obs, orate, oburst, ocap, o1, clamp = 0, nil, nil, nil, nil, nil, nil, nkeys == 2
  if clamp then
    local okey, why = KEYS[2], nil
    --@inline override_read
    if mask ~= '2' and mask ~= '6' then
      refused = 1
    end
    if why then
      name = nil -- corrupt: the general path refuses it
    elseif orate then
      o1 = 1
      if oburst > 0 then
        ocap = oburst
      elseif mask == '6' or mask == '7' then
        ocap = orate -- the policy's burst follows the rate (else it stays)
      end
    end
  elseif mask == '1' then
    refused = 1
  end
  if name == 'fixed_window' and #ARGV == (CLOCK_FROM_ARGV and 9 or 8) then
    local ls, ws, cs, aligned, key, why, hi, alg = ARGV[5], ARGV[6], ARGV[7], ARGV[8], KEYS[1], nil, MAX, 'fixed_window'
    --@inline window_parse
    --@inline fixed_window_parse
    if not why then
      local count, ttl, t, ends, expires, why = 0, 0, nil, nil, nil, nil -- count 0: missing, or its window has ended
      if aligned == '1' then
        local now
        --@inline clock_us
        --@inline fixed_window_aligned
      end
      local raw = redis.pcall('GET', key)
      --@inline fixed_window_read
      if not why then
        --@inline fixed_window_decide
        if allowed == 0 then
          return {refused, 0, 0, remaining, retry, reset, 0, o1, orate, oburst}
        end
        if cost == 0 then
          return {1, 0, 1, remaining, 0, reset, 0, o1, orate, oburst}
        end
        --@inline fixed_window_write
        if not t then
          return {1, 0, 1, remaining, 0, reset, redis.call('PEXPIRETIME', key), o1, orate, oburst}
        end
        return {1, 0, 1, remaining, 0, reset, count > 0 and t + ttl or ends, o1, orate, oburst}
      end
    end
  elseif name == 'gcra' and #ARGV == (CLOCK_FROM_ARGV and 9 or 8) then
    local rs, ws, cs, bs, key, why = ARGV[5], ARGV[6], ARGV[7], ARGV[8], KEYS[1], nil
    --@inline gcra_parse
    if not why then
      local now
      --@inline clock_us
      local why, backlog = nil, 0
      --@inline gcra_read
      if not why then
        --@inline gcra_decide
        if allowed == 0 then
          return {refused, 0, 0, remaining, retry, reset, 0, o1, orate, oburst}
        end
        if cost == 0 then
          return {1, 0, 1, remaining, 0, reset, 0, o1, orate, oburst}
        end
        backlog = backlog + need
        --@inline gcra_set
        return {1, 0, 1, remaining, 0, reset, now + backlog, o1, orate, oburst}
      end
    end
  elseif name == 'sliding_window' and #ARGV == (CLOCK_FROM_ARGV and 8 or 7) then
    local ls, ws, cs, key, why, hi, alg = ARGV[5], ARGV[6], ARGV[7], KEYS[1], nil, MAX, 'sliding_window'
    --@inline window_parse
    if not why then
      local now
      --@inline clock_us
      local w = window * 1000
      local cur = now - now % w
      local e, prev, curr, same, why = now - cur, 0, 0, false, nil
      --@inline sliding_window_read
      local ok = not why
      -- ⌈prev × (w − e) / w⌉, exactly while prev × (w − e) is below 2^52 (else the module's muldiv,
      -- through the general path), and, for a rejection, the wait's quotients likewise.
      local used, ab = curr, prev * (w - e)
      if prev > 0 and ok then
        if ab < 4503599627370496 then
          --@inline sliding_window_used
        else
          ok = false
        end
      end
      if ok then
        if used + cost <= limit then
          --@inline sliding_window_reset
          reset = (reset - reset % 1000) / 1000
          if cost == 0 then
            return {1, 0, 1, limit - used, 0, reset, 0, o1, orate, oburst}
          end
          --@inline sliding_window_write
          return {1, 0, 1, limit - used - cost, 0, reset, cur, o1, orate, oburst}
        end
        --@inline sliding_window_rejection
        if not c or ab2 < 4503599627370496 then
          --@inline sliding_window_wait
          return {refused, 0, 0, remaining, (wait - wait % 1000) / 1000, (reset - reset % 1000) / 1000, 0, o1, orate, oburst}
        end
      end
    end
  elseif name == 'concurrency' and #ARGV == (CLOCK_FROM_ARGV and 9 or 8) then
    local ls, ws, cs, tok, key, why = ARGV[5], ARGV[6], ARGV[7], ARGV[8], KEYS[1], nil
    --@inline concurrency_parse
    if not why then
      local now
      --@inline clock_us
      local w, why, live, last, kth = window * 1000, nil, 0, 0, nil
      local card = redis.pcall('ZCARD', key)
      --@inline concurrency_read
      if not why then
        local n, ends, frees = live, last, kth or 0
        --@inline count_decide
        if allowed == 0 then
          return {refused, 0, 0, remaining, retry, reset, 0, o1, orate, oburst}
        end
        if cost == 1 then
          --@inline concurrency_apply
        end
        return {1, 0, 1, remaining, 0, reset, 0, o1, orate, oburst}
      end
    end
  elseif name == 'sliding_log' and #ARGV == (CLOCK_FROM_ARGV and 8 or 7) then
    local ls, ws, cs, key, why, hi, alg = ARGV[5], ARGV[6], ARGV[7], KEYS[1], nil, MAX_LOG, 'sliding_log'
    --@inline window_parse
    if not why then
      local now
      --@inline clock_us
      local w, why, count, newest, kth = window * 1000, nil, 0, 0, nil
      local card = redis.pcall('ZCARD', key)
      --@inline sliding_log_read
      if not why then
        local n, ends, frees = count, newest + w, (kth or 0) + w
        --@inline count_decide
        if allowed == 0 then
          return {refused, 0, 0, remaining, retry, reset, 0, o1, orate, oburst}
        end
        if cost == 0 then
          return {1, 0, 1, remaining, 0, reset, 0, o1, orate, oburst}
        end
        local units = cost
        --@inline sliding_log_append
        return {1, 0, 1, remaining, 0, reset, now, o1, orate, oburst}
      end
    end
  end
elseif ARGV[2] == '' then
  -- Several policies, each a fixed window, a gcra bucket or a sliding window, without an ID:
  -- all-or-nothing as take.lua decides it (a policy in shadow mode, '1' in the mask, takes no part
  -- in it), in passes over the arguments, with no table but the reply (and one of sliding windows'
  -- previous counts, when one starts a window). The first pass reads each key and decides, filling
  -- in the reply, and keeps in it, until the last pass, what an admission of a cost above 0 would
  -- write and what a peek would report:
  --   the token's slot: 0 for nothing to write (a peek, or a rejection); for a fixed window -1
  --     INCRBY and -2 SET ... PX (then PEXPIRETIME), -ends SET ... PXAT ends (aligned, missing), or the
  --     token itself (aligned, live: INCRBY); for gcra the new TAT, the token; for a sliding window
  --     the window's start, the token, negated when the write starts the window (HSET, PEXPIREAT);
  --   the retry slot (0 in an admission's reply): the reset_after a peek reports.
  -- On a rejection, the policies that would have admitted report their keys as peeks; else the last
  -- pass makes the writes. The clock (TIME) is read once, when a policy first needs it.
  local ns, match, tonumber, byte = ARGV[1], string.match, tonumber, string.byte
  local n = #ns <= 2 and match(ns, '^[1-9]%d?$') and tonumber(ns)
  -- With a mask, KEYS holds an override key more per '2' or more in it: checked once the first pass
  -- has read them (o, below), before any write. A mask of one digit is every policy's (one).
  local one = mask and #mask == 1 and (mask == '2' and 2 or mask == '1' and 1 or mask == '3' and 3 or mask == '6' and 6 or
    mask == '7' and 7)
  local ok, i = n and n >= 2 and n <= MAX_REQUESTS and (mask == '' and nkeys == n or nkeys >= n and
    (one or #mask == n and match(mask, '^[0-367]+$'))), 4
  for _ = 1, ok and n or 0 do -- every algorithm one this path decides, before any key is read
    local name = ARGV[i]
    if name == 'fixed_window' or name == 'gcra' then
      i = i + 5
    elseif name == 'sliding_window' then
      i = i + 4
    else
      ok = false
      break
    end
  end
  if ok and #ARGV == (CLOCK_FROM_ARGV and i or i - 1) then
    local reply, now, prevs, k, o, x = {1, 0}, nil, nil, 1, n, 2 + 5 * n -- o: the last override key read; x: the reply's last
    if n == 2 then -- made whole: growing it rehashes
      reply = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
    elseif n == 3 then
      reply = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
    end
    i = 4
    while ok and k <= n do
      local name, at, key = ARGV[i], 5 * k - 2, KEYS[k]
      local flag, ors, obs, orate, oburst, ocap = one or mask == '' and 0 or byte(mask, k) - 48, nil, nil, nil, nil, nil
      if flag >= 2 then
        local why
        o = o + 1
        local okey = KEYS[o] -- nil past the last: GET refuses it, and the call falls through
        --@inline override_read
        ok = not why
        if orate then
          reply[x + 1], reply[x + 2], reply[x + 3], x = k, orate, oburst, x + 3
          if oburst > 0 then
            ocap = oburst
          elseif flag >= 6 then
            ocap = orate -- the policy's burst follows the rate (else it stays)
          end
        end
      end
      if not ok then
        break -- corrupt: the general path refuses it
      elseif name == 'fixed_window' then
        local ls, ws, cs, aligned, why, hi, alg = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], nil, MAX, 'fixed_window'
        --@inline window_parse
        --@inline fixed_window_parse
        ok = not why
        if ok then
          local count, ttl, t, ends, expires, why = 0, 0, nil, nil, nil, nil
          if aligned == '1' then
            if not now then
              --@inline clock_us
            end
            --@inline fixed_window_aligned
          end
          local raw = redis.pcall('GET', key)
          --@inline fixed_window_read
          ok = not why
          if ok then
            --@inline fixed_window_decide
            reply[at], reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4] = allowed, remaining, retry, reset, 0
            if allowed == 1 and cost > 0 then
              if count == 0 then
                reply[at + 4] = t and -ends or -2
              else
                reply[at + 2], reply[at + 4] = ttl, t and t + ttl or -1 -- a peek's reset_after, and what to write
              end
            end
          end
        end
        i = i + 5
      elseif name == 'gcra' then
        local rs, ws, cs, bs, why = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], nil
        --@inline gcra_parse
        ok = not why
        local backlog, clamp = 0, flag >= 2
        if ok then
          if not now then
            --@inline clock_us
          end
          --@inline gcra_read
          ok = not why
        end
        if ok then
          local peek = backlog + 999 -- the reset_after a peek reports
          peek = (peek - peek % 1000) / 1000
          --@inline gcra_decide
          reply[at], reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4] = allowed, remaining, retry, reset, 0
          if allowed == 1 and cost > 0 then
            reply[at + 2], reply[at + 4] = peek, now + backlog + need
          end
        end
        i = i + 5
      else -- sliding_window
        local ls, ws, cs, why, hi, alg = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], nil, MAX, 'sliding_window'
        --@inline window_parse
        ok = not why
        if ok then
          if not now then
            --@inline clock_us
          end
          local w = window * 1000
          local cur = now - now % w
          local e, prev, curr, same, why = now - cur, 0, 0, false, nil
          --@inline sliding_window_read
          ok = not why
          local used, ab = curr, prev * (w - e)
          if ok and prev > 0 then
            ok = ab < 4503599627370496
            if ok then
              --@inline sliding_window_used
            end
          end
          if ok then
            -- reset_after of a peek: two windows on from the current one's start with a current count,
            -- one with a previous count, else none.
            local peek = 0
            if curr > 0 then
              peek = 2 * w - e + 999
            elseif prev > 0 then
              peek = w - e + 999
            end
            peek = (peek - peek % 1000) / 1000
            if used + cost <= limit then
              if cost == 0 then
                reply[at], reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4] = 1, limit - used, 0, peek, 0
              else
                local reset = 2 * w - e + 999
                reply[at], reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4] = 1, limit - used - cost, peek,
                  (reset - reset % 1000) / 1000, cur
                if not same then
                  reply[at + 4] = -cur
                  prevs = prevs or {}
                  prevs[k] = prev
                end
              end
            else
              --@inline sliding_window_rejection
              ok = not c or ab2 < 4503599627370496
              if ok then
                --@inline sliding_window_wait
                reply[at], reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4] = 0, remaining,
                  (wait - wait % 1000) / 1000, (reset - reset % 1000) / 1000, 0
              end
            end
          end
        end
        i = i + 4
      end
      if reply[at] == 0 and flag % 2 == 0 then -- odd: a shadow rejection rejects nothing
        reply[1] = 0
      end
      k = k + 1
    end
    ok = ok and o == nkeys -- every override key read, and no key more
    if ok and reply[1] == 0 then
      -- A rejection writes nothing: a policy that would have admitted reports its key as it is, as a
      -- peek: its cost back in remaining, and a peek's reset_after.
      i = 4
      for k = 1, n do
        local at = 5 * k - 2
        if reply[at + 4] ~= 0 then
          local cs = ARGV[i + 3]
          reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4] = reply[at + 1] + (cs == '1' and 1 or tonumber(cs)),
            0, reply[at + 2], 0
        end
        if ARGV[i] == 'sliding_window' then
          i = i + 4
        else
          i = i + 5
        end
      end
      return reply
    end
    if ok then
      i = 4
      for k = 1, n do
        local at, key, name = 5 * k + 2, KEYS[k], ARGV[i]
        local slot = reply[at]
        if slot ~= 0 then
          reply[at - 2] = 0 -- retry_after of an admission
          if name == 'fixed_window' then
            -- What the first pass read, from the slot: a live counter (-1, or aligned its token) or a
            -- new window (-2, or aligned -ends); t stands for the aligned window's now, which the
            -- write only tests.
            local count, t, ends, cs, ws = (slot == -1 or slot > 0) and 1 or 0, (slot > 0 or slot < -2) and slot, -slot,
              ARGV[i + 3], ARGV[i + 2]
            --@inline fixed_window_write
            if not t then
              reply[at] = redis.call('PEXPIRETIME', key)
            elseif count == 0 then
              reply[at] = ends
            end
          elseif name == 'gcra' then
            local backlog = slot - now
            --@inline gcra_set
          else -- a sliding window: the slot is the window's start, negated when the write starts it
            local same, cs = slot > 0, ARGV[i + 3]
            local cur, prev, w = same and slot or -slot, not same and prevs[k], not same and 1000 * tonumber(ARGV[i + 2])
            --@inline sliding_window_write
            reply[at] = cur
          end
        end
        if name == 'sliding_window' then
          i = i + 4
        else
          i = i + 5
        end
      end
      return reply
    end
  end
end
