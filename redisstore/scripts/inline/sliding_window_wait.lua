-- sliding_window_wait: a sliding window's rejection (the module's decide). Reads limit, used, curr,
-- w, e, and r, wait, c, ab2 as the site sets them: c the count whose exit is waited for (false for
-- none), ab2 = c and r × w, below 2^52 when c is not false. Sets wait, and declares reset, both in
-- ms + 999 (the site divides them by 1000), and remaining.
if c then
  local m = ab2 % c
  local q = (ab2 - m) / c
  if m < 0 then
    q = q - 1
  elseif m >= c then
    q = q + 1
  end
  wait = wait + w - q
end
local reset = w - e + 999
if curr > 0 then
  reset = reset + w
end
local remaining = limit - used
if remaining < 0 then
  remaining = 0
end
wait = wait + 999
