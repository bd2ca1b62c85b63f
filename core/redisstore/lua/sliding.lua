
-- window returns the index of the window holding now and the instant to
-- count from: a clock that went back into the stored window's successor is
-- clamped to its start, as package algo does.
local function window(stored, now, p)
  if stored and stored >= 0 then
    local at = stored * p
    if now >= at and now - at < p then return stored, now end
  end
  local idx = fdiv(now, p)
  if stored == idx + 1 then return stored, stored * p end
  return idx, now
end

-- Sliding window: key holds "idx prev cur D": the current window's index,
-- the previous window's count, the current one's, and the TTL's deadline.
-- None of them depends on the count or U: counts kept under a larger
-- count exceed r, and deny until they have slid out.
local function decode(v)
  if not v then return nil, 0, 0, nil, 0 end
  local a, b, c, d = match(v, '^(%-?%d+) (%-?%d+) (%-?%d+) (%d+)$')
  if not a then return nil, 0, 0, nil, 0 end
  return tonumber(a), tonumber(b), tonumber(c), nil, tonumber(d)
end

local function load(key) return decode(redis.call('GET', key)) end

local function take(r, p, c, _, now, cost, sidx, sprev, scur)
  local over = cost > c
  if over then cost = 0 end
  local idx, at = window(sidx, now, p)
  local prev, cur = max(sprev, 0), max(scur, 0)
  if sidx == idx then
  elseif sidx == idx - 1 then
    prev, cur = cur, 0
  else
    prev, cur = 0, 0
  end
  local w = p - (at - idx * p) -- weight of prev, out of p
  -- prev kept under a larger count may make prev*w inexact; it then
  -- holds more than r (2^52/p > 3r), and so does r + 1.
  local held = r + 1
  if prev * w < 4503599627370496 then held = cdiv(prev * w, p) end
  local ok, retry = false, 0
  if cur + cost + held <= r then
    cur = cur + cost
    ok = true
  elseif cur + cost <= r then
    retry = w - fdiv((r - cur - cost) * p, prev)
  else
    retry = w + (p - min(fdiv((r - cost) * p, cur), p))
  end
  local expire = at
  if cur > 0 then
    expire = (idx + 2) * p
  elseif prev > 0 then
    expire = (idx + 1) * p
  end
  local rem, reset = max(r - cur - held, 0), expire - at
  if over then return false, rem, reset, max(reset, p), expire, at end
  if cost == 0 then ok, retry = true, 0 end -- counts above a smaller count: nothing to consume
  return ok, rem, reset, retry, expire, at, idx, prev, cur, nil, false
end

local function encode(idx, prev, cur, _, D)
  return format('%d %d %d %d', idx, prev, cur, D)
end
