-- rlkit: forget one key's calendar counters under one policy. KEYS[1] as
-- for the decision script; ARGV: per limit, count, prev, start, end and
-- next (us), as the decision script takes them after the cost.
--
-- It deletes, for each limit, the counters of the four periods starting at
-- prev, start, end and next. Reply: how many were live: those of the
-- period holding the server's time (the caller's, [start, end), when the
-- server's time lies outside [prev, next)) and of the period after it
-- that hold a count above zero.
if redis.replicate_commands then pcall(redis.replicate_commands) end
local n = #ARGV / 5
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local live = 0
for i = 1, n do
  local b = 5 * i - 4
  local starts = {tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])}
  local cur = 2
  for j = 1, 3 do
    if now >= starts[j] and now < starts[j + 1] then cur = j end
  end
  local key = KEYS[1]
  if i > 1 then key = key .. '.' .. i end
  for j = 1, 4 do
    local k = key .. ':' .. string.format('%d', math.floor(starts[j] / 1000000))
    if (j == cur or j == cur + 1) and (tonumber(redis.call('GET', k)) or 0) > 0 then live = live + 1 end
    redis.call('DEL', k)
  end
end
return live
