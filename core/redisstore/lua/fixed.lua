-- rlkit: the fixed window's decision, decide(key, A, o, m, now). It stands
-- alone (no prelude): a fixed window needs no products, so it counts in
-- microseconds for every limit, and its common case is kept to TIME and one
-- INCRBY. Its arguments are A[o + 1] .. A[o + m], laid out as ARGV is for
-- a decision alone; now is the server's time in microseconds.
--
-- key       the key of the policy's first limit; with several limits it ends
--           with 16 hex digits, the limit's counter identity, and limit
--           i > 1 swaps in its own
-- A[o + 1]  cost (an integer); a negative one, -c - 1, is a dry run (a
--           peek): it evaluates cost c, 0 included, and writes nothing
-- then per limit: count, period (us)
-- then, for limits 2 to n, the 16 hex digits of its counter identity
-- A[o + 4]  one limit only, optional: present, a new window's key lives one
--           period from its first request (as INCR then EXPIRE would leave
--           it); absent, until its window ends
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
-- reset-after, retry-after}. A count kept under a larger limit (the rule's
-- limit lowered) exceeds it, and denies until its window ends.

-- giveback fails a decision over several limits whose limit i met err (a
-- key of another type: WRONGTYPE) as a whole: it gives back what the
-- limits before i took, and returns err.
local function giveback(keys, incr, i, cost, err)
  for j = 1, i - 1 do
    if incr[j] then redis.call('DECRBY', keys[j], cost) end
  end
  return err
end

local function decide(key, A, o, m, now)
  local cost = tonumber(A[o + 1])
  local dry = cost < 0
  if dry then cost = -cost - 1 end

  if m <= 4 then -- one limit: the common case, kept lean
    local r, p = tonumber(A[o + 2]), tonumber(A[o + 3])
    local idx = math.floor(now / p)
    if idx * p > now then idx = idx - 1 end
    local wk = key .. ':' .. string.format('%d', idx)
    local reset = (idx + 1) * p - now
    if cost > 0 and cost <= r and not dry then
      local count = redis.call('INCRBY', wk, A[o + 1]) -- the string as given: no conversion
      if count == cost then
        local ttl = reset
        if m == 4 then ttl = p end
        redis.call('PEXPIRE', wk, math.ceil(ttl / 1000))
      elseif count > r then
        redis.call('DECRBY', wk, cost)
      end
      return {count, reset}
    end
    return {(tonumber(redis.call('GET', wk)) or 0) + cost, reset}
  end

  -- Several limits: take from each, and give back to all when one denies.
  local n = m / 3
  local keys, incr, reply, all = {}, {}, {}, true
  for i = 1, n do
    local r, p = tonumber(A[o + 2 * i]), tonumber(A[o + 2 * i + 1])
    local wk = key
    if i > 1 then wk = string.sub(key, 1, -17) .. A[o + 2 * n + i] end
    local idx = math.floor(now / p)
    if idx * p > now then idx = idx - 1 end
    wk = wk .. ':' .. string.format('%d', idx)
    local reset = (idx + 1) * p - now
    local count
    if cost > 0 and cost <= r and not dry then
      count = redis.pcall('INCRBY', wk, cost)
      if type(count) == 'table' then return giveback(keys, incr, i, cost, count) end
      if count == cost then redis.call('PEXPIRE', wk, math.ceil(reset / 1000)) end
      keys[i], incr[i] = wk, true
    else
      count = redis.pcall('GET', wk)
      if type(count) == 'table' then return giveback(keys, incr, i, cost, count) end
      count = (tonumber(count) or 0) + cost
    end
    local q = (i - 1) * 4
    if cost <= r and (count <= r or cost == 0) then
      reply[q + 1], reply[q + 2], reply[q + 3], reply[q + 4] = 1, math.max(r - count, 0), reset, 0
    else
      all = false
      local retry = reset
      if cost > r then retry = math.max(reset, p) end
      reply[q + 1], reply[q + 2], reply[q + 3], reply[q + 4] = 0, math.max(r - count + cost, 0), reset, retry
    end
  end
  if not all and cost > 0 then
    for i = 1, n do
      if incr[i] then redis.call('DECRBY', keys[i], cost) end -- nothing is consumed
      local q = (i - 1) * 4
      if reply[q + 1] == 1 then reply[q + 2] = reply[q + 2] + cost end
    end
  end
  return reply
end
