--[[
lone.lua decides one request whose stack holds only GCRA limits (with or
without a lead, never learning), with the same arguments and the same
reply as reserve.lua for a call of that one request, and the same
decision: issue 22's lean path for a decision that goes alone (no call
of its tag in flight), which is most decisions of a process that is not
busy. reserve.lua makes a table per item, the call's view of the keys and
its batch machinery for every call, about 25 µs of Redis time for a lone
1-GCRA decision against 12 µs for the least a GCRA decision can do
(bench/redisrate's floor/min-gcra); this script reads each key once,
writes it once, and keeps what it must remember in the reply it returns:
no table but the reply and the pauses' MGET.

The decision is package quota's for GCRA limits: with every limit a
GCRA, each earliest time (tat + cost*T - DVT, tat drained by a pause) is
a constant, so the fixpoint is their maximum with now and the pause's
end, reached in one pass (the decider is the first limit in stack order
that moved t, as in reserve.lua's rounds). TestLoneAgreesWithReserve
holds the two scripts to the same replies and writes, and the
conformance and differential suites run through it (the store sends a
lone GCRA stack here).

KEYS  its n item keys, then its np pause keys
ARGV  1 now (µs) or "" for TIME; 2 TTL slack (ms); 3 m (always 1); then
      reserve.lua's entries of one request: its count of ARGV entries,
      max wait (µs), n, np, nl (always 0), then per item
        "g", cost, T (µs), DVT (µs)             a GCRA limit, or
        "a", cost, T, DVT, lead (µs)            one charged with a lead
Reply an array of one reply, reserve.lua's: allowed, now, t, decider,
      then per item remaining, reset after, mark, prev; or an array of
      one error (a key holding another type).
]]

-- now, slack, ttl and drain come from prelude.lua.

local maxwait, n, np = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

-- decide fills reply: the first pass reads each key (its stored tat kept
-- in the reply's prev slot meanwhile) and finds t and the decider; the
-- second charges and writes the figures. An item's arguments start at
-- ARGV[a], every item's at 9 + 4 per item before it, + 1 per lead.
local function decide(reply)
  local paused = 0
  if np > 0 then
    local v = redis.call('MGET', unpack(KEYS, n + 1, n + np))
    for p = 1, np do
      local u = tonumber(v[p])
      if u and u > paused then paused = u end
    end
  end
  local t, decider = now, -1
  if paused > t then t, decider = paused, -2 end
  local a = 9
  for i = 1, n do
    local stored = tonumber(redis.call('GET', KEYS[i])) or 0
    local cost, T, dvt = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local tat = math.max(stored, now)
    if ARGV[a] == 'a' then
      tat = math.max(stored, now + tonumber(ARGV[a + 4]))
      a = a + 1
    end
    if paused > 0 then tat = math.max(tat, paused + math.min(dvt, drain) - cost * T) end
    local e = tat + cost * T - dvt
    if e > t then t, decider = e, i - 1 end
    reply[4 + 4 * i] = stored
    a = a + 4
  end
  local allowed = t - now <= maxwait
  reply[1], reply[2], reply[3], reply[4] = allowed and 1 or 0, now, t, decider
  a = 9
  for i = 1, n do
    local r = 4 * i
    local stored = reply[r + 4]
    local cost, T, dvt = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local tat = math.max(stored, now)
    if ARGV[a] == 'a' then
      tat = math.max(stored, now + tonumber(ARGV[a + 4]))
      a = a + 1
    end
    if paused > 0 then tat = math.max(tat, paused + math.min(dvt, drain) - cost * T) end
    a = a + 4
    local rem, reset, mark, prev
    if allowed then
      local set = math.max(tat, t) + cost * T
      redis.call('SET', KEYS[i], set, 'PX', ttl(set - now))
      rem, reset, mark, prev = math.floor((dvt - (set - t)) / T), set - now, set, stored
    else
      rem, reset, mark, prev = math.floor((dvt - (tat - now)) / T), tat - now, 0, 0
    end
    if rem < 0 then rem = 0 end
    if reset < 0 then reset = 0 end
    reply[r + 1], reply[r + 2], reply[r + 3], reply[r + 4] = rem, reset, mark, prev
  end
end

local reply = {}
local ok, err = pcall(decide, reply)
if not ok then
  if type(err) ~= 'table' then err = redis.error_reply(tostring(err)) end
  return {err}
end
return {reply}
