-- fixed_window.lua: the origin design's algorithm (admit SPEC §2.1), a module of the take script.
--
-- A key holds one decimal counter with an expiry. The window starts at the first admitted request: a
-- missing key is created with SET ... PX, value and expiry in one command; an admission adds with
-- INCRBY, leaving the expiry alone; a rejection writes nothing. Time comes only from the key's own
-- expiry, Redis's clock.
--
-- Arguments, after the algorithm's name: limit (1 … MAX), window in milliseconds (1 … MAX_WINDOW),
-- cost (0 … limit; 0 is a peek).

local fixed_window = {}

-- parse reads the arguments from ARGV[i] on, and returns the policy and the index after them, or nil
-- and why they are invalid.
function fixed_window.parse(i)
  local p = {limit = integer(ARGV[i], 1, MAX), window = integer(ARGV[i + 1], 1, MAX_WINDOW), window_arg = ARGV[i + 1]}
  if not p.limit or not p.window then
    return nil, 'fixed_window needs a limit in 1..' .. MAX .. ' and a window in 1..' .. MAX_WINDOW .. ' ms'
  end
  p.cost, p.cost_arg = integer(ARGV[i + 2], 0, p.limit), ARGV[i + 2]
  if not p.cost then
    return nil, 'cost must be an integer in 0..limit'
  end
  return p, i + 3
end

-- read returns the key's state {count, ttl}; false when the key is missing or its window has ended;
-- or nil and why the key is corrupt. PTTL 0 is the key's expiry millisecond: Redis still returns the
-- key from GET, but its window ends now, so it is read as missing, exactly as memstore reads the same
-- instant. (-2, gone, cannot follow a GET in one script; it would mean missing too.)
function fixed_window.read(key, p)
  local raw = redis.pcall('GET', key)
  if type(raw) == 'table' and raw.err then
    return nil, 'key holds a value that is not a string'
  end
  if not raw then
    return false
  end
  local count = integer(raw, 1, MAX)
  if not count then
    return nil, 'counter is not an integer in 1..' .. MAX
  end
  local ttl = redis.call('PTTL', key)
  if ttl == -1 then
    return nil, 'counter has no expiry'
  end
  if ttl > p.window then
    return nil, 'counter expires after more than one window'
  end
  if ttl <= 0 then
    return false
  end
  return {count = count, ttl = ttl}
end

-- decide returns allowed (0 or 1), remaining, retry_after and reset_after in milliseconds for a
-- request of cost units (the policy's own, or 0 for a peek).
function fixed_window.decide(st, p, cost)
  if not st then
    if cost == 0 then
      return 1, p.limit, 0, 0
    end
    return 1, p.limit - cost, 0, p.window
  end
  if st.count + cost > p.limit then
    local remaining = p.limit - st.count
    if remaining < 0 then
      remaining = 0
    end
    return 0, remaining, st.ttl, st.ttl
  end
  return 1, p.limit - st.count - cost, 0, st.ttl
end

-- apply makes the one write of an admission.
function fixed_window.apply(key, p, st)
  if p.cost == 0 then
    return
  end
  if st then
    redis.call('INCRBY', key, p.cost_arg)
  else
    redis.call('SET', key, p.cost_arg, 'PX', p.window_arg)
  end
end
