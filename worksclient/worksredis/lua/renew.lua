-- worksclient: renew the leader lock, only while this holder has it.
-- KEYS[1]: the lock; ARGV[1]: this holder's token; ARGV[2]: the TTL in ms.
-- Returns 1 when renewed, 0 when the lock is another's or gone.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
