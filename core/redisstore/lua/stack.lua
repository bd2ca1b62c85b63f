
-- stack: the takes of one request under several policies (stacked
-- limits), all or nothing, on one reading of the server's clock; or the
-- give-back of such takes made earlier. build[alg]() returns an
-- algorithm's decide, undo and mark (nil for the windows, whose counts
-- need none); FIXED is the fixed window's index in build. KEYS[1] is the
-- first take's key, declared to route the call. ARGV[1] is the mode: 0
-- to take, 1 to give back; ARGV[2], taking, 1 to have each take's marks
-- in the reply, and giving back, the server's time (us) of the takes
-- given back; then per take, as in a batch, its algorithm's index in
-- build, the number m of its arguments, its key, and its m arguments
-- (ARGV of that decision alone, its cost, 0 or more, first), then k and k
-- marks (giving back, the marks of its take; taking, none). The keys of
-- different takes may lie in different hash slots of this node when the
-- script declares allow-cross-slot-keys (the store's cross-slot variant).
--
-- Taking, the takes run in order, each as it runs alone, so each sees the
-- ones before it (two takes of one counter take it twice). When all admit
-- that is the answer. From the first denial on, the takes left only
-- evaluate (a dry run); the ones that took are given back, last first (in
-- one script nothing runs between, so the state is restored exactly), and
-- every take that admitted answers its state as it stands then, as a
-- decision of cost 0 does. A take that fails (an error reply, a key this
-- node does not serve) gives back the ones before it and ends the call.
-- Giving back, each take's undo gives back its cost, taken at ARGV[2] and
-- leaving its marks, and the take answers its state as it stands then.
--
-- Reply: {now (us), 1 when every take admitted, else 0, then per take its
-- reply, the cost that reply answers (its own, or 0 for a state as it
-- stands) and its marks (when asked for and all admitted, else none)};
-- for a take that failed, {now, -1, the error's text}.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local alg, key, off, m, mk, n, o = {}, {}, {}, {}, {}, 0, 2
while o < #ARGV do
  n = n + 1
  alg[n], m[n], key[n], off[n] = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), ARGV[o + 3], o + 3
  o = o + 4 + m[n]
  local k = tonumber(ARGV[o])
  if k > 0 then
    mk[n] = {}
    for j = 1, k do mk[n][j] = ARGV[o + j] end
  end
  o = o + k
end
local fns = {}
local function fn(a)
  local f = fns[a]
  if not f then
    local d, u, k = build[a]()
    f = {d, u, k}
    fns[a] = f
  end
  return f
end
local function cost(i) return tonumber(ARGV[off[i] + 1]) end
-- with returns take i's arguments with cost c in place of its own.
local function with(i, c)
  local A = {c}
  for j = 2, m[i] do A[j] = ARGV[off[i] + j] end
  return A
end
-- admitted reports whether reply v admits take i; nil for a calendar
-- reply that decides nothing (the server's time outside the periods).
local function admitted(i, v)
  if #v == 2 then
    if alg[i] ~= FIXED then return nil end
    local c, r = cost(i), tonumber(ARGV[off[i] + 2])
    return c == 0 or (c <= r and v[1] <= r)
  end
  for j = 1, #v, 4 do
    if v[j] ~= 1 then return false end
  end
  return true
end
-- stands answers take i's state as it stands: a decision of cost 0.
local function stands(out, i)
  out[3 * i] = fn(alg[i])[1](key[i], with(i, 0), 0, m[i], now_us)
  out[3 * i + 1], out[3 * i + 2] = 0, {}
end

local out = {now_us, 1}
if ARGV[1] == '1' then
  local at = tonumber(ARGV[2])
  for i = 1, n do
    fn(alg[i])[2](key[i], ARGV, off[i], m[i], at, now_us, mk[i] or {})
    stands(out, i)
  end
  return out
end

local took, ok, all = {}, {}, true
local function giveback(upto)
  for j = upto, 1, -1 do
    if took[j] then fn(alg[j])[2](key[j], ARGV, off[j], m[j], now_us, now_us) end
  end
end
for i = 1, n do
  local fine, v
  if all then
    fine, v = pcall(fn(alg[i])[1], key[i], ARGV, off[i], m[i], now_us)
  else
    fine, v = pcall(fn(alg[i])[1], key[i], with(i, -cost(i) - 1), 0, m[i], now_us)
  end
  if fine and type(v) == 'table' and v.err then fine, v = false, v.err end
  if not fine then
    giveback(i - 1)
    if type(v) == 'table' then v = v.err end
    return {now_us, -1, tostring(v)}
  end
  local a = admitted(i, v)
  ok[i] = a
  if a and all then took[i] = true end
  if not a then all = false end
  out[3 * i], out[3 * i + 1], out[3 * i + 2] = v, cost(i), {}
end
if not all then
  out[2] = 0
  giveback(n)
  for i = 1, n do
    if ok[i] then stands(out, i) end
  end
elseif ARGV[2] == '1' then
  for i = 1, n do
    local k = fn(alg[i])[3]
    if k then out[3 * i + 2] = k(key[i], ARGV, off[i]) end
  end
end
return out
