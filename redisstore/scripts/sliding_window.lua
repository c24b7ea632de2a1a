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
    local t, w = now(), p.w
    local cur = t - t % w
    p.cur, p.e = cur, t - cur
    local h = redis.pcall('HGETALL', key)
    if h.err then
      return nil, 'key holds a value that is not a hash'
    end
    if #h == 0 then
      return true
    end
    local start, prev, curr
    for j = 1, #h, 2 do
      local f = h[j]
      if f == 'start' then
        start = integer(h[j + 1], 0, MAX)
      elseif f == 'prev' then
        prev = integer(h[j + 1], 0, MAX)
      elseif f == 'curr' then
        curr = integer(h[j + 1], 1, MAX)
      else
        return nil, 'hash holds a field other than start, prev and curr'
      end
    end
    if not start or not prev or not curr then
      return nil, 'hash does not hold start (ms), prev (0..' .. MAX .. ') and curr (1..' .. MAX .. ') as integers'
    end
    if start % p.window ~= 0 then
      return nil, 'window start is not a multiple of the window'
    end
    start = start * 1000
    if start > t then
      return nil, 'window start is in the future'
    end
    if redis.call('PTTL', key) == -1 then
      return nil, 'hash has no expiry'
    end
    if start == cur then
      p.prev, p.curr, p.same = prev, curr, true
    elseif start == cur - w then
      p.prev = curr
    end
    return true
  end

  -- decide returns allowed (0 or 1), remaining, retry_after and reset_after in milliseconds for a
  -- request of cost units (the policy's own, or 0 for a peek) on the state read into p.
  function sliding_window.decide(p, cost)
    local limit, w, e, prev, curr = p.limit, p.w, p.e, p.prev, p.curr
    local used = curr
    if prev > 0 then
      local q, r = muldiv(prev, w - e, w)
      if r > 0 then
        q = q + 1
      end
      used = used + q
    end
    if used + cost <= limit then
      local reset = 0
      if curr + cost > 0 then
        reset = 2 * w - e
      elseif prev > 0 then
        reset = w - e
      end
      return 1, limit - used - cost, 0, math.ceil(reset / 1000)
    end
    -- Later in this window, at the first e' with ⌈prev × (w − e') / w⌉ ≤ limit − curr − cost; or else in
    -- the next one, where curr weighs as the previous count: at its start, or at the first e' with
    -- curr × (w − e') ≤ (limit − cost) × w.
    local wait, r = 0, limit - curr - cost
    if r >= 0 then
      wait = w - muldiv(r, w, prev) - e
    else
      wait, r = w - e, limit - cost
      if curr > r then
        wait = wait + w - muldiv(r, w, curr)
      end
    end
    local reset = w - e
    if curr > 0 then
      reset = 2 * w - e
    end
    local remaining = limit - used
    if remaining < 0 then
      remaining = 0
    end
    return 0, remaining, math.ceil(wait / 1000), math.ceil(reset / 1000)
  end

  -- apply makes the write of an admission: HINCRBY in the key's own window, else the whole state anew
  -- with its expiry. It returns its token: the current window's start, in Unix microseconds.
  function sliding_window.apply(key, p)
    if p.cost == 0 then
      return
    end
    if p.same then
      redis.call('HINCRBY', key, 'curr', p.cost_arg)
      return p.cur
    end
    redis.call('HSET', key, 'start', string.format('%.0f', p.cur / 1000), 'prev', string.format('%.0f', p.prev),
      'curr', p.cost_arg)
    redis.call('PEXPIREAT', key, string.format('%.0f', (p.cur + 2 * p.w) / 1000))
    return p.cur
  end

  if settling then -- only the settle script settles: a take makes no closure for it
    -- settle makes the write of settling a reservation whose token is the start of its window (Unix
    -- µs) at delta = actual − reserved units, on the state read into p, and returns whether an overrun
    -- fit whole (algo.SlidingWindowSettle). A refund comes off the count of the token's window while
    -- the key holds it: the current count (p.same, token = p.cur), the previous one kept beside it
    -- (p.same, token = p.cur − w), or the stored count once its window has become the previous one
    -- (not p.same, p.prev > 0: the key's start is p.cur − w). A current count taken to 0 leaves the
    -- previous one as the key's only window; nothing left deletes the key.
    function sliding_window.settle(key, p, token, delta)
      local cur, w = p.cur, p.w
      if delta < 0 then
        local r = -delta
        if p.same and token == cur then
          if r < p.curr then
            redis.call('HINCRBY', key, 'curr', string.format('%d', -r))
          elseif p.prev == 0 then
            redis.call('DEL', key)
          else
            redis.call('HSET', key, 'start', string.format('%.0f', (cur - w) / 1000), 'prev', '0',
              'curr', string.format('%.0f', p.prev))
            redis.call('PEXPIREAT', key, string.format('%.0f', (cur + w) / 1000))
          end
        elseif p.same and token == cur - w and p.prev > 0 then
          redis.call('HINCRBY', key, 'prev', string.format('%d', -math.min(r, p.prev)))
        elseif not p.same and token == cur - w and p.prev > 0 then
          if r >= p.prev then
            redis.call('DEL', key)
          else
            redis.call('HSET', key, 'prev', '0', 'curr', string.format('%.0f', p.prev - r))
          end
        end
        return true
      end
      local _, left = sliding_window.decide(p, 0)
      local n = math.min(delta, left)
      if n > 0 then
        p.cost, p.cost_arg = n, string.format('%d', n)
        sliding_window.apply(key, p)
      end
      return n == delta
    end
  end

  -- parse reads the arguments from ARGV[i] on and returns the policy's table and the index after them,
  -- or nil and why they are invalid.
  function sliding_window.parse(i)
    local limit, window = integer(ARGV[i], 1, MAX), integer(ARGV[i + 1], 1, MAX_WINDOW)
    if not limit or not window then
      return nil, 'sliding_window needs a limit in 1..' .. MAX .. ' and a window in 1..' .. MAX_WINDOW .. ' ms'
    end
    local cost = integer(ARGV[i + 2], 0, limit)
    if not cost then
      return nil, 'cost must be an integer in 0..limit'
    end
    return {alg = sliding_window, limit = limit, window = window, cost = cost, cost_arg = ARGV[i + 2],
      max_wait = 2 * window, w = window * 1000, cur = 0, e = 0, prev = 0, curr = 0, same = false}, i + 3
  end

  sliding_window.muldiv = muldiv -- for redisstore's test of it
end
if named_sliding_window then
  sliding_window_define()
end
