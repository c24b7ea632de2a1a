-- gcra_read: a gcra bucket's key read as admit writes it (gcra.lua's read). Reads key, tolerance,
-- match, tonumber. Declares raw, now and backlog: now (µs, clock_us) nil for a corrupt key; backlog
-- the stored TAT's lead over now, 0 to tolerance.
local raw, now, backlog = redis.pcall('GET', key), nil, 0
if raw then
  if type(raw) == 'string' and #raw <= MAX_DIGITS and match(raw, '^[1-9]%d*$') then
    local tat = tonumber(raw)
    if tat <= MAX_TAT then
      local ttl = redis.call('PTTL', key)
      if ttl >= 0 and ttl <= math.ceil(tolerance / 1000) + 1 then
        --@inline clock_us
        backlog = tat - now
        if backlog > tolerance then
          now = nil -- corrupt
        elseif backlog < 0 then
          backlog = 0
        end
      end
    end
  end
else
  --@inline clock_us
end
