-- rlkit: forget one key's counters under one policy.
-- KEYS[1] as for the decision scripts; ARGV[1] = 1 for a fixed window,
-- ARGV[2] = n, then per limit: period (in units), U.
if redis.replicate_commands then pcall(redis.replicate_commands) end
local fixed = ARGV[1] == '1'
local n = tonumber(ARGV[2])
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local deleted = 0
for i = 1, n do
  local key = KEYS[1]
  if i > 1 then key = key .. '.' .. i end
  if fixed then
    local p, u = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
    local q = math.floor(math.floor(now_us / u) / p)
    -- the current window, and its neighbours for a server clock that moved
    for idx = q - 1, q + 1 do
      deleted = deleted + redis.call('DEL', key .. ':' .. string.format('%.0f', idx))
    end
  else
    deleted = deleted + redis.call('DEL', key)
  end
end
return deleted
