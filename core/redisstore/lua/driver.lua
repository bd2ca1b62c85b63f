
-- driver: evaluate every limit; write only when all admit.
local cost = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local lims = {}
local all = true
for i = 1, n do
  local j = 3 + (i - 1) * 4
  local l = {
    r = tonumber(ARGV[j]), p = tonumber(ARGV[j + 1]),
    c = tonumber(ARGV[j + 2]), u = tonumber(ARGV[j + 3]),
    key = KEYS[1],
  }
  if i > 1 then l.key = KEYS[1] .. '.' .. i end
  l.now = fdiv(now_us, l.u)
  load(l)
  take(l, cost)
  lims[i] = l
  all = all and l.ok
end
local reply = {}
for i = 1, n do
  local l = lims[i]
  if all then
    if cost > 0 then save(l) end
  elseif l.ok then
    -- Denied by another limit: nothing is consumed; report this one as it stands.
    take(l, 0)
    l.ok = true
    l.retry = 0
  end
  local k = (i - 1) * 4
  reply[k + 1] = l.ok and 1 or 0
  reply[k + 2] = l.remaining
  reply[k + 3] = l.reset * l.u
  reply[k + 4] = l.retry * l.u
end
return reply
