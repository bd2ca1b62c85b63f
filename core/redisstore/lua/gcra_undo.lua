
-- untake(r, p, u, at, now, cost, same, mark..., tat, frac, R, U) returns
-- the GCRA's state once a take of cost is given back at now (in units):
-- the theoretical arrival time moves back by what of the take's cost × p
-- / r the mark's (the state right after the take) still held at now,
-- exactly (frac carries the remainder), never before now. Without other
-- takes since, that is the state without the take; with others, a state
-- without it may have reached now meanwhile and lost time that this one
-- kept, and what is given back is a lower bound of the difference: never
-- more. nil when nothing is given back (or the state is kept under other
-- terms).
local function untake(r, p, u, _, now, cost, _, tata1, tatb1, sr1, su1, tata, tatb, sr, su)
  if sr ~= r or su ~= u or sr1 ~= r or su1 ~= u or tata1 < now then return nil end
  local x = min((tata1 - now) * r + tatb1, cost * p)
  if x <= 0 then return nil end
  local q = fdiv(x, r)
  tata = tata - q
  tatb = tatb - (x - q * r)
  if tatb < 0 then
    tata = tata - 1
    tatb = tatb + r
  end
  if tata < now then
    tata = now
    tatb = 0
  end
  return tata, tatb, r, u
end
