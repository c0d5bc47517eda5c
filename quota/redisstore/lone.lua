--[[
lone.lua decides one request whose stack holds only GCRA limits (with or
without a lead, never learning) and calendar windows (without classes or
pacing), with the same arguments and the same reply as reserve.lua for a
call of that one request, and the same decision and writes: issue 22's
lean path for a decision that goes alone (no call of its tag in flight),
which is most decisions of a process that is not busy. reserve.lua makes
a table per item, the call's view of the keys and its batch machinery for
every call; this script reads each key once, writes it once, and keeps
what it must remember in the reply it returns: no table but the reply,
the pauses' MGET, and per window item its starts and counts.

The decision is package quota's, as reserve.lua's rounds make it (its
slotTime): each GCRA limit's earliest time (tat + cost*T - DVT, tat
drained by a pause) is a constant; a window moves t to the start of its
next window while the window holding t has no room, up to its horizon
(the window of now and the two after it, capped at B4); the rounds run
until no item moves t, at most 16, the decider the last item that moved
it. A window's first charge (its count was 0) drops the windows that have
ended and sets the key's expiry (windows.lua's cleanWindows, as in
reserve.lua).
TestLoneAgreesWithReserve holds the two scripts to the same replies and
writes, and the conformance and differential suites run through it (the
store sends a lone stack of these kinds here).

KEYS  its n item keys, then its np pause keys
ARGV  1 now (µs) or "" for TIME; 2 TTL slack (ms); 3 m (always 1); then
      reserve.lua's entries of one request: its count of ARGV entries,
      max wait (µs), n, np, nl (always 0), then per item
        "g", cost, T (µs), DVT (µs)             a GCRA limit, or
        "a", cost, T, DVT, lead (µs)            one charged with a lead, or
        "w", cost, rate, B0, B1, B2, B3, B4     a calendar window
Reply an array of one reply, reserve.lua's: allowed, now, t, decider,
      then per item remaining, reset after, mark, prev; or an array of
      one error (a key holding another type, or the server's now outside
      a window's B0 .. B4).
]]

-- now, slack, ttl and drain come from prelude.lua; windowStarts, slot and
-- cleanWindows from windows.lua.

local maxwait, n, np = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

-- window reads window item i's key k, whose arguments start at ARGV[a]
-- ("w"): its starts b (0-based), the window j holding now, its horizon hz
-- (windowStarts, windows.lua) and the counts of windows j .. hz - 1,
-- in the fields windows.lua's slot reads.
local function window(k, a)
  local b, j, hz = windowStarts(a)
  if b == nil then error(j) end
  local v = redis.call('HMGET', k, unpack(ARGV, a + 3 + j, a + 2 + hz))
  local c = {}
  for w = j, hz - 1 do c[w] = tonumber(v[w - j + 1]) or 0 end
  return {bs = b, j = j, hz = hz, cnt = c, at = a + 3, cost = tonumber(ARGV[a + 1]), rate = tonumber(ARGV[a + 2])}
end

-- decide fills reply. The first pass reads each key: a GCRA item's stored
-- tat goes to the reply's prev slot and its earliest time to its
-- remaining slot meanwhile; a window item's figures to wins[i]. The rounds
-- find t and the decider; the second pass charges and writes the figures.
-- An item's arguments start at ARGV[a], every item's at 9 + 4 per GCRA
-- item before it, + 1 per lead, + 8 per window.
local function decide(reply)
  local paused = 0
  if np > 0 then
    local v = redis.call('MGET', unpack(KEYS, n + 1, n + np))
    for p = 1, np do
      local u = tonumber(v[p])
      if u and u > paused then paused = u end
    end
  end
  local wins
  local a = 9
  for i = 1, n do
    if ARGV[a] == 'w' then
      if wins == nil then wins = {} end
      wins[i] = window(KEYS[i], a)
      a = a + 8
    else
      local stored = tonumber(redis.call('GET', KEYS[i])) or 0
      local cost, T, dvt = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
      local tat = math.max(stored, now)
      if ARGV[a] == 'a' then
        tat = math.max(stored, now + tonumber(ARGV[a + 4]))
        a = a + 1
      end
      if paused > 0 then tat = math.max(tat, paused + math.min(dvt, drain) - cost * T) end
      reply[1 + 4 * i], reply[4 + 4 * i] = tat + cost * T - dvt, stored
      a = a + 4
    end
  end
  local t, decider = now, -1
  if paused > t then t, decider = paused, -2 end
  local ok = false
  if wins == nil then -- GCRA limits alone: their times are constants, one round
    for i = 1, n do
      local e = reply[1 + 4 * i]
      if e > t then t, decider = e, i - 1 end
    end
    ok = true
  else
    for _ = 1, 16 do
      local moved, beyond = false, false
      for i = 1, n do
        local x, e = wins[i], t
        if x == nil then
          e = reply[1 + 4 * i]
        else
          local k = slot(x, t)
          if k == nil then
            beyond = true
          elseif x.cnt[k] + x.cost > x.rate then
            e = x.bs[k + 1]
            beyond = e >= x.bs[x.hz]
          end
        end
        if e > t then t, decider, moved = e, i - 1, true end
        if beyond then break end
      end
      if beyond then break end
      if not moved then ok = true break end
    end
  end
  local allowed = ok and t - now <= maxwait
  reply[1], reply[2], reply[3], reply[4] = allowed and 1 or 0, now, t, decider
  a = 9
  for i = 1, n do
    local r = 4 * i
    local rem, reset, mark, prev = 0, 0, 0, 0
    local x = wins and wins[i]
    if x then
      local b, k = x.bs, x.j
      if allowed then
        k = slot(x, t)
        redis.call('HINCRBY', KEYS[i], ARGV[x.at + k], x.cost)
        mark = b[k]
        if x.cnt[k] == 0 then cleanWindows(KEYS[i], b, x.j, x.at, b[k + 1]) end
        x.cnt[k] = x.cnt[k] + x.cost
      end
      rem, reset = x.rate - x.cnt[k], b[k + 1] - now
      a = a + 8
    else
      local stored = reply[r + 4]
      local cost, T, dvt = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
      local tat = math.max(stored, now)
      if ARGV[a] == 'a' then
        tat = math.max(stored, now + tonumber(ARGV[a + 4]))
        a = a + 1
      end
      if paused > 0 then tat = math.max(tat, paused + math.min(dvt, drain) - cost * T) end
      a = a + 4
      if allowed then
        local set = math.max(tat, t) + cost * T
        redis.call('SET', KEYS[i], set, 'PX', ttl(set - now))
        rem, reset, mark, prev = math.floor((dvt - (set - t)) / T), set - now, set, stored
      else
        rem, reset = math.floor((dvt - (tat - now)) / T), tat - now
      end
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
