
-- reset driver: forget one key's counters under one policy (sliding window,
-- token bucket, GCRA). ARGV: n, then per limit count, period (in units),
-- capacity and U, then the counter identities of limits 2 to n, as the
-- decision script takes them after the cost.
-- Reply: how many of the counters were live, that is, held a state that
-- is not yet back to the initial one (a take of cost 0 reports a reset
-- after above zero); their keys may outlive that by up to a period.
local n = tonumber(ARGV[1])
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local live = 0
for i = 1, n do
  local j = 2 + (i - 1) * 4
  local r, p, c, u = tonumber(ARGV[j]), tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
  local key = limitkey(KEYS[1], i, ARGV, 4 * n + i)
  local s1, s2, s3, s4 = load(key)
  local _, _, reset = take(r, p, c, u, fdiv(now_us, u), 0, s1, s2, s3, s4, fdiv(MAXDRAIN_US, u))
  if redis.call('DEL', key) == 1 and reset > 0 then live = live + 1 end
end
return live
