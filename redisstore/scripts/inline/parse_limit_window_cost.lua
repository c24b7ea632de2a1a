-- parse_limit_window_cost: a take's limit, window (ms) and cost, parsed strictly from their decimal
-- strings ls, ws, cs (take_single.lua's header): each nil or false when malformed; cost '0' and '1'
-- compared, not parsed. Declares limit, window, cost; the site checks their ranges.
local limit = #ls <= MAX_DIGITS and match(ls, '^[1-9]%d*$') and tonumber(ls)
local window = #ws <= MAX_DIGITS and match(ws, '^[1-9]%d*$') and tonumber(ws)
local cost = cs == '1' and 1 or cs == '0' and 0 or #cs <= MAX_DIGITS and match(cs, '^[1-9]%d*$') and tonumber(cs)
