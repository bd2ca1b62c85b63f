-- worksclient: pace the starts of one key across processes, on the server's
-- clock (TIME). All times are Unix microseconds, exact in a Lua double.
--
-- KEYS[1]: the key's hash: n = the next start that may be reserved,
--          l = the latest actual start, h = no start before this (hold).
-- ARGV[1]: the operation:
--   'r' reserve: the earliest start s = max(now, n, h, l+interval) is
--       taken. When s is now the request starts: {0, now}. Otherwise
--       {1, s-now, s}: sleep s-now, then confirm with token s.
--   'c' confirm after sleeping, ARGV[3] = the token: the request starts
--       when now >= max(h, l+interval): {0, now}. When a hold (Retry-After)
--       came after the reservation, the reservation is given back and a
--       new one taken: {1, s-now, s}. When only the previous start was
--       late, the reservation is kept: {1, l+interval-now, token}.
--   'g' give back the reservation ARGV[3] of a request that will not
--       start: only when it is the latest one (n = token+interval), so no
--       later reservation moves. {2, 1} when given back, else {2, 0}.
--   'd' delay: h = max(h, now+ARGV[3]). {3, 0}.
-- ARGV[2]: the interval.
--
-- The hash expires when its state is back to that of a key never seen.
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local op = ARGV[1]
local iv = tonumber(ARGV[2])
local v = redis.call('HMGET', KEYS[1], 'n', 'l', 'h')
local n = tonumber(v[1] or 0) or 0
local l = tonumber(v[2] or 0) or 0
local h = tonumber(v[3] or 0) or 0
local reply

local function reserve()
  local s = math.max(now, n, h, l + iv)
  if s <= now then
    l = now
    n = math.max(n, now + iv)
    return {0, now}
  end
  n = s + iv
  return {1, s - now, s}
end

local function giveback(token)
  if n == token + iv then
    n = token
    return 1
  end
  return 0
end

if op == 'r' then
  reply = reserve()
elseif op == 'c' then
  local token = tonumber(ARGV[3])
  local at = math.max(h, l + iv)
  if at <= now then
    l = now
    n = math.max(n, now + iv)
    reply = {0, now}
  elseif h > now and h > token then
    giveback(token)
    reply = reserve()
  else
    reply = {1, at - now, token}
  end
elseif op == 'g' then
  reply = {2, giveback(tonumber(ARGV[3]))}
elseif op == 'd' then
  h = math.max(h, now + tonumber(ARGV[3]))
  reply = {3, 0}
else
  return redis.error_reply('worksclient: unknown operation ' .. tostring(op))
end

local keep = math.max(n, l + iv, h) - now
if keep <= 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'n', string.format('%.0f', n), 'l', string.format('%.0f', l), 'h', string.format('%.0f', h))
  redis.call('PEXPIRE', KEYS[1], math.ceil(keep / 1000) + 1)
end
return reply
