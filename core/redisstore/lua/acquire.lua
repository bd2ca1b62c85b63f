-- rlkit: take a slot of a concurrency limit (store.Concurrency), on the
-- server's clock.
--
-- KEYS[1]  the slots of one key under one limit: a sorted set whose
--          members are the leases held, each scored with the instant (us)
--          it ends
-- ARGV[1]  the limit: the most slots held at once
-- ARGV[2]  the lease (us): how long a slot stays taken unless released
-- ARGV[3]  the new slot's lease id
--
-- Leases that have ended are dropped first: their processes died holding
-- them. The set lives as long as its longest lease (its TTL is raised,
-- never lowered), and goes with its last member.
--
-- Reply: {1, slots held} when a slot was taken, {0, slots held} when every
-- slot is held (nothing is written then but the ended leases' removal).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local key = KEYS[1]
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local n = redis.call('ZCARD', key)
if n >= tonumber(ARGV[1]) then
  return {0, n}
end
local lease = tonumber(ARGV[2])
redis.call('ZADD', key, now + lease, ARGV[3])
local ms = math.ceil(lease / 1000)
if redis.call('PTTL', key) < ms then
  redis.call('PEXPIRE', key, ms)
end
return {1, n + 1}
