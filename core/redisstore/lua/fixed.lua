
-- Fixed window: the counter of window idx lives at key..':'..idx.
local function load(l)
  l.idx = fdiv(l.now, l.p)
  l.wkey = l.key .. ':' .. num(l.idx)
  l.count = tonumber(redis.call('GET', l.wkey) or '0') or 0
  if l.count < 0 then l.count = 0 end
end

local function take(l, cost)
  local finish = (l.idx + 1) * l.p
  l.reset = finish - l.now
  l.retry = 0
  if cost > l.c then
    l.ok = false
    l.remaining = math.max(l.r - l.count, 0)
    l.retry = math.max(l.reset, l.p)
    return
  end
  if l.count + cost <= l.r then
    l.ok = true
    l.next = l.count + cost
    l.remaining = l.r - l.next
  else
    l.ok = false
    l.remaining = math.max(l.r - l.count, 0)
    l.retry = l.reset
  end
  l.expire = finish
end

local function save(l)
  redis.call('SET', l.wkey, num(l.next), 'PX', math.max(cdiv((l.expire - l.now) * l.u, 1000), 1))
end
