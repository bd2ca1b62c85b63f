
-- GCRA: key holds "tat frac r U D": the theoretical arrival time is
-- tat + frac/r units of U, kept as a rational so that no rounding
-- accumulates; r and U are the count and unit it was written under, and D
-- is the TTL's deadline. A state kept under another r or U is rebased
-- once: what it had spent, (tat - now) * r + frac in its own units (units
-- x period), stays, up to cap(), and is counted under this count and U.
local function decode(v)
  if not v then return 0, 0, nil, nil, 0 end
  local a, b, sr, su, d = match(v, '^(%-?%d+) (%-?%d+) (%d+) (%d+) (%d+)$')
  if not a then return 0, 0, nil, nil, 0 end
  return tonumber(a), tonumber(b), tonumber(sr), tonumber(su), tonumber(d)
end

local function load(key) return decode(redis.call('GET', key)) end

-- cap is the most a state carries over, scaled as (tat - now) * r: the
-- capacity and one period's count, (b + r) * p, and at most maxdrain * r.
local function cap(r, p, b, maxdrain)
  local m = (b + r) * p
  if cdiv(m, r) > maxdrain then m = maxdrain * r end
  return m
end

local function take(r, p, b, u, now, cost, tata, tatb, sr, su, maxdrain)
  local over = cost > b
  if over then cost = 0 end
  local rewrite = false
  if sr and (sr ~= r or su ~= u) and sr > 0 and su > 0 then
    local nowo = fdiv(now * u, su) -- now in the stored unit
    if tatb < 0 or tatb >= sr or tata - nowo > fdiv(MAXDRAIN_US, su) then
      -- not a state take returns: the checks below
    elseif tata < nowo or (tata == nowo and tatb == 0) then
      tata, tatb = now, 0 -- nothing spent
    else
      local x, m = (tata - nowo) * sr + tatb, cap(r, p, b, maxdrain)
      local d
      if su == u then
        d = min(x, m)
      elseif su > u then
        local k = su / u
        if x >= cdiv(m, k) then d = m else d = x * k end
      else
        d = min(cdiv(x, u / su), m)
      end
      local q = fdiv(d, r)
      tata, tatb, rewrite = now + q, d - q * r, true
    end
  end
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
    local held = (tata - now) * r + tatb
    if held <= lim then
      rem = fdiv(lim - held, p)
    else
      local m = cap(r, p, b, maxdrain)
      if held > m then -- kept under a larger capacity, more than it carries over
        local mq = fdiv(m, r)
        local ok2, rem2, reset2, retry2, expire2, at2, a2, b2, x2, y2 = take(r, p, b, u, now, cost, now + mq, m - mq * r, r, u, maxdrain)
        if over then return false, rem2, reset2, max(reset2, p), expire2, at2 end
        return ok2, rem2, reset2, retry2, expire2, at2, a2, b2, x2, y2, true
      end
    end
    retry = newa - fdiv(lim - newb, r) - now
    if cost == 0 then ok, retry = true, 0 end -- owed beyond a smaller capacity: nothing to consume
  end
  local expire = tata
  if tatb > 0 then expire = tata + 1 end
  local reset = max(expire - now, 0)
  if over then return false, rem, reset, max(reset, p), expire, now end
  return ok, rem, reset, retry, expire, now, tata, tatb, r, u, rewrite
end

local function encode(tata, tatb, r, u, D)
  return format('%d %d %d %d %d', tata, tatb, r, u, D)
end
