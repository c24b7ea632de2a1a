-- override_setup.lua: stores an override at KEYS[1], rate ARGV[1] and burst ARGV[2], as
-- redisstore's SetOverride writes one (no expiry, reason "r"): the SETUP of all.sh's rows of a take
-- under an override (callgrind.sh's SETUP_SCRIPT).
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2] .. ' 0 r')
return 1
