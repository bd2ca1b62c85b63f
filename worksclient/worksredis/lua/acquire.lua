-- worksclient: take the leader lock.
-- KEYS[1]: the lock; ARGV[1]: this holder's token; ARGV[2]: the TTL in ms.
-- SET NX PX takes a free lock. A lock that already holds this token was
-- taken by an earlier attempt of the same holder whose reply was lost: it
-- is the holder's, and its TTL starts again. Returns 1 when held, else 0.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
