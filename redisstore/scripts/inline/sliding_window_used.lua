-- sliding_window_used: adds to used ⌈ab / w⌉, ab = prev × (w − e) the previous window's weighted
-- count, exactly: the site checks that ab is below 2^52. Reads ab and w, sets used.
local r = ab % w
local q = (ab - r) / w
if r < 0 then
  q, r = q - 1, r + w
elseif r >= w then
  q, r = q + 1, r - w
end
if r > 0 then
  q = q + 1
end
used = used + q
