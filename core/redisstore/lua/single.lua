
-- single: one decision, the script's KEYS[1] and ARGV (see decide), on the
-- server's clock.
local t = redis.call('TIME')
return decide(KEYS[1], ARGV, 0, #ARGV, tonumber(t[1]) * 1000000 + tonumber(t[2]))
