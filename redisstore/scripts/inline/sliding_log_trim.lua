-- sliding_log_trim: before a sliding log's append, drops the entries that have left the window and
-- finds the sequence the new entries continue. Reads key, card, count, newest, now (µs), w. Declares
-- at, now as a decimal string (the new entries' score), and seq, how many entries were logged at now
-- already.
local at = string.format('%d', now)
if card > count then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - w))
end
local seq = 0
if newest == now then
  seq = redis.call('ZCOUNT', key, at, at)
end
