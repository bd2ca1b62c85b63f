
-- charge driver: charge a cost known after the response to one key under
-- one policy (sliding window, token bucket, GCRA), into debt if need be,
-- then answer as a peek of cost 1 would (decide, in a dry run). It
-- follows the prelude, the algorithm's file and driver.lua (put, decide).
-- KEYS[1] as for a decision; ARGV[1] the cost (0 or more), ARGV[2] n, the
-- number of limits, then per limit: count, period (in units), capacity
-- and U, as a decision takes them, and the count and capacity widened by
-- the debt's bound (package algo's DebtLimit), under which a take of
-- cost 0 leaves as remaining the most the charge may take; then, for
-- limits 2 to n, the 16 hex digits of its counter identity (limitkey).
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local A = {'-2', n} -- a dry run of cost 1 (see the prelude)
for i = 1, n do
  local j = 3 + (i - 1) * 6
  local r, p, c, u = tonumber(ARGV[j]), tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
  local wr, wc = tonumber(ARGV[j + 4]), tonumber(ARGV[j + 5])
  local key = limitkey(KEYS[1], i, ARGV, 1 + 6 * n + i)
  local now = fdiv(now_us, u)
  local maxdrain = fdiv(MAXDRAIN_US, u)
  local s1, s2, s3, s4, D = load(key)
  local _, room = take(wr, p, wc, u, now, 0, s1, s2, s3, s4, maxdrain)
  local k = min(cost, room)
  if k > 0 then
    local _, _, _, _, expire, at, a, b, x, y = take(wr, p, wc, u, now, k, s1, s2, s3, s4, maxdrain)
    put(key, u, p, at, expire, a, b, x, y, D, now_us)
  end
  A[#A + 1], A[#A + 2], A[#A + 3], A[#A + 4] = r, p, c, u
end
for i = 2, n do A[#A + 1] = ARGV[1 + 6 * n + i] end
return decide(KEYS[1], A, 0, #A, now_us)
