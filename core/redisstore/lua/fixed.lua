-- rlkit: fixed window decision script. It stands alone (no prelude): a
-- fixed window needs no products, so it counts in microseconds for every
-- limit, and its common case is kept to TIME and one INCRBY.
--
-- KEYS[1]  the key of the policy's first limit; limit i > 1 uses KEYS[1]..'.'..i
-- ARGV[1]  cost (an integer); a negative one, -c, is a dry run (a peek): it
--          evaluates cost c and writes nothing
-- then per limit: count, period (us)
-- ARGV[4]  one limit only, optional: present, a new window's key lives one
--          period from its first request (as INCR then EXPIRE would leave
--          it); absent, until its window ends
--
-- The count of window idx = floor(now / period) lives at key..':'..idx.
-- INCRBY reads and writes in one call, so an admitted request costs TIME and
-- INCRBY (and PEXPIRE once per window); a denied one gives its cost back
-- with DECRBY, so a denial consumes nothing. Every integer stays below 2^53.
--
-- Reply, one limit: {count after the request, reset-after (us)}; the count
-- includes the cost when it was not admitted (and was given back), so the
-- request was admitted exactly when count <= limit. A cost of 0 or above the
-- limit only reads. Several limits: per limit {admitted 0/1, remaining,
-- reset-after, retry-after}.

local cost = tonumber(ARGV[1])
local dry = cost < 0
if dry then cost = -cost end
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]

if #ARGV <= 4 then -- one limit: the common case, kept lean
  local r, p = tonumber(ARGV[2]), tonumber(ARGV[3])
  local idx = math.floor(now / p)
  if idx * p > now then idx = idx - 1 end
  local key = KEYS[1] .. ':' .. string.format('%d', idx)
  local reset = (idx + 1) * p - now
  if cost > 0 and cost <= r and not dry then
    local count = redis.call('INCRBY', key, ARGV[1]) -- the string as given: no conversion
    if count == cost then
      local ttl = reset
      if ARGV[4] then ttl = p end
      redis.call('PEXPIRE', key, math.ceil(ttl / 1000))
    elseif count > r then
      redis.call('DECRBY', key, cost)
    end
    return {count, reset}
  end
  return {(tonumber(redis.call('GET', key)) or 0) + cost, reset}
end

-- Several limits: take from each, and give back to all when one denies.
local n = (#ARGV - 1) / 2
local keys, incr, reply, all = {}, {}, {}, true
for i = 1, n do
  local r, p = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local key = KEYS[1]
  if i > 1 then key = key .. '.' .. i end
  local idx = math.floor(now / p)
  if idx * p > now then idx = idx - 1 end
  key = key .. ':' .. string.format('%d', idx)
  local reset = (idx + 1) * p - now
  local count
  if cost > 0 and cost <= r and not dry then
    count = redis.call('INCRBY', key, cost)
    if count == cost then redis.call('PEXPIRE', key, math.ceil(reset / 1000)) end
    keys[i], incr[i] = key, true
  else
    count = (tonumber(redis.call('GET', key)) or 0) + cost
  end
  local m = (i - 1) * 4
  if cost <= r and count <= r then
    reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4] = 1, r - count, reset, 0
  else
    all = false
    local retry = reset
    if cost > r then retry = math.max(reset, p) end
    reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4] = 0, math.max(r - count + cost, 0), reset, retry
  end
end
if not all and cost > 0 then
  for i = 1, n do
    if incr[i] then redis.call('DECRBY', keys[i], cost) end -- nothing is consumed
    local m = (i - 1) * 4
    if reply[m + 1] == 1 then reply[m + 2] = reply[m + 2] + cost end
  end
end
return reply
