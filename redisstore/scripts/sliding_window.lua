-- sliding_window.lua: an approximate moving window over two consecutive windows (docs/sliding-window.md), a
-- module of the take script.
--
-- A key is a hash of exactly three decimal fields: start, the start of a window in Unix milliseconds
-- (a multiple of the window); curr, the units admitted in that window (≥ 1); prev, those admitted in
-- the window before it (≥ 0). Windows are aligned to Redis's clock (TIME, through now()). At now, with
-- cur the start of the window that holds now and e = now − cur, the hash holds the previous and the
-- current counts while start = cur; only the previous one, curr, once start = cur − window; nothing
-- after that. The estimate is ⌈prev × (window − e) / window⌉ + curr, in exact integers (muldiv), and a
-- request of n is admitted when estimate + n ≤ limit. An admission in the stored window adds with
-- HINCRBY; one in a later window rewrites the three fields with HSET and sets the expiry with
-- PEXPIREAT to two windows after the new start, exactly when the state becomes equivalent to a missing
-- key. A rejection writes nothing. Times are computed in microseconds, replies are in milliseconds
-- rounded up.
--
-- Arguments, after the algorithm's name: limit (1 … MAX), window in milliseconds (1 … MAX_WINDOW),
-- cost (0 … limit; 0 is a peek).

local sliding_window = nil -- the module's table, when the call names sliding_window (prelude.lua)

-- sliding_window_define makes the module's table. The other modules make theirs in an if block;
-- this one is a function too, so that redisstore's test of muldiv can call it whatever ARGV holds.
local function sliding_window_define()
  -- The table is made with its fields, so that filling them in does not grow it.
  sliding_window = {parse = false, read = false, decide = false, apply = false, settle = false, muldiv = false}

  -- muldiv returns ⌊a × b / c⌋ and the remainder, exactly, for integers a, b ≥ 0 below 2^53 and c in
  -- 1 … 2^50 whose quotient is below 2^50. Doubles hold integers exactly only below 2^53, and a × b
  -- reaches 2^95 (10^15 units times a window of 366 days in microseconds); so above 2^52 the quotient
  -- is estimated in doubles, which puts it within 1 of the true one, and corrected with the remainder
  -- a × b − q × c computed exactly modulo 2^52 from 26-bit halves, whose products stay below 2^53.
  local function muldiv(a, b, c)
    local ab = a * b
    local q = math.floor(ab / c)
    local r
    if ab < 4503599627370496 then -- 2^52: a × b and q × c are exact
      r = ab - q * c
    else
      local B, M = 67108864, 4503599627370496 -- 2^26, 2^52
      local a1, a0, b1, b0 = math.floor(a / B), a % B, math.floor(b / B), b % B
      local q1, q0, c1, c0 = math.floor(q / B), q % B, math.floor(c / B), c % B
      local ab_low = a0 * b0 + ((a1 * b0) % B + (a0 * b1) % B) % B * B -- ≡ a × b mod 2^52, below 2^53
      local qc_low = q0 * c0 + ((q1 * c0) % B + (q0 * c1) % B) % B * B
      r = (ab_low - qc_low) % M
      if r >= M / 2 then
        r = r - M
      end
    end
    while r < 0 do
      q, r = q - 1, r + c
    end
    while r >= c do
      q, r = q + 1, r - c
    end
    return q, r
  end

  -- read reads the key's state at now into p: p.cur and p.e, the current window's start and the time
  -- into it; p.prev and p.curr, the previous and current windows' counts as the key holds them now; and
  -- p.same, whether the key's window is the current one. It returns true, or nil and why the key is
  -- corrupt.
  function sliding_window.read(key, p)
    local now, window, w = now(), p.window, p.w
    local cur = now - now % w
    local why, prev, curr, same = nil, 0, 0, false
    --@fragment sliding_window_read
    -- A sliding window's key read as admit writes it. Reads key, window, now (µs), w (the window in
    -- µs), cur (the current window's start, µs), match, tonumber. Sets why (declared nil) to why the
    -- key is corrupt, else prev and curr (declared 0) to the previous and current windows' counts as
    -- of now, and same (declared false) true when the key's window is the current one.
    local h = redis.pcall('HGETALL', key)
    if h.err then
      why = 'key holds a value that is not a hash'
    elseif #h > 0 then
      local start, sp, sc -- the stored start, prev and curr
      for j = 1, #h, 2 do
        local f, v = h[j], h[j + 1]
        local x = v == '0' and 0 or #v <= MAX_DIGITS and match(v, '^[1-9]%d*$') and tonumber(v)
        x = x and x <= MAX and x
        if f == 'start' then
          start = x
        elseif f == 'prev' then
          sp = x
        elseif f == 'curr' then
          sc = x ~= 0 and x
        else
          why = 'hash holds a field other than start, prev and curr'
          break
        end
      end
      if why then
        start = nil -- a field of another name: why says so
      elseif not (start and sp and sc) then
        why = 'hash does not hold start (ms), prev (0..' .. MAX .. ') and curr (1..' .. MAX .. ') as integers'
      elseif start % window ~= 0 then
        why = 'window start is not a multiple of the window'
      elseif start * 1000 > now then
        why = 'window start is in the future'
      elseif redis.call('PTTL', key) == -1 then
        why = 'hash has no expiry'
      else
        start = start * 1000
        if start == cur then
          prev, curr, same = sp, sc, true
        elseif start == cur - w then
          prev = sc
        end
      end
    end
    --@end
    if why then
      return nil, why
    end
    p.cur, p.e, p.prev, p.curr, p.same = cur, now - cur, prev, curr, same
    return true
  end

  -- decide returns allowed (0 or 1), remaining, retry_after and reset_after in milliseconds for a
  -- request of cost units (the policy's own, or 0 for a peek) on the state read into p. Its
  -- quotients are exact: the straight paths' own below 2^52, muldiv's above (where the straight
  -- paths leave the call to this module).
  function sliding_window.decide(p, cost)
    local limit, w, e, prev, curr = p.limit, p.w, p.e, p.prev, p.curr
    local used, ab = curr, prev * (w - e)
    if prev > 0 then
      if ab < 4503599627370496 then -- 2^52
        --@fragment sliding_window_used
        -- Adds to used ⌈ab / w⌉, ab = prev × (w − e) the previous window's weighted
        -- count, exactly: the site checks that ab is below 2^52. Reads ab and w, sets used.
        local r = ab % w
        local q = (ab - r) / w
        if r < 0 then
          q, r = q - 1, r + w
        elseif r >= w then
          q, r = q + 1, r - w
        end
        if r > 0 then
          q = q + 1
        end
        used = used + q
        --@end
      else
        local q, r = muldiv(prev, w - e, w)
        if r > 0 then
          q = q + 1
        end
        used = used + q
      end
    end
    if used + cost <= limit then
      --@fragment sliding_window_reset
      -- A sliding window's reset_after when cost fits, in ms + 999 (the site divides
      -- it by 1000): two windows on from the current one's start with a current count after the
      -- admission, one with a previous count only, else none. Reads cost, prev, curr, w, e. Declares reset.
      local reset = 0
      if curr + cost > 0 then
        reset = 2 * w - e + 999
      elseif prev > 0 then
        reset = w - e + 999
      end
      --@end
      return 1, limit - used - cost, 0, (reset - reset % 1000) / 1000
    end
    --@fragment sliding_window_rejection
    -- What a sliding window's rejection waits for: later
    -- in this window, at w − ⌊r × w / prev⌋ − e with r = limit − curr − cost when r ≥ 0; else in the
    -- next window, after w − e, and then w − ⌊r × w / curr⌋ more with r = limit − cost when curr > r.
    -- Reads limit, cost, prev, curr, w, e. Declares r, wait (µs, before the quotient's part), c (the
    -- count whose exit is waited for, false for none) and ab2 = c and r × w; the quotient
    -- (sliding_window_wait) is exact while ab2 is below 2^52: the site checks, or takes muldiv's.
    local r, wait, c = limit - curr - cost, -e, prev
    if r < 0 then
      r, wait, c = limit - cost, w - e, curr > limit - cost and curr
    end
    local ab2 = c and r * w
    --@end
    if c and ab2 >= 4503599627370496 then -- the quotient muldiv's; sliding_window_wait skips its own
      wait, c = wait + w - muldiv(r, w, c), false
    end
    --@fragment sliding_window_wait
    -- A sliding window's rejection. Reads limit, used, curr,
    -- w, e, and r, wait, c, ab2 as the site sets them: c the count whose exit is waited for (false for
    -- none), ab2 = c and r × w, below 2^52 when c is not false. Sets wait, and declares reset, both in
    -- ms + 999 (the site divides them by 1000), and remaining.
    if c then
      local m = ab2 % c
      local q = (ab2 - m) / c
      if m < 0 then
        q = q - 1
      elseif m >= c then
        q = q + 1
      end
      wait = wait + w - q
    end
    local reset = w - e + 999
    if curr > 0 then
      reset = reset + w
    end
    local remaining = limit - used
    if remaining < 0 then
      remaining = 0
    end
    wait = wait + 999
    --@end
    return 0, remaining, (wait - wait % 1000) / 1000, (reset - reset % 1000) / 1000
  end

  -- apply makes the write of an admission: HINCRBY in the key's own window, else the whole state anew
  -- with its expiry, of p.cost units (1 or more: take.lua and settle.lua call it for no other). It
  -- returns its token: the current window's start, in Unix microseconds.
  function sliding_window.apply(key, p)
    local same, cur, prev, w, cs = p.same, p.cur, p.prev, p.w, p.cost_arg
    --@fragment sliding_window_write
    -- A sliding window's write of an admission of cs units (a decimal string): HINCRBY in the key's
    -- own window (same), else the three fields anew, start the current window's, prev the count
    -- before it, and the expiry two windows after the new start, exactly when the state becomes
    -- equivalent to a missing key. Reads key, same, cur, prev, w, cs.
    if same then
      redis.call('HINCRBY', key, 'curr', cs)
    else
      redis.call('HSET', key, 'start', string.format('%d', cur / 1000), 'prev', string.format('%d', prev), 'curr', cs)
      redis.call('PEXPIREAT', key, string.format('%d', (cur + 2 * w) / 1000))
    end
    --@end
    return cur
  end

  if settling then -- only the settle script settles: a take makes no closure for it
    -- settle settles a reservation whose token is the start of its window (Unix µs) at delta = actual
    -- − reserved units, on the state read into p (algo.SlidingWindowSettle): a refund (delta below 0)
    -- makes its write and returns 0, an overrun writes nothing and returns the units of it that fit
    -- now, which settle.lua admits.
    function sliding_window.settle(key, p, token, delta)
      if delta >= 0 then
        local _, left = sliding_window.decide(p, 0)
        return math.min(delta, left)
      end
      local cur, w, prev, curr, same, op, arg = p.cur, p.w, p.prev, p.curr, p.same, nil, nil
      --@fragment sliding_window_refund
      -- A sliding window's refund of −delta units (delta below 0), planned: it comes off the count of
      -- the token's window while the key holds it: the current count (same, token = cur), the
      -- previous one kept beside it (same, token = cur − w), or the stored count once its window has
      -- become the previous one (not same, prev > 0: the key's start is cur − w). A current count
      -- taken to 0 leaves the previous one as the key's only window; nothing left deletes the key.
      -- Reads delta, token, cur, w, same; sets op (declared nil) to the write, arg (declared nil) to
      -- its number, and prev and curr to the key's after it, at the same now.
      local r = -delta
      if same and token == cur then
        if r < curr then
          op, arg, curr = 'less_curr', r, curr - r
        elseif prev == 0 then
          op, curr = 'del', 0
        else
          op, curr = 'to_prev', 0 -- the current count is gone: the previous one is the key's only window
        end
      elseif same and token == cur - w and prev > 0 then
        if r > prev then
          r = prev
        end
        op, arg, prev = 'less_prev', r, prev - r
      elseif not same and token == cur - w and prev > 0 then
        if r >= prev then
          op, prev = 'del', 0
        else
          op, arg, prev = 'stored_less', prev - r, prev - r
        end
      end
      --@end
      --@fragment sliding_window_refund_write
      -- The write sliding_window_refund planned. Reads key, op, arg, cur, w, prev.
      if op == 'less_curr' then
        redis.call('HINCRBY', key, 'curr', string.format('%d', -arg))
      elseif op == 'del' then
        redis.call('DEL', key)
      elseif op == 'to_prev' then
        redis.call('HSET', key, 'start', string.format('%d', (cur - w) / 1000), 'prev', '0', 'curr',
          string.format('%d', prev))
        redis.call('PEXPIREAT', key, string.format('%d', (cur + w) / 1000))
      elseif op == 'less_prev' then
        redis.call('HINCRBY', key, 'prev', string.format('%d', -arg))
      elseif op == 'stored_less' then
        redis.call('HSET', key, 'prev', '0', 'curr', string.format('%d', arg))
      end
      --@end
      return 0
    end
  end

  -- parse reads the arguments from ARGV[i] on and returns the policy's table and the index after them,
  -- or nil and why they are invalid.
  function sliding_window.parse(i)
    -- No override's rate (orate): take.lua passes one as an argument.
    local cs = ARGV[i + 2] or ''
    local limit, window, cost, why = window_parse(ARGV[i] or '', ARGV[i + 1] or '', cs, nil, MAX, 'sliding_window')
    if why then
      return nil, why
    end
    return {alg = sliding_window, limit = limit, window = window, cost = cost, cost_arg = cs,
      max_wait = 2 * window, w = window * 1000, cur = 0, e = 0, prev = 0, curr = 0, same = false}, i + 3
  end

  sliding_window.muldiv = muldiv -- for redisstore's test of it
end
if named_sliding_window then
  sliding_window_define()
end
