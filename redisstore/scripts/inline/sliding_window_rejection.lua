-- sliding_window_rejection: what a sliding window's rejection waits for (the module's decide): later
-- in this window, at w − ⌊r × w / prev⌋ − e with r = limit − curr − cost when r ≥ 0; else in the
-- next window, after w − e, and then w − ⌊r × w / curr⌋ more with r = limit − cost when curr > r.
-- Reads limit, cost, prev, curr, w, e. Declares r, wait (µs, before the quotient's part), c (the
-- count whose exit is waited for, false for none) and ab2 = c and r × w; the quotient
-- (sliding_window_wait) is exact while ab2 is below 2^52, which the site checks.
local r, wait, c = limit - curr - cost, -e, prev
if r < 0 then
  r, wait, c = limit - cost, w - e, curr > limit - cost and curr
end
local ab2 = c and r * w
