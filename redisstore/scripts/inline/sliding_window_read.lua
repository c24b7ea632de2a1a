-- sliding_window_read: a sliding window's key read as admit writes it (sliding_window.lua's read).
-- Reads key, window, now (µs), w (the window in µs), cur (the current window's start, µs), match,
-- tonumber. Sets ok false for a corrupt key, else leaves it as it is; prev and curr (declared 0 by
-- the site) to the previous and current windows' counts as of now; same (declared false) true when
-- the key's window is the current one.
local h = redis.pcall('HGETALL', key)
if h.err then
  ok = false
elseif #h > 0 then
  local start, p, c
  if #h == 6 then -- start, prev and curr, in any order; anything else is corrupt
    for j = 1, 5, 2 do
      local f, v = h[j], h[j + 1]
      local x = v == '0' and 0 or #v <= MAX_DIGITS and match(v, '^[1-9]%d*$') and tonumber(v)
      if x and x <= MAX then
        if f == 'start' then
          start = x
        elseif f == 'prev' then
          p = x
        elseif f == 'curr' and x > 0 then
          c = x
        end
      end
    end
  end
  ok = start and p and c and start % window == 0 and start * 1000 <= now and redis.call('PTTL', key) ~= -1
  if ok then
    start = start * 1000
    if start == cur then
      prev, curr, same = p, c, true
    elseif start == cur - w then
      prev = c
    end
  end
end
