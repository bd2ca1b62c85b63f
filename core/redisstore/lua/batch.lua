
-- batch: several decisions in one call, on one reading of the server's
-- clock, one after the other, each all or nothing as it is alone. KEYS[1]
-- is the first decision's key, declared to route the call; ARGV holds, per
-- decision in turn, its algorithm's index in build, the number m of its
-- arguments, its key, then its m arguments (ARGV of that decision alone).
-- The keys of different decisions may lie in different hash slots of this
-- node (the shebang's allow-cross-slot-keys, Redis 7.0 or newer); those of
-- one decision share a slot. Reply: per decision, its reply alone, or the
-- error it met (a key this node does not serve, while slots move), as an
-- error reply in its place: the others are not affected.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local decide_by, out, o, i = {}, {}, 0, 0
while o < #ARGV do
  local alg, m = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
  local decide = decide_by[alg]
  if not decide then
    decide = build[alg]()
    decide_by[alg] = decide
  end
  i = i + 1
  local ok, reply = pcall(decide, ARGV[o + 3], ARGV, o + 3, m, now_us)
  if not ok then
    if type(reply) == 'table' then reply = reply.err end
    reply = {err = tostring(reply)}
  end
  out[i] = reply
  o = o + 3 + m
end
return out
