-- rlkit: the prelude of every decision script and of the reset scripts
-- but the fixed window's; the algorithm's file and driver.lua, which
-- defines decide (then single.lua, for a decision alone, or batch.lua), or
-- reset_driver.lua (a reset) follow it. Lua numbers are doubles: every value here is an
-- integer below 2^53, which the Go side guarantees by choosing, per limit, a
-- time unit U (microseconds per unit) that keeps all products in range.
--
-- A decision alone (single.lua) takes, as decide takes in A[o + 1] onwards:
-- KEYS[1]  the key of the policy's first limit; limit i > 1 uses KEYS[1]..'.'..i
-- ARGV[1]  cost (an integer); a negative one, -c, is a dry run (a peek): the
--          driver evaluates cost c and writes nothing
-- ARGV[2]  n, the number of limits (1 to 4)
-- then per limit: count, period (in units), capacity, U
--
-- Reply: per limit, admitted (0/1), remaining, reset-after (us), retry-after (us).
--
-- Each algorithm defines
--   load(key) -> s1, s2, s3, D        the stored state and its TTL's deadline
--   take(r, p, c, now, cost, s1, s2, s3, maxdrain)
--       -> ok, remaining, reset, retry, expire, at, a, b, x
--      (at: the instant the durations count from; a, b, x: the next state)
--   encode(a, b, x, D) -> the value to store
-- and never writes; the drivers do.

-- The scripts read TIME and then write, and keep TTLs with SET KEEPTTL:
-- they need Redis 6.0 or newer.

local tonumber, floor, max, min = tonumber, math.floor, math.max, math.min
local format, match = string.format, string.match

-- fdiv is floor(a/b) for integers a, b (b > 0). The quotient of two doubles
-- may round up to the next integer; one correction makes it exact.
local function fdiv(a, b)
  local q = floor(a / b)
  if q * b > a then q = q - 1 end
  return q
end

-- cdiv is ceil(a/b).
local function cdiv(a, b)
  local q = fdiv(a, b)
  if q * b < a then q = q + 1 end
  return q
end

-- MaxDrain (2^60 ns, the bound package algo puts on a state) in microseconds.
local MAXDRAIN_US = 1152921504606846
