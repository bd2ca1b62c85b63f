-- rlkit: forget one key's fixed-window counters under one policy.
-- KEYS[1] as for the decision script; ARGV: per limit, count and period (us),
-- then the counter identities of limits 2 to n, as the decision script
-- takes them after the cost.
--
-- It deletes, for each limit, the counters of the window holding the
-- server's time and of its neighbours (for a server clock that moved).
-- Reply: how many of them were live: those of the current window and of
-- the next that hold a count above zero (the previous window has ended,
-- though its key may outlive it by up to a millisecond, its TTL being
-- whole milliseconds; a denial over several limits may leave a key at
-- zero once it gives its cost back).
if redis.replicate_commands then pcall(redis.replicate_commands) end
local n = (#ARGV + 1) / 3
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local live = 0
for i = 1, n do
  local p = tonumber(ARGV[2 * i])
  local key = KEYS[1]
  if i > 1 then key = string.sub(key, 1, -17) .. ARGV[2 * n + i - 1] end
  local idx = math.floor(now / p)
  if idx * p > now then idx = idx - 1 end
  for w = idx - 1, idx + 1 do
    local k = key .. ':' .. string.format('%d', w)
    if w >= idx and (tonumber(redis.call('GET', k)) or 0) > 0 then live = live + 1 end
    redis.call('DEL', k)
  end
end
return live
