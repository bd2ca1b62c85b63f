-- redishold: hold a key back, keeping the later of two holds.
-- KEYS[1]: the hold; ARGV[1]: the new hold's length in ms (> 0).
-- The hold is the key's time to live on the server's clock: the new one
-- replaces the one in place only when it ends later. Returns the time left
-- on the hold now in place, in ms.
local d = tonumber(ARGV[1])
local left = redis.call('PTTL', KEYS[1])
if left >= d then
  return left
end
redis.call('SET', KEYS[1], '1', 'PX', d)
return d
