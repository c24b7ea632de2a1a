-- take.lua: the entry point that decides 1 … MAX_REQUESTS policies together, all-or-nothing, with an
-- optional idempotency record (G2 of docs/guarantees.md; docs/keys.md, "Idempotency records").
--
-- KEYS[1..N]  the policies' keys, all in one hash slot
-- then        the override key of each policy that has one (its flag has bit 2), in policy order
-- last        the idempotency record's key, when ARGV[2] is not empty
-- ARGV[1]     N
-- ARGV[2]     the request's fingerprint (hex), or '' for a request without an ID
-- ARGV[3]     the policies' flags: '' for none at all, else N digits, each the sum of 1 for a policy
--             in shadow mode, 2 for one with an override key, and 4 for a gcra policy with an
--             override key whose burst follows its rate (admit.Limit.Burst 0): '0', '1', '2', '3',
--             '6' or '7'; or one digit, every policy's
-- ARGV[4..]   each policy in turn: its algorithm's name, then that algorithm's own arguments
--             (and, in a test assembly only, the time in Unix microseconds last)
--
-- Reply: {allowed, replayed, then for each policy: allowed, remaining, retry_after_ms, reset_after_ms,
-- token, then for each policy decided under its override, in policy order: the policy's number (1 …
-- N), the override's rate and burst}. The token is what the policy's module's apply returns for an admission that consumed — the
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
--
-- A replay of a policy with an override key reports its recorded remaining and reset_after cut to the
-- numbers in force, which an Override set, changed or deleted since the admission may have lowered.
--
-- A policy's override key is read first, before any state: when it holds an override (docs/redis.md,
-- "Overrides"), the policy is decided with the override's rate in place of its own, and for gcra the
-- override's burst when above 0 (else the rate, when the policy's burst follows it); corrupt override
-- bytes are refused as corrupt state, before any write. A gcra bucket of a policy with an override key
-- is read with its backlog cut to what the numbers in force allow (gcra.lua, gcra_read's clamp).

local n = ARGV[1] == '1' and 1 or integer(ARGV[1], 1, MAX_REQUESTS) -- '1' first: no function call
local fp, shadow = ARGV[2], ARGV[3]
if not n or not fp or not (fp == '' or string.match(fp, '^%x+$')) then
  return redis.error_reply('ADMIT_INVALID take needs a policy count in 1..' .. MAX_REQUESTS .. ' and a fingerprint')
end
if not shadow or not (shadow == '' or (#shadow == n or #shadow == 1) and string.match(shadow, '^[0-367]+$')) then
  return redis.error_reply('ADMIT_INVALID take needs the policies\' flags: nothing, or a 0, 1, 2, 3, 6 or 7 per policy or for all')
end
local shadowed = shadow ~= '' -- any policy may be in shadow mode, or have an override key
local uniform = #shadow == 1 -- one digit: every policy's flags
local overrides = 0 -- how many policies have an override key
for k = 1, shadowed and n or 0 do
  if string.byte(shadow, uniform and 1 or k) >= 50 then -- '2' or more: an override key
    overrides = overrides + 1
  end
end
local want = n + overrides
if fp ~= '' then
  want = want + 1
end
if #KEYS ~= want then
  return redis.error_reply('ADMIT_INVALID take needs one key per policy, one per override key, and one for the record of a request with an ID')
end
local record = fp ~= '' and KEYS[want] or nil -- nil for a request without an ID

local policies = {false} -- sized for one policy: more grow it
local extra = nil -- the reply's triples of the policies decided under an override, when any is
local i, o = 4, n -- o: the last override key's index in KEYS
for k = 1, n do
  local name = ARGV[i] -- an if chain, not a table of the modules: a table would be made on every call
  local alg = name == 'fixed_window' and fixed_window or name == 'gcra' and gcra or name == 'sliding_window' and
    sliding_window or name == 'sliding_log' and sliding_log or name == 'concurrency' and concurrency
  if not alg then
    return redis.error_reply('ADMIT_INVALID policy ' .. k .. ': unknown algorithm')
  end
  local flag = shadowed and string.byte(shadow, uniform and 1 or k) - 48 or 0
  local ors, obs, orate, oburst, why = nil, nil, nil, nil, nil
  if flag >= 2 then
    o = o + 1
    local okey, match = KEYS[o], string.match
    --@fragment override_read
    -- An override's key read as SetOverride writes it: '<rate> <burst> <expires> <reason>', the
    -- rate 1..MAX, the burst 0..MAX and the expiry (Unix ns, 0 for never) strict decimal integers,
    -- each followed by one space, the reason the rest, at most MAX_REASON bytes. Reads okey, match,
    -- tonumber. Sets why (declared nil) to why the key is corrupt, else, when it holds an override,
    -- ors and obs (declared nil) to its rate's and burst's decimal strings and orate and oburst
    -- (declared nil) to their values.
    local raw = redis.pcall('GET', okey)
    if raw then
      if type(raw) == 'table' then
        why = 'override key holds a value that is not a string'
      else
        local r, b, e = match(raw, '^([1-9]%d*) (%d+) (%d+) ')
        local byte = string.byte
        local rv = r and #r <= MAX_DIGITS and tonumber(r)
        local bv = rv and #b <= MAX_DIGITS and (b == '0' or byte(b) ~= 48) and tonumber(b)
        if not (rv and rv <= MAX and bv and bv <= MAX and #e <= 19 and (e == '0' or byte(e) ~= 48) and
            #raw - #r - #b - #e - 3 <= MAX_REASON) then
          why = 'override is not a rate, a burst, an expiry and a reason'
        else
          ors, obs, orate, oburst = r, b, rv, bv
        end
      end
    end
    --@end
    if why then
      return redis.error_reply('ADMIT_CORRUPT policy ' .. k .. ': ' .. why)
    end
    if ors then
      ARGV[i + 1] = ors -- the override's numbers, parsed by the module as its own
      if name == 'gcra' then
        if obs ~= '0' then
          ARGV[i + 4] = obs
        elseif flag >= 6 then
          ARGV[i + 4] = ors
        end
      end
      extra = extra or {}
      extra[#extra + 1], extra[#extra + 2], extra[#extra + 3] = k, orate, oburst
    end
  end
  local p, next_or_why = alg.parse(i + 1)
  if not p then
    return redis.error_reply('ADMIT_INVALID policy ' .. k .. (ors and ' under its override: ' or ': ') .. next_or_why)
  end
  if flag >= 2 then
    p.clamp = true -- gcra.read's clamp; the other modules ignore it
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
      local p = policies[k]
      local limit, longest = p.limit, p.max_wait or MAX_WINDOW -- a module's longest reset_after
      if p.clamp then
        -- An override key: the record may hold numbers of an Override set, changed or deleted since,
        -- reported cut to the numbers in force.
        limit, longest = MAX, MAX
      end
      local remaining = integer(words[2 * k], 0, limit)
      local reset = integer(words[2 * k + 1], 0, longest)
      if remaining and remaining > p.limit then
        remaining = p.limit
      end
      if reset and reset > (p.max_wait or MAX_WINDOW) then
        reset = p.max_wait or MAX_WINDOW
      end
      if not remaining or not reset then
        return redis.error_reply('ADMIT_CORRUPT request record holds a decision out of range')
      end
      local at = 5 * k - 2
      reply[at], reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4] = 1, remaining, 0, reset, 0
    end
    for x = 1, extra and #extra or 0 do
      reply[2 + 5 * n + x] = extra[x]
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
  if allowed == 0 and not (shadowed and string.byte(shadow, uniform and 1 or k) % 2 == 1) then -- odd: a shadow rejection rejects nothing
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
  for x = 1, extra and #extra or 0 do
    reply[2 + 5 * n + x] = extra[x]
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
for x = 1, extra and #extra or 0 do
  reply[2 + 5 * n + x] = extra[x]
end
return reply
