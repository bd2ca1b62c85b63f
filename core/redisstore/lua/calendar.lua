-- rlkit: the fixed window over calendar periods, decide(key, A, o, m, now).
-- It stands alone (no prelude), as the fixed window does, and counts in
-- microseconds. Its arguments are A[o + 1] .. A[o + m], laid out as ARGV is
-- for a decision alone; now is the server's time in microseconds.
--
-- key       the key of the policy's first limit; limit i > 1 uses key..'.'..i
-- A[o + 1]  cost (an integer); a negative one, -c - 1, is a dry run (a
--           peek): it evaluates cost c, 0 included, and writes nothing
-- then per limit: count, and the instants (us) prev, start, end and next:
--           the calendar period holding the caller's time, [start, end),
--           the one before it, [prev, start), and the one after, [end, next)
--
-- The caller computes the periods in its time zone from its own clock; the
-- script counts in the one of the three that holds the server's time, so a
-- server clock ahead of the caller's or behind it by less than a period
-- counts in the right period. A server time outside [prev, next) for some
-- limit is answered {-1, now} and nothing is written: the caller reports
-- the clocks' disagreement.
--
-- The count of the period starting at s lives at key..':'..floor(s / 10^6)
-- (its start in Unix seconds) and expires when the period ends: the first
-- request of a period sets its TTL. A denied request gives its cost back
-- with DECRBY, so a denial consumes nothing. Every integer stays below
-- 2^53.
--
-- Reply: per limit {admitted 0/1, remaining, reset-after, retry-after}; a
-- cost above a limit's count is never admitted, with a retry-after of the
-- longer of the reset-after and the period.

-- giveback fails the decision at limit i, which met err (a key of another
-- type: WRONGTYPE): it gives back what the limits before i took, and
-- returns err.
local function giveback(keys, incr, i, cost, err)
  for j = 1, i - 1 do
    if incr[j] then redis.call('DECRBY', keys[j], cost) end
  end
  return err
end

-- periods returns, for each of the n limits of a decision whose
-- arguments start at A[o + 1], the start and the end (us) of its period
-- holding now, or nil when now lies outside [prev, next) of some limit.
local function periods(A, o, n, now)
  local from, to = {}, {}
  for i = 1, n do
    local b = o + 5 * i - 3
    local s, e = tonumber(A[b + 2]), tonumber(A[b + 3])
    if now < s then -- the period before (one assignment at a time: gopher-lua,
      e = s         -- as in miniredis, assigns a list from left to right)
      s = tonumber(A[b + 1])
    elseif now >= e then -- the period after
      s = e
      e = tonumber(A[b + 4])
    end
    if now < s or now >= e then return nil end
    from[i], to[i] = s, e
  end
  return from, to
end

local function decide(key, A, o, m, now)
  local cost = tonumber(A[o + 1])
  local dry = cost < 0
  if dry then cost = -cost - 1 end
  local n = (m - 1) / 5

  -- The period of each limit holding now, before anything is written.
  local from, to = periods(A, o, n, now)
  if not from then return {-1, now} end

  local keys, incr, reply, all = {}, {}, {}, true
  for i = 1, n do
    local r = tonumber(A[o + 5 * i - 3])
    local wk = key
    if i > 1 then wk = wk .. '.' .. i end
    wk = wk .. ':' .. string.format('%d', math.floor(from[i] / 1000000))
    local reset = to[i] - now
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
    if cost <= r and count <= r then
      reply[q + 1], reply[q + 2], reply[q + 3], reply[q + 4] = 1, r - count, reset, 0
    else
      all = false
      local retry = reset
      if cost > r then retry = math.max(reset, to[i] - from[i]) end
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
