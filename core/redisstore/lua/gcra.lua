
-- GCRA: key holds "tat frac": the theoretical arrival time is tat + frac/count
-- units, kept as a rational so that no rounding accumulates.
local function load(l)
  local a, b = fields(redis.call('GET', l.key))
  l.sa, l.sb = a or 0, b or 0
end

local function take(l, cost)
  local r, p, b, now = l.r, l.p, l.c, l.now
  if cost > b then
    take(l, 0)
    l.ok = false
    l.retry = math.max(l.reset, p)
    return
  end
  local maxdrain = fdiv(MAXDRAIN_US, l.u)
  local tata, tatb = l.sa, l.sb
  if tatb >= r or tatb < 0 or tata - now > maxdrain then
    tata, tatb = now + maxdrain, 0
  end
  if tata < now or (tata == now and tatb == 0) then
    tata, tatb = now, 0
  end
  -- newTAT = tat + cost*p/r
  local x = cost * p + tatb
  local q = fdiv(x, r)
  local newa, newb = tata + q, x - q * r
  local lim = b * p
  local d = (newa - now) * r + newb
  l.ok, l.retry, l.remaining = false, 0, 0
  if d <= lim then
    l.ok = true
    tata, tatb = newa, newb
    l.remaining = fdiv(lim - d, p)
  else
    l.retry = newa - fdiv(lim - newb, r) - now
    local held = (tata - now) * r + tatb
    if held <= lim then l.remaining = fdiv(lim - held, p) end
  end
  l.expire = tata
  if tatb > 0 then l.expire = tata + 1 end
  l.reset = math.max(l.expire - now, 0)
  l.next = num(tata) .. ' ' .. num(tatb)
end

local function save(l)
  redis.call('SET', l.key, l.next, 'PX', math.max(cdiv((l.expire - l.now) * l.u, 1000), 1))
end
