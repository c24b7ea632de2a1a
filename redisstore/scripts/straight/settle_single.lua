-- settle_single.lua: the settle script's straight path, the first part of settle.lua's assembly,
-- before the prelude, as take_single.lua is take.lua's: a settlement of a fixed_window, gcra or
-- sliding_window reservation is made here with no closure, no table but the reply and no loop, and returns before
-- the prelude and the modules define anything (BENCHMARKS.md, "Redis CPU per decision").
--
-- It settles as settle.lua and the module's settle do, with the modules' own code (their --@fragment
-- regions: parse, read, refund, overrun, write, decide), and never errs: an argument it would
-- refuse, and a key it finds corrupt, make it fall through, before any write, to the general path,
-- which refuses the call with the module's error. The reply is the decision of the key's state after
-- the write, as settle.lua's is, but not read back: the state is what was read, changed by the one
-- write this script made (the script runs alone, and admit's writes never make a key corrupt), at the
-- same now.
--
-- This file is a template: a line --@inline <name> asks for the fragment <name>, and
-- internal/tools/luagen (go generate) writes ../settle_single.lua with each fragment's text spliced in,
-- indented as the line, so the script runs the same statements as if each were written out, with
-- no function. A fragment's header comment names the locals it reads and sets.
-- KEYS and ARGV are read from locals: a global's every read is a lookup in the globals table.
local KEYS, ARGV = KEYS, ARGV
local settle_token_at = (ARGV[1] == 'sliding_window' or ARGV[1] == 'sliding_log') and 5 or 6 -- after 3 arguments, or 4
if #KEYS == 1 and #ARGV == (CLOCK_FROM_ARGV and settle_token_at + 2 or settle_token_at + 1) then
  local name, match, tonumber, key = ARGV[1], string.match, tonumber, KEYS[1]
  local ts, as = ARGV[settle_token_at], ARGV[settle_token_at + 1]
  local orate, ocap = nil, nil -- the parse fragments' override numbers: a settlement ignores overrides
  --@inline settle_token_actual
  if token and token <= MAX_TAT and actual and actual <= MAX then
    if name == 'fixed_window' then
      local ls, ws, cs, aligned, why, hi, alg = ARGV[2], ARGV[3], ARGV[4], ARGV[5], nil, MAX, 'fixed_window'
      --@inline window_parse
      --@inline fixed_window_parse
      local reserved = cost
      if not why and reserved > 0 then -- a reservation's cost is never 0
        local count, ttl, t, ends, expires, why = 0, 0, nil, nil, nil, nil -- count 0: missing, or its window has ended
        if aligned == '1' then
          local now
          --@inline clock_us
          --@inline fixed_window_aligned
        end
        local raw = redis.pcall('GET', key)
        --@inline fixed_window_read
        if not why then
          local delta, cost = actual - reserved, 0 -- cost: what the decision after the write looks for room for
          if delta < 0 then
            --@inline fixed_window_refund
          else
            -- An overrun consumes what is left now, as an admission of that many units.
            --@inline fixed_window_overrun
            if n > 0 then
              local cs = string.format('%d', n)
              --@inline fixed_window_write
              if count == 0 then
                ttl = t and ends - t or window
              end
              count = count + n
            end
            if n < delta then
              cost = 1 -- an overrun that did not fit whole: the reply is the rejection of one unit more
            end
          end
          --@inline fixed_window_decide
          return {allowed, remaining, retry, reset}
        end
      end
    elseif name == 'gcra' then
      local rs, ws, cs, bs, why = ARGV[2], ARGV[3], ARGV[4], ARGV[5], nil
      --@inline gcra_parse
      local reserved = cost
      if not why and reserved > 0 then -- a reservation's cost is never 0
        local now
        --@inline clock_us
        local why, backlog, clamp = nil, 0, false -- a settlement ignores overrides
        --@inline gcra_read
        if not why then
          local delta, cost = actual - reserved, 0 -- cost: what the decision after the write looks for room for
          if delta < 0 then
            --@inline gcra_refund
          else
            -- An overrun consumes what fits now, as an admission of that many units.
            --@inline gcra_overrun
            if n > 0 then
              backlog = backlog + n * interval
              --@inline gcra_set
            end
            if n < delta then
              cost = 1 -- an overrun that did not fit whole: the reply is the rejection of one unit more
            end
          end
          --@inline gcra_decide
          return {allowed, remaining, retry, reset}
        end
      end
    elseif name == 'sliding_window' then
      local ls, ws, cs, why, hi, alg = ARGV[2], ARGV[3], ARGV[4], nil, MAX, 'sliding_window'
      --@inline window_parse
      local reserved = cost
      if not why and reserved > 0 then -- a reservation's cost is never 0
        local now
        --@inline clock_us
        local w = window * 1000
        local cur = now - now % w
        local e, prev, curr, same, why = now - cur, 0, 0, false, nil
        --@inline sliding_window_read
        local ok = not why
        -- Every product below is exact below 2^52; a larger one leaves the settlement to the module's
        -- muldiv, through the general path, before anything is written here (ok false).
        if ok and prev * w < 4503599627370496 then
          -- The plan: the write (op), and the key's state after it (prev, curr at the same now).
          -- cost: what the decision after the write looks for room for (0, or the probe of one unit).
          local delta, cost, op, arg, n, fresh = actual - reserved, 0, nil, nil, 0, false
          if delta < 0 then
            --@inline sliding_window_refund
          else
            -- An overrun consumes what a peek leaves, as an admission of that many units.
            local used, ab = curr, prev * (w - e)
            --@inline sliding_window_used
            n = limit - used
            if n < 0 then
              n = 0
            end
            if n > delta then
              n = delta
            end
            if n > 0 then
              fresh, same, curr = not same, true, curr + n -- fresh: the write starts the window
            end
            if n < delta then
              cost = 1
            end
          end
          -- The decision of the state after, for cost units (take_single.lua's sliding window).
          local used, ab = curr, prev * (w - e)
          if prev > 0 then
            --@inline sliding_window_used
          end
          local reply
          if used + cost <= limit then
            --@inline sliding_window_reset
            reply = {1, limit - used - cost, 0, (reset - reset % 1000) / 1000}
          else
            --@inline sliding_window_rejection
            ok = not c or ab2 < 4503599627370496
            if ok then
              --@inline sliding_window_wait
              reply = {0, remaining, (wait - wait % 1000) / 1000, (reset - reset % 1000) / 1000}
            end
          end
          -- The write, as the module's settle and apply make it.
          if ok then
            if op then
              --@inline sliding_window_refund_write
            elseif n > 0 then
              local same, cs = not fresh, string.format('%d', n)
              --@inline sliding_window_write
            end
            return reply
          end
        end
      end
    elseif name == 'sliding_log' then
      -- The key is read as take_single.lua reads it, twice: before the write, and after it for the reply
      -- (the log's newest entry and the one whose exit lets a request fit are not known otherwise). A
      -- key found corrupt before the write falls through to the general path; after it, it cannot be
      -- (admit's writes keep a log well formed), but would be refused as settle.lua refuses it.
      local ls, ws, cs, why, hi, alg = ARGV[2], ARGV[3], ARGV[4], nil, MAX_LOG, 'sliding_log'
      --@inline window_parse
      local reserved = cost
      if not why and reserved > 0 then -- a reservation's cost is never 0
        local now
        --@inline clock_us
        local w, cost = window * 1000, reserved -- cost: what the read looks for room for
        for pass = 1, 2 do
          local why, card, count, newest, kth = nil, redis.pcall('ZCARD', key), 0, 0, nil
          --@inline sliding_log_read
          if pass == 1 then
            if why then
              break -- to the general path, nothing written
            end
            local delta = actual - reserved
            cost = 0
            if delta < 0 then
              --@inline sliding_log_refund
            else
              --@inline sliding_log_overrun
              if units > 0 then
                --@inline sliding_log_append
              end
              if units < delta then
                cost = 1 -- an overrun that did not fit whole: the reply is the rejection of one unit more
              end
            end
          else
            if why then
              return redis.error_reply('ADMIT_CORRUPT after settling: the log is not as admit writes it')
            end
            -- The decision of the state after, for cost units (0, or the probe of one).
            local n, ends, frees = count, newest + w, (kth or 0) + w
            --@inline count_decide
            return {allowed, remaining, retry, reset}
          end
        end
      end
    end
  end
end
