
-- Token bucket: key holds "anchor owed D": the refill anchor, the tokens
-- owed at it, and the TTL's deadline. The anchor moves by whole periods
-- only, so no remainder of refill time is ever lost.
local function load(key)
  local v = redis.call('GET', key)
  if not v then return 0, 0, nil, 0 end
  local a, b, d = match(v, '^(%-?%d+) (%-?%d+) (%d+)$')
  if not a then return 0, 0, nil, 0 end
  return tonumber(a), tonumber(b), nil, tonumber(d)
end

local function take(r, p, c, now, cost, anchor, owed, _, maxdrain)
  local over = cost > c
  if over then cost = 0 end
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
  return ok, rem, reset, retry, expire, now, anchor, owed
end

local function encode(anchor, owed, _, D)
  return format('%d %d %d', anchor, owed, D)
end
