
-- Token bucket: key holds "anchor owed U D": the refill anchor (in units
-- of U), the tokens owed at it, U, and the TTL's deadline. The anchor
-- moves by whole periods only, so no remainder of refill time is ever
-- lost. Tokens owed are read under the capacity and rate the counter has
-- now, up to c + r (one kept under a larger capacity carries over that
-- much); an anchor kept in another U is converted, rounded up.
local function decode(v)
  if not v then return 0, 0, nil, nil, 0 end
  local a, b, su, d = match(v, '^(%-?%d+) (%-?%d+) (%d+) (%d+)$')
  if not a then return 0, 0, nil, nil, 0 end
  return tonumber(a), tonumber(b), tonumber(su), nil, tonumber(d)
end

local function load(key) return decode(redis.call('GET', key)) end

local function take(r, p, c, u, now, cost, anchor, owed, su, _, maxdrain)
  local over = cost > c
  if over then cost = 0 end
  local rewrite = false
  if su and su ~= u and su > 0 then
    anchor, rewrite = cdiv(anchor * su, u), true
  end
  -- What a request that consumes nothing leaves: moving the anchor would
  -- count the whole periods since at this rate, which new terms may change.
  local sa, so = anchor, owed
  owed = min(owed, c + 2 * r) -- below c + r after a take, c + 2r after a charge
  if anchor - now > maxdrain then anchor = now end
  local elapsed = max(now - anchor, 0)
  local m = fdiv(elapsed, p)
  if owed <= 0 or m >= fdiv(owed + r - 1, r) then
    anchor, owed, elapsed = now, 0, 0
  elseif m > 0 then
    anchor = anchor + m * p
    owed = owed - m * r
    elapsed = elapsed - m * p
  end
  local refilled = fdiv(r * elapsed, p)
  if owed <= refilled then
    anchor, owed, refilled = now, 0, 0
  end
  local avail = c - owed + refilled
  local ok, retry = false, 0
  if cost <= avail then
    owed = owed + cost
    avail = avail - cost
    ok = true
  else
    retry = anchor + cdiv((owed - c + cost) * p, r) - now
  end
  local expire = now
  if owed > 0 then expire = anchor + cdiv(owed * p, r) end
  local rem, reset = max(avail, 0), max(expire - now, 0)
  if over then return false, rem, reset, max(reset, p), expire, now end
  if cost == 0 then ok, retry = true, 0 end -- owed beyond a smaller capacity: nothing to consume
  if not ok or cost == 0 then anchor, owed = sa, so end
  return ok, rem, reset, retry, expire, now, anchor, owed, u, nil, rewrite
end

local function encode(anchor, owed, u, _, D)
  return format('%d %d %d %d', anchor, owed, u, D)
end
