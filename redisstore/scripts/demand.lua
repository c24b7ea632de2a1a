-- The demand records of one RLQS bucket (transport/rlqs's Ledger): a hash of client to
-- "<demand> <expires ms>", and the field "~born" to the time (ms) the ledger was born: when a record
-- was written while none was live. One call drops the expired entries, sets (or, with leave,
-- removes) the caller's, and returns the birth time, then every live client and its demand,
-- atomically.
-- KEYS[1] the bucket's hash; ARGV: client, demand, now (ms), ttl (ms), leave ("1" removes).
local key, client = KEYS[1], ARGV[1]
local now, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local all = redis.call('HGETALL', key)
local live, out = {}, {}
local last, born, alive = 0, nil, false
for i = 1, #all, 2 do
  local c, v = all[i], all[i + 1]
  if c == '~born' then
    born = string.match(v, '^[0-9]+$')
  else
    local d, e = string.match(v, '^([^ ]+) ([0-9]+)$')
    e = tonumber(e)
    if d and e and e > now then
      alive = true
      if c ~= client then
        live[#live + 1] = c
        live[#live + 1] = v
        out[#out + 1] = c
        out[#out + 1] = d
        if e > last then last = e end
      end
    end
  end
end
if not alive or not born then born = string.format('%d', now) end
if ARGV[5] ~= '1' then
  local e = now + ttl
  live[#live + 1] = client
  live[#live + 1] = ARGV[2] .. ' ' .. string.format('%d', e)
  out[#out + 1] = client
  out[#out + 1] = ARGV[2]
  if e > last then last = e end
end
redis.call('DEL', key)
if #live > 0 then
  live[#live + 1] = '~born'
  live[#live + 1] = born
  redis.call('HSET', key, unpack(live))
  redis.call('PEXPIREAT', key, string.format('%d', last))
end
table.insert(out, 1, born)
return out
