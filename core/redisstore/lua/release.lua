-- rlkit: give back a slot of a concurrency limit (see acquire.lua).
--
-- KEYS[1]  the slots of one key under one limit
-- ARGV[1]  the lease id of the slot
--
-- Reply: 1 when the slot was held, 0 when it was not (already released,
-- or its lease ended). The set goes with its last member.
return redis.call('ZREM', KEYS[1], ARGV[1])
