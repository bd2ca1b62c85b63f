
-- untake(r, p, u, at, now, cost, same, mark..., anchor, owed, U) returns
-- the token bucket's state once a take of cost is given back at now (in
-- units): when the key holds the take's mark still (same), cost tokens
-- fewer owed, never fewer than none: the refill, counted from the anchor,
-- is the same, so the state is the one without the take. When other takes
-- wrote since, a bucket without this take may have filled up meanwhile
-- and lost refill that this one kept: only the tokens the mark's state
-- still owes for the take at now are given back (a lower bound of what
-- the bucket without it would have: never more). nil when nothing is
-- given back (or the state is kept under other terms).
local function untake(r, p, u, _, now, cost, same, anchor1, owed1, su1, _, anchor, owed, su)
  if su ~= u or owed <= 0 then return nil end
  local g = cost
  if not same then
    if su1 ~= u then return nil end
    local e, refill = now - anchor1, 0
    if e > 0 then
      local k = fdiv(e, p)
      if k * r >= owed1 then return nil end
      refill = k * r + cdiv(r * (e - k * p), p)
    end
    g = min(cost, owed1 - refill)
    if g <= 0 then return nil end
  end
  return anchor, max(owed - g, 0), u
end
