-- sliding_window_reset: a sliding window's reset_after when cost fits, in ms + 999 (the site divides
-- it by 1000): two windows on from the current one's start with a current count after the
-- admission, one with a previous count only, else none. Reads cost, prev, curr, w, e. Declares reset.
local reset = 0
if curr + cost > 0 then
  reset = 2 * w - e + 999
elseif prev > 0 then
  reset = w - e + 999
end
