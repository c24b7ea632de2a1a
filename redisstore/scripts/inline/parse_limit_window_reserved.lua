-- parse_limit_window_reserved: a settlement's limit, window (ms) and reserved cost, parsed strictly
-- from their decimal strings ls, ws, cs, as parse_limit_window_cost parses a take's, but a
-- reservation's cost is never 0. Declares limit, window, reserved; the site checks their ranges.
local limit = #ls <= MAX_DIGITS and match(ls, '^[1-9]%d*$') and tonumber(ls)
local window = #ws <= MAX_DIGITS and match(ws, '^[1-9]%d*$') and tonumber(ws)
local reserved = cs == '1' and 1 or #cs <= MAX_DIGITS and match(cs, '^[1-9]%d*$') and tonumber(cs)
