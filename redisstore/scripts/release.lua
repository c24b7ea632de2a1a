-- release.lua: the entry point that ends one lease of a concurrency key (docs/concurrency.md) by
-- compare-and-delete: it removes the lease's token from the key's sorted set, and nothing else.
--
-- KEYS[1]  the concurrency key
-- ARGV[1]  the lease's token, a decimal uint64
--
-- Reply: 1 when the key held the lease, 0 when it did not (released already, expired, or a missing
-- key). A key that is not a sorted set is corrupt: nothing is written.

-- The token is checked as concurrency.lua's concurrency_parse checks it, here, as the call names no
-- module.
local token = ARGV[1]
if #KEYS ~= 1 or ARGS ~= 1 or not token or #token > 20 or not string.match(token, '^[1-9]%d*$') or
  #token == 20 and token > '18446744073709551615' then
  return redis.error_reply('ADMIT_INVALID release needs one key and a lease token')
end
local removed = redis.pcall('ZREM', KEYS[1], token)
if type(removed) == 'table' then
  return redis.error_reply('ADMIT_CORRUPT key holds a value that is not a sorted set')
end
return removed
