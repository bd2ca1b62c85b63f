
-- untake(r, p, u, at, now, cost, same, mark..., anchor, owed, U) returns
-- the token bucket's state once a take of cost is given back at now (in
-- units). A bucket is full at T = anchor + owed × p / r, and a take moves
-- T by cost × p / r. When the key holds the take's mark still (same: no
-- other write since), cost tokens fewer owed, never fewer than none: the
-- state without the take. When other takes wrote since, a bucket without
-- this take may have been full meanwhile, from Tw = T - cost × p / r of
-- the mark's state on, and lost refill that this one kept: T then moves
-- back by cost × p / r less the time from Tw to now (the anchor moves on
-- by that much), never beyond what the bucket without the take has.
-- nil when nothing is given back: the mark's T has passed (or the state
-- is kept under other terms).
local function untake(r, p, u, _, now, cost, same, anchor1, owed1, su1, _, anchor, owed, su)
  if su ~= u or owed <= 0 then return nil end
  if same then return anchor, max(owed - cost, 0), u end
  if su1 ~= u then return nil end
  local e = now - anchor1
  if e > 0 and (fdiv(e, p) * r >= owed1 or e * r >= owed1 * p) then return nil end
  local late = max(e - fdiv((owed1 - cost) * p, r), 0)
  return anchor + late, max(owed - cost, 0), u
end
