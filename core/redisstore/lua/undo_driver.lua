
-- undo driver: mark(key, A, o) returns the values of a decision's keys,
-- one per limit ('' for none), its arguments being A[o + 1] onwards as
-- decide takes them; undo(key, A, o, m, at_us, now_us, marks) gives back
-- that decision, which admitted its cost, A[o + 1], at the server's time
-- at_us, its keys holding marks right after it (nil: they hold what they
-- held then, as in the call that took); now_us is the server's time.
-- Each limit's state becomes what the algorithm's untake makes of it,
-- written with the TTL the key has (a key gone stays gone). It follows
-- the prelude, the algorithm's file, driver.lua and the algorithm's
-- untake, which is told whether the key holds its mark still (no other
-- write since the take), the mark's state and the key's.
local function mark(key, A, o)
  local n = tonumber(A[o + 2])
  local out = {}
  for i = 1, n do
    out[i] = redis.call('GET', limitkey(key, i, A, o + 1 + 4 * n + i)) or ''
  end
  return out
end

local function undo(key, A, o, _, at_us, now_us, marks)
  local cost = tonumber(A[o + 1])
  local n = tonumber(A[o + 2])
  if cost <= 0 then return end
  for i = 1, n do
    local j = o + 3 + (i - 1) * 4
    local r, p, u = tonumber(A[j]), tonumber(A[j + 1]), tonumber(A[j + 3])
    local ki = limitkey(key, i, A, o + 1 + 4 * n + i)
    local v = redis.call('GET', ki)
    local s1, s2, s3, s4, D = decode(v)
    if D > 0 then
      local mk = v
      if marks then mk = marks[i] end
      local m1, m2, m3, m4 = decode(mk)
      local a, b, x, y = untake(r, p, u, fdiv(at_us, u), fdiv(now_us, u), cost, mk == v, m1, m2, m3, m4, s1, s2, s3, s4)
      if a then redis.call('SET', ki, encode(a, b, x, y, D), 'KEEPTTL') end
    end
  end
end
