-- rlkit: count the slots held of one key under one concurrency limit, on
-- the server's clock, writing nothing.
--
-- KEYS[1]  the slots: a sorted set of leases, each scored with the instant
--          (us) it ends (see acquire.lua)
--
-- Reply: how many leases have not ended.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
return redis.call('ZCOUNT', KEYS[1], string.format('(%d', now), '+inf')
