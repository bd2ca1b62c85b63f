
-- Sliding window: key holds "idx prev cur", the current window's index, the
-- previous window's count and the current one's.
local function load(l)
  local a, b, c = fields(redis.call('GET', l.key))
  l.sa, l.sprev, l.scur = a, b or 0, c or 0
end

local function take(l, cost)
  local p, r = l.p, l.r
  if cost > l.c then
    take(l, 0)
    l.ok = false
    l.retry = math.max(l.reset, p)
    return
  end
  local idx, now = window(l.sa, l.now, p)
  local prev, cur = math.max(l.sprev, 0), math.max(l.scur, 0)
  if l.sa == idx then
  elseif l.sa == idx - 1 then
    prev, cur = cur, 0
  else
    prev, cur = 0, 0
  end
  local w = p - (now - idx * p) -- weight of prev, out of p
  local held = cdiv(prev * w, p)
  l.ok, l.retry = false, 0
  if cur + cost + held <= r then
    cur = cur + cost
    l.ok = true
  elseif cur + cost <= r then
    l.retry = w - fdiv((r - cur - cost) * p, prev)
  else
    l.retry = w + (p - math.min(fdiv((r - cost) * p, cur), p))
  end
  l.remaining = math.max(r - cur - held, 0)
  if cur > 0 then
    l.expire = (idx + 2) * p
  elseif prev > 0 then
    l.expire = (idx + 1) * p
  else
    l.expire = now
  end
  l.reset = l.expire - now
  l.at = now
  l.next = num(idx) .. ' ' .. num(prev) .. ' ' .. num(cur)
end

local function save(l)
  redis.call('SET', l.key, l.next, 'PX', math.max(cdiv((l.expire - l.at) * l.u, 1000), 1))
end
