
-- Token bucket: key holds "anchor owed": the refill anchor and the tokens
-- owed at it. The anchor moves by whole periods only, so no remainder of
-- refill time is ever lost.
local function load(l)
  local a, b = fields(redis.call('GET', l.key))
  l.sa, l.sb = a or 0, b or 0
end

local function take(l, cost)
  local r, p, c, now = l.r, l.p, l.c, l.now
  if cost > c then
    take(l, 0)
    l.ok = false
    l.retry = math.max(l.reset, p)
    return
  end
  local anchor, owed = l.sa, math.min(l.sb, c + r)
  if anchor - now > fdiv(MAXDRAIN_US, l.u) then anchor = now end
  local elapsed = math.max(now - anchor, 0)
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
  l.ok, l.retry = false, 0
  if cost <= avail then
    owed = owed + cost
    avail = avail - cost
    l.ok = true
  else
    l.retry = anchor + cdiv((owed - c + cost) * p, r) - now
  end
  l.remaining = math.max(avail, 0)
  if owed == 0 then
    l.expire = now
  else
    l.expire = anchor + cdiv(owed * p, r)
  end
  l.reset = math.max(l.expire - now, 0)
  l.next = num(anchor) .. ' ' .. num(owed)
end

local function save(l)
  redis.call('SET', l.key, l.next, 'PX', math.max(cdiv((l.expire - l.now) * l.u, 1000), 1))
end
