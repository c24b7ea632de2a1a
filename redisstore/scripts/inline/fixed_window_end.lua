-- fixed_window_end: an aligned fixed window's now and end, in ms: Redis's TIME, or a test assembly's
-- last argument, Unix µs (CLOCK_FROM_ARGV). Reads aligned ('1' for an aligned window) and window;
-- sets t and ends, which the site declares nil, only for an aligned window.
if aligned == '1' then
  if CLOCK_FROM_ARGV then
    t = math.floor(tonumber(ARGV[#ARGV]) / 1000)
  else
    local tm = redis.call('TIME')
    t = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
  end
  ends = t - t % window + window
end
