
-- batch: several decisions in one call, on one reading of the server's
-- clock, one after the other, each all or nothing as it is alone. KEYS[i]
-- is decision i's key; ARGV holds, per decision in turn, its algorithm's
-- index in build, the number m of its arguments, then its m arguments
-- (ARGV of that decision alone). The keys of different decisions may lie in
-- different hash slots of this node (the shebang's allow-cross-slot-keys,
-- Redis 7.0 or newer); those of one decision share a slot. Reply: per
-- decision, its reply alone.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local decide_by, out, o = {}, {}, 0
for i = 1, #KEYS do
  local alg, m = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
  local decide = decide_by[alg]
  if not decide then
    decide = build[alg]()
    decide_by[alg] = decide
  end
  out[i] = decide(KEYS[i], ARGV, o + 2, m, now_us)
  o = o + 2 + m
end
return out
