-- rlkit: shared prelude of every decision script (the algorithm's file and
-- driver.lua follow it). Lua numbers are doubles: every value here is an
-- integer below 2^53, which the Go side guarantees by choosing, per limit, a
-- time unit U (microseconds per unit) that keeps all products in range.
--
-- KEYS[1]  the policy's key for its first limit; limit i > 1 uses KEYS[1]..'.'..i
-- ARGV[1]  cost (an integer >= 0)
-- ARGV[2]  n, the number of limits (1 to 4)
-- then per limit: count, period (in units), capacity, U
--
-- Reply: per limit, {admitted 0/1, remaining, reset-after us, retry-after us}.

if redis.replicate_commands then pcall(redis.replicate_commands) end

-- fdiv is floor(a/b) for integers a, b (b > 0). The quotient of two doubles
-- may round up to the next integer; one correction makes it exact.
local function fdiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 end
  return q
end

-- cdiv is ceil(a/b).
local function cdiv(a, b)
  local q = fdiv(a, b)
  if q * b < a then q = q + 1 end
  return q
end

-- num formats an integer exactly (tostring would print 1.7e+15).
local function num(x)
  return string.format('%.0f', x)
end

-- MaxDrain (2^60 ns) in microseconds, as the Go algorithms bound a state.
local MAXDRAIN_US = 1152921504606846

-- window returns the index of the window holding now and the instant to
-- count from: a clock that went back into the previous window is clamped to
-- the stored window's start (as package algo does).
local function window(stored, now, p)
  if stored ~= nil and stored >= 0 then
    local at = stored * p
    if now >= at and now - at < p then return stored, now end
  end
  local idx = fdiv(now, p)
  if stored == idx + 1 then return stored, stored * p end
  return idx, now
end

-- pair parses a stored "A B" (or "A B C") value.
local function fields(v)
  if not v then return nil end
  local a, b, c = string.match(v, '^(%-?%d+) (%-?%d+) ?(%-?%d*)$')
  if not a then return nil end
  return tonumber(a), tonumber(b), tonumber(c)
end
