
-- driver: evaluate every limit; write only when all admit, and never in a
-- dry run (a negative cost: a peek at -cost).
local cost = tonumber(ARGV[1])
local dry = cost < 0
if dry then cost = -cost end
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- put writes a limit's next state with a TTL that outlives it. The value
-- ends with D, the deadline (server ms) the key's TTL was last set to, so
-- that while the state needs no longer, the write keeps the TTL (KEEPTTL:
-- setting an expiry costs the server more than the write). When it needs
-- longer, the TTL is set one period past the need, which the following
-- writes of the period then keep.
local function put(key, u, p, at, expire, a, b, x, D)
  local need = cdiv(now_us + (expire - at) * u, 1000)
  if need <= D then
    redis.call('SET', key, encode(a, b, x, D), 'KEEPTTL')
    return
  end
  D = need + cdiv(p * u, 1000)
  redis.call('SET', key, encode(a, b, x, D), 'PX', D - fdiv(now_us, 1000))
end

if #ARGV == 6 then -- one limit: the common case, without tables
  local r, p, c, u = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
  local now = now_us
  if u ~= 1 then now = fdiv(now_us, u) end
  local s1, s2, s3, D = load(KEYS[1])
  local ok, rem, reset, retry, expire, at, a, b, x = take(r, p, c, now, cost, s1, s2, s3, fdiv(MAXDRAIN_US, u))
  if ok and cost > 0 and not dry then put(KEYS[1], u, p, at, expire, a, b, x, D) end
  return {ok and 1 or 0, rem, reset * u, retry * u}
end

-- Several limits: st holds, per limit, its key, terms and loaded state.
local n = tonumber(ARGV[2])
local st, all = {}, true
for i = 1, n do
  local j = 3 + (i - 1) * 4
  local r, p, c, u = tonumber(ARGV[j]), tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
  local key = KEYS[1]
  if i > 1 then key = key .. '.' .. i end
  local now = fdiv(now_us, u)
  local s1, s2, s3, D = load(key)
  local k = (i - 1) * 9
  st[k + 1], st[k + 2], st[k + 3], st[k + 4], st[k + 5] = key, r, p, c, u
  st[k + 6], st[k + 7], st[k + 8], st[k + 9] = s1, s2, s3, D
  if not take(r, p, c, now, cost, s1, s2, s3, fdiv(MAXDRAIN_US, u)) then all = false end
end
local reply = {}
for i = 1, n do
  local k = (i - 1) * 9
  local key, r, p, c, u = st[k + 1], st[k + 2], st[k + 3], st[k + 4], st[k + 5]
  local now = fdiv(now_us, u)
  local maxdrain = fdiv(MAXDRAIN_US, u)
  local ok, rem, reset, retry, expire, at, a, b, x = take(r, p, c, now, cost, st[k + 6], st[k + 7], st[k + 8], maxdrain)
  if all then
    if cost > 0 and not dry then put(key, u, p, at, expire, a, b, x, st[k + 9]) end
  elseif ok then
    -- Denied by another limit: nothing is consumed; report this one as it stands.
    ok, rem, reset = take(r, p, c, now, 0, st[k + 6], st[k + 7], st[k + 8], maxdrain)
    retry = 0
  end
  local m = (i - 1) * 4
  reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4] = ok and 1 or 0, rem, reset * u, retry * u
end
return reply
