--[[
lone.lua decides requests whose stacks hold only GCRA limits (with or
without a lead, never learning) and calendar windows (without classes or
pacing), with the same arguments and the same replies as reserve.lua for
a call of those requests, and the same decisions and writes: issue 22's
lean path, for a decision that goes alone (no call of its tag in flight)
and for a coalesced batch of such decisions. reserve.lua makes a table
per item, the call's batch machinery and its upper-case kinds' dispatch
for every call; this script keeps per request only its reply and, per
window item, its starts and counts, and per call its view of the keys.

The decision is package quota's, as reserve.lua's rounds make it (its
slotTime): each GCRA limit's earliest time (tat + cost*T - DVT, tat
drained by a pause) is a constant; a window moves t to the start of its
next window while the window holding t has no room, up to its horizon
(the window of now and the two after it, capped at B4); the rounds run
until no item moves t, at most 16, the decider the last item that moved
it. A window's first charge (its count was 0) drops the windows that have
ended and sets the key's expiry (windows.lua's cleanWindows, as in
reserve.lua).

Requests. The m requests of a call are decided one after the other, in
their order, each all or nothing on its own, at one now, each on the
state the ones before it left, through the call's view of the keys as
reserve.lua's "Requests" describes it: a key is read once (GET; HMGET of
the fields not read yet; a pause key by the MGET of the first request
that names it) and written once, at the end (flush). A request that meets
a key an earlier one charged as a limit of the other kind fails alone,
with reserve.lua's WRONGTYPE error, before it charges anything; so does
one that reads a key of another type.

TestLoneAgreesWithReserve (one request a call) and
TestLoneBatchAgreesWithReserve (batches of 2 to 8 sharing keys) hold the
two scripts to the same replies and writes, and the conformance and
differential suites run through it (the store sends a lone stack of these
kinds here, alone or coalesced).

KEYS  per request: its n item keys, then its np pause keys
ARGV  1 now (µs) or "" for TIME; 2 TTL slack (ms); 3 m; then per request
      reserve.lua's entries: its count of ARGV entries, max wait (µs), n,
      np, nx (always 0), then per item
        "g", cost, T (µs), DVT (µs)             a GCRA limit, or
        "a", cost, T, DVT, lead (µs)            one charged with a lead, or
        "w", cost, rate, B0, B1, B2, B3, B4     a calendar window
Reply per request reserve.lua's: allowed, now, t, decider, then per item
      remaining, reset after, mark, prev; or an error (a key holding
      another type or charged as the other kind in the call, or the
      server's now outside a window's B0 .. B4).
]]

-- now, slack, ttl and drain come from prelude.lua; windowStarts and
-- cleanWindows from windows.lua.

local m = tonumber(ARGV[3])

-- The call's view. GCRA: gv (key -> stored tat as the requests so far
-- left it, 0 when missing) and gw (the keys to write). Windows, made by
-- the first window item: wv (key -> field -> count as the requests so far
-- left it), winc (key -> field -> increment to write), worder (the keys
-- to write, in order) and wclean (key -> the first charge of a window:
-- its starts, j, the ARGV index of B0 and the end of the latest window
-- charged). Pauses, made by the first request with one: pv (key -> its
-- paused-until, 0 when none).
local gv, gw = {}, {}
local wv, winc, worder, wclean, pv

local function wrongType(k)
  error(redis.error_reply('WRONGTYPE throttle: ' .. k .. ' was charged as a limit of another kind in this call'))
end

-- window reads window item key k, whose arguments start at ARGV[a] ("w"),
-- through the view: its starts b (0-based), the window j holding now, its
-- horizon hz (windowStarts, windows.lua), the counts of windows j .. hz -
-- 1 and the key's view h.
local function window(k, a)
  if gw[k] then wrongType(k) end
  local b, j, hz = windowStarts(a)
  if b == nil then error(j) end
  if wv == nil then wv, winc, worder, wclean = {}, {}, {}, {} end
  local h = wv[k]
  if h == nil then
    h = {}
    wv[k] = h
  end
  local from, to = a + 3 + j, a + 2 + hz
  for f = from, to do
    if h[ARGV[f]] == nil then
      local v = redis.call('HMGET', k, unpack(ARGV, from, to))
      for y = from, to do
        if h[ARGV[y]] == nil then h[ARGV[y]] = tonumber(v[y - from + 1]) or 0 end
      end
      break
    end
  end
  local c = {}
  for w = j, hz - 1 do c[w] = h[ARGV[a + 3 + w]] end
  return {b = b, j = j, hz = hz, cnt = c, at = a + 3, cost = tonumber(ARGV[a + 1]), rate = tonumber(ARGV[a + 2]), h = h}
end

-- slot returns the window of window item x that holds t, or nil past its
-- horizon.
local function slot(x, t)
  local b = x.b
  for k = x.j, x.hz - 1 do
    if t < b[k + 1] then return k end
  end
  return nil
end

-- pausedUntil returns the latest paused-until of the np pause keys that
-- follow KEYS[pb], reading with one MGET those the call has not read.
local function pausedUntil(pb, np)
  if pv == nil then pv = {} end
  for p = pb + 1, pb + np do
    if pv[KEYS[p]] == nil then
      local v = redis.call('MGET', unpack(KEYS, pb + 1, pb + np))
      for q = 1, np do pv[KEYS[pb + q]] = tonumber(v[q]) or 0 end
      break
    end
  end
  local paused = 0
  for p = pb + 1, pb + np do
    local u = pv[KEYS[p]]
    if u > paused then paused = u end
  end
  return paused
end

-- decide fills reply for the request whose keys start after KEYS[kb] and
-- whose arguments start at ARGV[ab]. The first pass reads each key
-- through the view: a GCRA item's stored tat goes to the reply's prev slot
-- and its earliest time to its remaining slot meanwhile; a window item's
-- figures to wins[i]. The rounds find t and the decider; the second pass
-- charges the view and fills the figures. An item's arguments start at
-- ARGV[a], the first at ab + 5, each after 4 per GCRA item before it, + 1
-- per lead, + 8 per window.
local function decide(kb, ab, reply)
  local maxwait, n, np = tonumber(ARGV[ab + 1]), tonumber(ARGV[ab + 2]), tonumber(ARGV[ab + 3])
  local paused = 0
  if np > 0 then paused = pausedUntil(kb + n, np) end
  local wins
  local a = ab + 5
  for i = 1, n do
    local k = KEYS[kb + i]
    if ARGV[a] == 'w' then
      if wins == nil then wins = {} end
      wins[i] = window(k, a)
      a = a + 8
    else
      if winc ~= nil and winc[k] ~= nil then wrongType(k) end
      local stored = gv[k]
      if stored == nil then
        stored = tonumber(redis.call('GET', k)) or 0
        gv[k] = stored
      end
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
            e = x.b[k + 1]
            beyond = e >= x.b[x.hz]
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
  a = ab + 5
  for i = 1, n do
    local r = 4 * i
    local key = KEYS[kb + i]
    local rem, reset, mark, prev = 0, 0, 0, 0
    local x = wins and wins[i]
    if x then
      local b, k = x.b, x.j
      if allowed then
        k = slot(x, t)
        local f = ARGV[x.at + k]
        local inc = winc[key]
        if inc == nil then
          inc = {}
          winc[key] = inc
          worder[#worder + 1] = key
        end
        inc[f] = (inc[f] or 0) + x.cost
        x.h[f] = x.h[f] + x.cost
        mark = b[k]
        -- The first charge of a window: its clean-up at the flush, with
        -- the end of the latest window first charged (as reserve.lua).
        if x.cnt[k] == 0 then
          local cl = wclean[key]
          if cl == nil or b[k + 1] > cl.last then
            wclean[key] = {b = b, j = x.j, at = x.at, last = b[k + 1]}
          end
        end
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
        gv[key], gw[key] = set, true
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

-- flush writes what the call charged in its view: each GCRA key once
-- (pairs' order: every key's write is independent of the others'), then
-- per window key its increments and, after a window's first charge, its
-- clean-up.
local function flush()
  for k in pairs(gw) do
    local v = gv[k]
    redis.call('SET', k, v, 'PX', ttl(v - now))
  end
  if worder == nil then return end
  for _, k in ipairs(worder) do
    for f, c in pairs(winc[k]) do
      redis.call('HINCRBY', k, f, c)
    end
    local cl = wclean[k]
    if cl ~= nil then cleanWindows(k, cl.b, cl.j, cl.at, cl.last) end
  end
end

local out = {}
local kb, ab = 0, 4
for r = 1, m do
  local reply = {}
  local ok, err = pcall(decide, kb, ab, reply)
  if ok then
    out[r] = reply
  else
    if type(err) ~= 'table' then err = redis.error_reply(tostring(err)) end
    out[r] = err
  end
  kb = kb + tonumber(ARGV[ab + 2]) + tonumber(ARGV[ab + 3])
  ab = ab + tonumber(ARGV[ab])
end
flush()
return out
