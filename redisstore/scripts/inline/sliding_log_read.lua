-- sliding_log_read: a sliding log's key read as admit writes it (sliding_log.lua's read), after
-- card = pcall ZCARD key. Reads key, card, limit, cost, now (µs), w (the window in µs), match,
-- tonumber. Sets ok false for a corrupt key, else leaves it as it is; count (declared 0 by the site)
-- to the entries in the window; newest (declared 0) to the newest entry's time; kth (declared nil),
-- when count + cost is above limit, to the time of the entry whose exit lets cost fit.
if type(card) == 'table' or card > MAX_LOG then
  ok = false
elseif card > 0 then
  -- The newest entry is '<t>:<seq>' scored t, an integer time not after now (the module's read).
  local r = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local sc = r[2]
  newest = sc == '0' and 0 or #sc <= MAX_DIGITS and match(sc, '^[1-9]%d*$') and tonumber(sc)
  if newest and newest <= now and match(r[1], '^(%d+):[1-9]%d*$') == sc and redis.call('PTTL', key) ~= -1 then
    count = redis.call('ZCOUNT', key, '(' .. string.format('%d', now - w), '+inf')
    local k = count + cost - limit
    if k > 0 then
      local rank = card - count + k - 1
      sc = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2]
      kth = sc == '0' and 0 or #sc <= MAX_DIGITS and match(sc, '^[1-9]%d*$') and tonumber(sc)
      ok = kth and kth <= now
    end
  else
    ok = false
  end
end
