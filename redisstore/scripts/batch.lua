-- batch.lua: the entry point that decides several takes in one call, each as take.lua decides it
-- alone, one after the other in the order given: a script runs atomically, so the batch is the same
-- as those calls made in turn at one instant (docs/redis.md, "Coalescing"). Its assembly wraps the
-- take script's straight path (take_single.lua) and the rest of the take script (the prelude, the
-- modules, take.lua) in functions, which see a request's own keys and arguments through KEYS and
-- ARGV (locals of the assembly, refilled for each request), and the batch's time as the last
-- argument, as a test assembly's take reads it.
--
-- KEYS          every request's keys, request after request
-- ARGV[1]       m, the number of requests: 1 … MAX_BATCH
-- ARGV[1 + j]   the number of keys of request j
-- ARGV[1+m+j]   the number of arguments of request j
-- then          every request's arguments, request after request (and, in a test assembly only, the
--               time in Unix microseconds last)
--
-- Reply: one element per request, in order: the take script's reply to it, or its error. A request's
-- error (ADMIT_INVALID, ADMIT_CORRUPT, or a failed command) ends that request alone, before any write
-- of its own, as it would end its own call.

local m = integer(BATCH_ARGV[1], 1, MAX_BATCH)
if not m then
  return redis.error_reply('ADMIT_INVALID batch needs a request count in 1..' .. MAX_BATCH)
end
local nargs = #BATCH_ARGV
if BATCH_TEST_CLOCK then
  nargs = nargs - 1
end
local nk, na, counts = 0, 1 + 2 * m, {} -- counts: request j's key count at 2j - 1, its argument count at 2j
for j = 1, m do
  local k, a = integer(BATCH_ARGV[1 + j], 1, 2 * MAX_REQUESTS + 1), integer(BATCH_ARGV[1 + m + j], 3, MAX)
  if not k or not a then
    return redis.error_reply('ADMIT_INVALID batch request ' .. j .. ' needs a key count and an argument count')
  end
  nk, na, counts[2 * j - 1], counts[2 * j] = nk + k, na + a, k, a
end
if nk ~= #BATCH_KEYS or na ~= nargs then
  return redis.error_reply('ADMIT_INVALID batch counts ' .. nk .. ' keys and ' .. na .. ' arguments, got ' ..
    #BATCH_KEYS .. ' and ' .. nargs)
end

local at
if BATCH_TEST_CLOCK then
  at = BATCH_ARGV[#BATCH_ARGV]
else
  local tm = redis.call('TIME')
  at = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
end

local function take_one()
  local r = take_straight()
  if r then
    return r
  end
  return take_general()
end

-- A run of consecutive takes of one fixed window from its first admission (one policy, no request ID,
-- no flags, the same key, limit and window; any costs) is merged: the key is read once, each take
-- decided in turn on the count the takes before it left, as its own call would find it (at the TTL
-- the run read), and the units admitted written once when the run ends, before
-- any other take runs. Arguments a take would refuse, or a key it would find corrupt, end the merging:
-- the take goes through take_one, which refuses it as its own call would.
local reply = {}
local run = nil -- the run in progress: its key, limit and window strings and numbers, the count and ttl, what to write
local function flush()
  if run.add > 0 then
    if run.fresh then
      redis.call('SET', run.key, string.format('%d', run.add), 'PX', run.ws)
    else
      redis.call('INCRBY', run.key, string.format('%d', run.add))
    end
    local token = redis.call('PEXPIRETIME', run.key)
    for x = 1, #run.admitted do
      reply[run.admitted[x]][7] = token
    end
  end
  run = nil
end
-- start returns the run of a take of key under ls and ws, or nil when a take of them goes through
-- take_one: arguments it would refuse, a key it would find corrupt (fixed_window.lua's checks).
local function start(key, ls, ws)
  local limit, window = integer(ls, 1, MAX), integer(ws, 1, MAX_WINDOW)
  if not limit or not window then
    return nil
  end
  local count, ttl = 0, 0
  local raw = redis.pcall('GET', key)
  if raw then
    if type(raw) == 'table' then
      return nil
    end
    local stored = integer(raw, 1, MAX)
    if not stored then
      return nil
    end
    local left = redis.call('PTTL', key)
    if left == -1 or left > window then
      return nil
    elseif left > 0 then
      count, ttl = stored, left
    end
  end
  return {key = key, ls = ls, ws = ws, limit = limit, window = window, count = count, ttl = ttl, fresh = count == 0,
    add = 0, admitted = {}}
end

-- simple returns the key, limit and window of the take of k keys and a arguments after the first
-- kx and ax, when it is one a run merges, else nil.
local function simple(k, a, kx, ax)
  if k == 1 and a == 8 and BATCH_ARGV[ax + 4] == 'fixed_window' and BATCH_ARGV[ax + 8] == '0' and BATCH_ARGV[ax + 1] == '1' and
      BATCH_ARGV[ax + 2] == '' and BATCH_ARGV[ax + 3] == '' then
    return BATCH_KEYS[kx + 1], BATCH_ARGV[ax + 5], BATCH_ARGV[ax + 6]
  end
  return nil
end

local kx, ax, pk, pa = 0, 1 + 2 * m, 0, 0 -- the keys and arguments before request j's; the last request's counts
local ahead, key2, ls2, ws2 = false, nil, nil, nil -- ahead: simple of request j, found by request j - 1's look
for j = 1, m do
  local k, a = counts[2 * j - 1], counts[2 * j]
  local merged = false
  local key, ls, ws = key2, ls2, ws2
  if not ahead then
    key, ls, ws = simple(k, a, kx, ax)
  end
  ahead = false
  if key then
    if run and (run.key ~= key or run.ls ~= ls or run.ws ~= ws) then
      flush()
    end
    if not run and j < m then -- a run of one goes through take_one: the straight path costs less
      key2, ls2, ws2 = simple(counts[2 * j + 1], counts[2 * j + 2], kx + k, ax + a)
      ahead = true
      if key2 == key and ls2 == ls and ws2 == ws then
        run = start(key, ls, ws)
      end
    end
    local cost = run and integer(BATCH_ARGV[ax + 7], 0, run.limit)
    if cost then
      local limit, count = run.limit, run.count
      if count + cost > limit then
        local remaining = limit - count
        if remaining < 0 then
          remaining = 0
        end
        reply[j] = {0, 0, 0, remaining, run.ttl, run.ttl, 0}
      elseif cost == 0 then
        reply[j] = {1, 0, 1, limit - count, 0, count > 0 and run.ttl or 0, 0}
      else
        if count == 0 then
          run.ttl = run.window -- the key made now, with the window's expiry
        end
        run.count, run.add = count + cost, run.add + cost
        reply[j] = {1, 0, 1, limit - count - cost, 0, run.ttl, 0} -- its token when the run is written
        run.admitted[#run.admitted + 1] = j
      end
      merged = true
    end
  end
  if not merged then
    if run then
      flush()
    end
    for x = 1, k do
      KEYS[x] = BATCH_KEYS[kx + x]
    end
    for x = pk, k + 1, -1 do
      KEYS[x] = nil
    end
    for x = 1, a do
      ARGV[x] = BATCH_ARGV[ax + x]
    end
    ARGV[a + 1] = at
    for x = pa + 1, a + 2, -1 do
      ARGV[x] = nil
    end
    pk, pa = k, a
    local ok, r = pcall(take_one)
    if not ok then
      if type(r) ~= 'table' or not r.err then
        r = {err = 'ERR ' .. tostring(r)}
      end
    end
    reply[j] = r
  end
  kx, ax = kx + k, ax + a
end
if run then
  flush()
end
return reply
