-- rlkit: the prelude of every decision script and of the reset scripts
-- but the fixed window's; the algorithm's file and driver.lua, which
-- defines decide (then single.lua, for a decision alone, or batch.lua), or
-- reset_driver.lua (a reset) follow it. Lua numbers are doubles: every value here is an
-- integer below 2^53, which the Go side guarantees by choosing, per limit, a
-- time unit U (microseconds per unit) that keeps all products in range.
--
-- A decision alone (single.lua) takes, as decide takes in A[o + 1] onwards:
-- KEYS[1]  the key of the policy's first limit: it ends with 16 hex digits,
--          the limit's counter identity; limit i > 1 swaps in its own
-- ARGV[1]  cost (an integer); a negative one, -c - 1, is a dry run (a
--          peek): the driver evaluates cost c and writes nothing. A take
--          of cost 0 (0) may write (keep, in driver.lua); a dry run of
--          cost 0 (-1) never does
-- ARGV[2]  n, the number of limits (1 to 4)
-- then per limit: count, period (in units), capacity, U
-- then, for limits 2 to n, the 16 hex digits of its counter identity
--
-- Reply: per limit, admitted (0/1), remaining, reset-after (us), retry-after (us).
--
-- Each algorithm defines
--   decode(value) -> s1, s2, s3, s4, D    a stored state and its TTL's deadline
--   load(key) -> decode(the key's value)
--   take(r, p, c, u, now, cost, s1, s2, s3, s4, maxdrain)
--       -> ok, remaining, reset, retry, expire, at, a, b, x, y, rewrite
--      (at: the instant the durations count from; a, b, x, y: the state
--      after the request, consumed from when admitted; rewrite: that state
--      must be written even though nothing was consumed, as it was kept
--      under other terms of the counter: another count, capacity or U)
--   encode(a, b, x, y, D) -> the value to store
-- and never writes; the drivers do. A state is read under the terms the
-- counter has now, whatever terms it was written under: what was spent
-- carries over, as package algo says.

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

-- limitkey is the key of limit i of a decision whose first limit's key is
-- key: the same but for the last 16 characters, the counter's identity,
-- which limit i's (A[j]) replace.
local function limitkey(key, i, A, j)
  if i == 1 then return key end
  return string.sub(key, 1, -17) .. A[j]
end

-- MaxDrain (2^60 ns, the bound package algo puts on a state) in microseconds.
local MAXDRAIN_US = 1152921504606846
