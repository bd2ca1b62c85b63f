
-- undo(key, A, o, m, at, now) gives back a decision of the fixed window
-- that admitted its cost, A[o + 1], at the server's time at (us), its
-- arguments laid out as decide takes them: each limit's count of the
-- window holding at goes down by the cost, never below 0 (a key gone, its
-- window ended, stays gone). It follows fixed.lua. Given back in the call
-- that took, or later with no other take between, it restores the counts
-- exactly; other takes between it and its take commute with it.
local function undo(key, A, o, m, at)
  local cost = tonumber(A[o + 1])
  local n = m / 3
  if m <= 4 then n = 1 end
  for i = 1, n do
    local p = tonumber(A[o + 2 * i + 1])
    local wk = key
    if i > 1 then wk = string.sub(key, 1, -17) .. A[o + 2 * n + i] end
    local idx = math.floor(at / p)
    if idx * p > at then idx = idx - 1 end
    wk = wk .. ':' .. string.format('%d', idx)
    local count = tonumber(redis.call('GET', wk)) or 0
    if count > 0 and cost > 0 then redis.call('DECRBY', wk, math.min(cost, count)) end
  end
end

-- mark: the counts add up, and their give-back needs no marks (see
-- stack.lua).
local mark = nil
