-- clock_us: now, Unix µs: Redis's TIME, or a test assembly's last argument (CLOCK_FROM_ARGV). Sets
-- now, which the site declares.
if CLOCK_FROM_ARGV then
  now = tonumber(ARGV[#ARGV])
else
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
end
