-- fixed_window_read: a fixed window's key read as admit writes it (fixed_window.lua's read), after
-- raw = GET key. Reads key, raw, window, match, tonumber, and t and ends: now and the window's end in
-- ms, both nil unless the window is aligned. Sets ok false for a corrupt key, else leaves it as it is;
-- count and ttl (declared 0 by the site) to the key's count and ms to live, while its window lasts;
-- expires (declared nil by the site) to the key's PEXPIRETIME, aligned windows only.
if raw then
  ok = false -- until the key is read as admit writes it
  if type(raw) == 'string' and #raw <= MAX_DIGITS and match(raw, '^[1-9]%d*$') then
    local stored = tonumber(raw)
    if stored <= MAX then
      if t then
        expires = redis.call('PEXPIRETIME', key)
        if expires ~= -1 and expires <= ends then
          ok = true
          if expires > t then
            count, ttl = stored, expires - t
          end
        end
      else
        local left = redis.call('PTTL', key)
        if left ~= -1 and left <= window then
          ok = true
          if left > 0 then
            count, ttl = stored, left
          end
        end
      end
    end
  end
end
