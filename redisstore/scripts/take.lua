-- take.lua: the entry point that decides 1 … MAX_REQUESTS policies together, all-or-nothing, with an
-- optional idempotency record (G2 of docs/guarantees.md; docs/keys.md, "Idempotency records").
--
-- KEYS[1..N]  the policies' keys, all in one hash slot
-- KEYS[N+1]   the idempotency record's key, when ARGV[2] is not empty
-- ARGV[1]     N
-- ARGV[2]     the request's fingerprint (hex), or '' for a request without an ID
-- ARGV[3]     the policies in shadow mode: '' for none, else N characters, '1' for a policy in shadow
--             mode and '0' for one enforced
-- ARGV[4..]   each policy in turn: its algorithm's name, then that algorithm's own arguments
--             (and, in a test assembly only, the time in Unix microseconds last)
--
-- Reply: {allowed, replayed, then for each policy: allowed, remaining, retry_after_ms, reset_after_ms,
-- token}. The token is what the policy's module's apply returns for an admission that consumed — the
-- window its units were counted in, which settle.lua refunds to — and 0 for a rejection, a peek, a
-- replay, and a module whose apply returns nothing.
--
-- Every key is read and every policy decided before anything is written; only if every policy admits
-- are the writes made, the record last. A rejection by any policy writes nothing to any key, and a
-- policy that would have admitted then reports its key as it is, as a peek would. A record
-- holds the fingerprint and each policy's remaining and reset_after, and lives as long as the longest
-- window; a repeat with the same fingerprint returns those, consuming nothing, and a repeat with
-- another fingerprint is refused.
--
-- A policy in shadow mode (docs/http.md, "Shadow mode") takes no part in all-or-nothing: its rejection rejects
-- nothing and writes nothing; when the others admit, it is written if it admits too. A replay reports
-- it as admitted: the record keeps remaining and reset_after only.

local n = ARGV[1] == '1' and 1 or integer(ARGV[1], 1, MAX_REQUESTS) -- '1' first: no function call
local fp, shadow = ARGV[2], ARGV[3]
if not n or not fp or not (fp == '' or string.match(fp, '^%x+$')) then
  return redis.error_reply('ADMIT_INVALID take needs a policy count in 1..' .. MAX_REQUESTS .. ' and a fingerprint')
end
if not shadow or not (shadow == '' or #shadow == n and string.match(shadow, '^[01]+$')) then
  return redis.error_reply('ADMIT_INVALID take needs the policies in shadow mode: nothing, or a 0 or 1 per policy')
end
local shadowed = shadow ~= '' -- any policy may be in shadow mode
local want = n
if fp ~= '' then
  want = n + 1
end
if #KEYS ~= want then
  return redis.error_reply('ADMIT_INVALID take needs one key per policy, and one for the record of a request with an ID')
end
local record = KEYS[n + 1] -- nil for a request without an ID

local policies = {false} -- sized for one policy: more grow it
local i = 4
for k = 1, n do
  local name = ARGV[i] -- an if chain, not a table of the modules: a table would be made on every call
  local alg = name == 'fixed_window' and fixed_window or name == 'gcra' and gcra or name == 'sliding_window' and
    sliding_window or name == 'sliding_log' and sliding_log or name == 'concurrency' and concurrency
  if not alg then
    return redis.error_reply('ADMIT_INVALID policy ' .. k .. ': unknown algorithm')
  end
  local p, next_or_why = alg.parse(i + 1)
  if not p then
    return redis.error_reply('ADMIT_INVALID policy ' .. k .. ': ' .. next_or_why)
  end
  policies[k] = p
  i = next_or_why
end
if i ~= ARGS + 1 then
  return redis.error_reply('ADMIT_INVALID take got ' .. ARGS .. ' arguments, want ' .. (i - 1))
end

-- A retry of an admitted request returns its recorded decisions.
if record then
  local raw = redis.pcall('GET', record)
  if type(raw) == 'table' then
    return redis.error_reply('ADMIT_CORRUPT request record holds a value that is not a string')
  end
  if raw then
    local words = {}
    for w in string.gmatch(raw, '%S+') do
      words[#words + 1] = w
    end
    -- A record is the fingerprint, then a remaining and a reset_after per policy.
    local wellformed = #words >= 3 and #words % 2 == 1 and #words[1] == #fp and string.match(words[1], '^%x+$')
    for w = 2, #words do
      wellformed = wellformed and integer(words[w], 0, MAX)
    end
    if not wellformed then
      return redis.error_reply('ADMIT_CORRUPT request record is not a fingerprint and decisions')
    end
    if words[1] ~= fp then
      return redis.error_reply('ADMIT_INVALID request ID reused for a different request')
    end
    if #words ~= 1 + 2 * n then
      return redis.error_reply('ADMIT_CORRUPT request record does not hold ' .. n .. ' decisions')
    end
    local reply = {1, 1}
    for k = 1, n do
      local remaining = integer(words[2 * k], 0, policies[k].limit)
      local reset = integer(words[2 * k + 1], 0, policies[k].max_wait or MAX_WINDOW) -- a module's longest reset_after
      if not remaining or not reset then
        return redis.error_reply('ADMIT_CORRUPT request record holds a decision out of range')
      end
      local at = 5 * k - 2
      reply[at], reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4] = 1, remaining, 0, reset, 0
    end
    return reply
  end
end

for k = 1, n do
  local ok, why = policies[k].alg.read(KEYS[k], policies[k])
  if not ok then
    return redis.error_reply('ADMIT_CORRUPT policy ' .. k .. ': ' .. why)
  end
end

local reply = {1, 0, 0, 0, 0, 0, 0} -- sized for one policy; more grow it
local consumed, longest = false, 0
for k = 1, n do
  local p = policies[k]
  local at = 5 * k - 2
  local allowed, remaining, retry, reset = p.alg.decide(p, p.cost)
  reply[at], reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4] = allowed, remaining, retry, reset, 0
  if allowed == 0 and not (shadowed and string.byte(shadow, k) == 49) then -- '1': a shadow rejection rejects nothing
    reply[1] = 0
  end
  consumed = consumed or p.cost > 0
  if p.window > longest then
    longest = p.window
  end
end

if reply[1] == 0 then
  -- A rejection writes nothing: a policy that would have admitted reports its key as it is.
  for k = 1, n do
    local at = 5 * k - 2
    if reply[at] == 1 then
      reply[at], reply[at + 1], reply[at + 2], reply[at + 3] = policies[k].alg.decide(policies[k], 0)
    end
  end
  return reply
end
for k = 1, n do
  local p = policies[k]
  if reply[5 * k - 2] == 1 and p.cost > 0 then -- not a shadow policy that would have limited, nor a peek
    reply[5 * k + 2] = p.alg.apply(KEYS[k], p) or 0
  end
end
if record and consumed then
  local value = {fp}
  for k = 1, n do
    value[2 * k], value[2 * k + 1] = string.format('%.0f', reply[5 * k - 1]), string.format('%.0f', reply[5 * k + 1])
  end
  redis.call('SET', record, table.concat(value, ' '), 'PX', string.format('%.0f', longest))
end
return reply
