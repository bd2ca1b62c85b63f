
-- driver: decide(key, A, o, m, now_us) evaluates every limit of one
-- decision and writes only when all admit, and never in a dry run (a
-- negative cost, -c - 1: a peek at cost c). Its arguments are A[o + 1] .. A[o + m],
-- laid out as ARGV is for a decision alone (see the prelude); now_us is the
-- server's time in microseconds. It returns the decision's reply.
--
-- put writes a limit's next state with a TTL that outlives it. The value
-- ends with D, the deadline (server ms) the key's TTL was last set to, so
-- that while the state needs no longer, the write keeps the TTL (KEEPTTL:
-- setting an expiry costs the server more than the write). When it needs
-- longer, the TTL is set one period past the need, which the following
-- writes of the period then keep.
local function put(key, u, p, at, expire, a, b, x, y, D, now_us)
  local need = cdiv(now_us + (expire - at) * u, 1000)
  if need <= D then
    redis.call('SET', key, encode(a, b, x, y, D), 'KEEPTTL')
    return
  end
  D = need + cdiv(p * u, 1000)
  redis.call('SET', key, encode(a, b, x, y, D), 'PX', D - fdiv(now_us, 1000))
end

-- keep writes, after a request that consumed nothing, the state of an
-- existing key (D > 0) that was kept under other terms (rewrite), or
-- that its terms now keep longer than the key's TTL (a slower refill).
local function keep(key, u, p, at, expire, a, b, x, y, D, now_us, rewrite)
  if a == nil or D == 0 then return end
  if rewrite or cdiv(now_us + (expire - at) * u, 1000) > D then
    put(key, u, p, at, expire, a, b, x, y, D, now_us)
  end
end

local function decide(key, A, o, m, now_us)
  local cost = tonumber(A[o + 1])
  local dry = cost < 0
  if dry then cost = -cost - 1 end
  if m == 6 then -- one limit: the common case, without tables
    local r, p, c, u = tonumber(A[o + 3]), tonumber(A[o + 4]), tonumber(A[o + 5]), tonumber(A[o + 6])
    local now = now_us
    if u ~= 1 then now = fdiv(now_us, u) end
    local s1, s2, s3, s4, D = load(key)
    local ok, rem, reset, retry, expire, at, a, b, x, y, rw = take(r, p, c, u, now, cost, s1, s2, s3, s4, fdiv(MAXDRAIN_US, u))
    if not dry then
      if ok and cost > 0 then
        put(key, u, p, at, expire, a, b, x, y, D, now_us)
      else
        keep(key, u, p, at, expire, a, b, x, y, D, now_us, rw)
      end
    end
    return {ok and 1 or 0, rem, reset * u, retry * u}
  end

  -- Several limits: st holds, per limit, its key, terms and loaded state.
  local n = tonumber(A[o + 2])
  local st, all = {}, true
  for i = 1, n do
    local j = 3 + (i - 1) * 4
    local r, p, c, u = tonumber(A[o + j]), tonumber(A[o + j + 1]), tonumber(A[o + j + 2]), tonumber(A[o + j + 3])
    local ki = limitkey(key, i, A, o + 1 + 4 * n + i)
    local now = fdiv(now_us, u)
    local s1, s2, s3, s4, D = load(ki)
    local k = (i - 1) * 10
    st[k + 1], st[k + 2], st[k + 3], st[k + 4], st[k + 5] = ki, r, p, c, u
    st[k + 6], st[k + 7], st[k + 8], st[k + 9], st[k + 10] = s1, s2, s3, s4, D
    if not take(r, p, c, u, now, cost, s1, s2, s3, s4, fdiv(MAXDRAIN_US, u)) then all = false end
  end
  local reply = {}
  for i = 1, n do
    local k = (i - 1) * 10
    local ki, r, p, c, u = st[k + 1], st[k + 2], st[k + 3], st[k + 4], st[k + 5]
    local s1, s2, s3, s4, D = st[k + 6], st[k + 7], st[k + 8], st[k + 9], st[k + 10]
    local now = fdiv(now_us, u)
    local maxdrain = fdiv(MAXDRAIN_US, u)
    local ok, rem, reset, retry, expire, at, a, b, x, y, rw = take(r, p, c, u, now, cost, s1, s2, s3, s4, maxdrain)
    if all and cost > 0 then
      if not dry then put(ki, u, p, at, expire, a, b, x, y, D, now_us) end
    else
      if not all and ok then
        -- Denied by another limit: nothing is consumed; report this one as it stands.
        ok, rem, reset, retry, expire, at, a, b, x, y, rw = take(r, p, c, u, now, 0, s1, s2, s3, s4, maxdrain)
        retry = 0
      end
      if not dry then keep(ki, u, p, at, expire, a, b, x, y, D, now_us, rw) end
    end
    local q = (i - 1) * 4
    reply[q + 1], reply[q + 2], reply[q + 3], reply[q + 4] = ok and 1 or 0, rem, reset * u, retry * u
  end
  return reply
end
