
-- GCRA: key holds "tat frac D": the theoretical arrival time is
-- tat + frac/count units, kept as a rational so that no rounding
-- accumulates; D is the TTL's deadline.
local function load(key)
  local v = redis.call('GET', key)
  if not v then return 0, 0, nil, 0 end
  local a, b, d = match(v, '^(%-?%d+) (%-?%d+) (%d+)$')
  if not a then return 0, 0, nil, 0 end
  return tonumber(a), tonumber(b), nil, tonumber(d)
end

local function take(r, p, b, now, cost, tata, tatb, _, maxdrain)
  local over = cost > b
  if over then cost = 0 end
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
  local ok, rem, retry = false, 0, 0
  if d <= lim then
    ok = true
    tata, tatb = newa, newb
    rem = fdiv(lim - d, p)
  else
    retry = newa - fdiv(lim - newb, r) - now
    local held = (tata - now) * r + tatb
    if held <= lim then rem = fdiv(lim - held, p) end
  end
  local expire = tata
  if tatb > 0 then expire = tata + 1 end
  local reset = max(expire - now, 0)
  if over then return false, rem, reset, max(reset, p), expire, now end
  return ok, rem, reset, retry, expire, now, tata, tatb
end

local function encode(tata, tatb, _, D)
  return format('%d %d %d', tata, tatb, D)
end
