
-- fixed window charge: charge a cost known after the response to one key
-- under one policy, into debt if need be (at most the count past the
-- limit: a window's count reaches at most twice the limit), then answer
-- as a peek of cost 1 would (decide, in a dry run). It follows fixed.lua.
-- KEYS[1] and ARGV as for a decision, ARGV[1] being the cost. The debt
-- lasts until its window ends, as the window's count does.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
local m = #ARGV
local n, layout = m / 3, false -- several limits: 1 + 2n + (n - 1) arguments
if m <= 4 then n, layout = 1, m == 4 end
for i = 1, n do
  local r, p = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local wk = KEYS[1]
  if i > 1 then wk = string.sub(wk, 1, -17) .. ARGV[2 * n + i] end
  local idx = math.floor(now / p)
  if idx * p > now then idx = idx - 1 end
  wk = wk .. ':' .. string.format('%d', idx)
  local count = tonumber(redis.call('GET', wk)) or 0
  local k = math.min(cost, math.max(2 * r - count, 0))
  if k > 0 then
    if redis.call('INCRBY', wk, k) == k then
      local ttl = (idx + 1) * p - now
      if layout then ttl = p end
      redis.call('PEXPIRE', wk, math.ceil(ttl / 1000))
    end
  end
end
local A = {}
for i = 1, m do A[i] = ARGV[i] end
A[1] = '-2' -- a dry run of cost 1 (see fixed.lua)
return decide(KEYS[1], A, 0, m, now)
