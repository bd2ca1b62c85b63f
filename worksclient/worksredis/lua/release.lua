-- worksclient: release the leader lock, only while this holder has it
-- (compare and delete).
-- KEYS[1]: the lock; ARGV[1]: this holder's token.
-- Returns 1 when deleted, 0 when the lock is another's or gone.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
