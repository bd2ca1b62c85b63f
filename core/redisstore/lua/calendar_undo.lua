
-- undo(key, A, o, m, at, now) gives back a decision over calendar
-- periods that admitted its cost, A[o + 1], at the server's time at (us),
-- its arguments laid out as decide takes them: each limit's count of the
-- period holding at goes down by the cost, never below 0 (a key gone, its
-- period ended, stays gone). It follows calendar.lua.
local function undo(key, A, o, m, at)
  local cost = tonumber(A[o + 1])
  local n = (m - 1) / 5
  local from = periods(A, o, n, at)
  if not from then return end
  for i = 1, n do
    local wk = key
    if i > 1 then wk = wk .. '.' .. i end
    wk = wk .. ':' .. string.format('%d', math.floor(from[i] / 1000000))
    local count = tonumber(redis.call('GET', wk)) or 0
    if count > 0 and cost > 0 then redis.call('DECRBY', wk, math.min(cost, count)) end
  end
end

-- mark: the counts add up, and their give-back needs no marks (see
-- stack.lua).
local mark = nil
