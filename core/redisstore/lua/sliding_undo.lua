
-- untake(r, p, u, at, now, cost, same, mark..., idx, prev, cur) returns
-- the sliding window's state once a take of cost made at instant at (in
-- units) is given back at now: the count of the window the take went
-- into goes down by the cost, never below 0: the current window's, or
-- the previous one's once the window has moved on; nil when the take has
-- slid out (or the key holds no state). Counts add up, so other takes
-- since change nothing of it.
local function untake(_, p, _, at, now, cost, _, _, _, _, _, sidx, sprev, scur)
  if not sidx then return nil end
  local w = fdiv(at, p)
  -- A state one window past at's: the window moved on since the take, or
  -- the take went into it, the server's clock being behind it then (and
  -- still, when now is before it).
  if sidx == w or (sidx == w + 1 and now < sidx * p) then
    return sidx, sprev, max(scur - cost, 0)
  elseif sidx == w + 1 then
    return sidx, max(sprev - cost, 0), scur
  end
  return nil
end
