--[[
lone.lua decides requests whose stack holds only GCRA limits (with or
without a lead, never learning) and calendar windows (without classes or
pacing): one request alone in its call, or a run of m requests of one
stack (the same keys, items and costs; each its own max wait), as
coalescing sends them when a busy process repeats its stack. It takes
the same arguments and gives the same replies as reserve.lua for a call
of those requests, and makes the same decisions and final writes: issue
22's lean path. reserve.lua makes a table per item per request, the
call's view of the keys and its batch machinery for every call; this
script reads each key once, makes the m decisions in order with
arithmetic alone, and writes each key once.

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
writes, alone and in runs, and the conformance and differential suites
run through it (the store sends a lone stack of these kinds here).

KEYS  its n item keys, then its np pause keys
ARGV  1 now (µs) or "" for TIME; 2 TTL slack (ms); 3 m; then
      reserve.lua's entries of one request (its count of ARGV entries,
      argc): argc, max wait (µs), n, np, nl (always 0), then per item
        "g", cost, T (µs), DVT (µs)             a GCRA limit, or
        "a", cost, T, DVT, lead (µs)            one charged with a lead, or
        "w", cost, rate, B0, B1, B2, B3, B4     a calendar window
      then the max wait of requests 2 .. m (ARGV[argc + 4 ..])
Reply the m replies of reserve.lua, one after the other, packed in one
      string: each allowed, now, t, decider, then per item remaining,
      reset after, mark, prev, every number 8 bytes, big-endian
      (struct.pack's "i8"; Go's packed). Redis converts a number of a
      table to a reply for about a tenth of a µs and Go boxes each it
      reads: a run of 8 of the 3-limit stack replies 128 numbers. Or an
      array of one error, every decision's (a key holding another type,
      or the server's now outside a window's B0 .. B4).
]]

-- now, slack, ttl and drain come from prelude.lua; windowStarts, slot,
-- windowFrom and cleanWindows from windows.lua.

local m, argc = tonumber(ARGV[3]), tonumber(ARGV[4])
local n, np = tonumber(ARGV[6]), tonumber(ARGV[7])

-- window reads window item i's key k, whose arguments start at ARGV[a]
-- ("w"): its starts b (0-based), the window j holding now, its horizon hz
-- (windowStarts, windows.lua) and the counts of windows j .. hz - 1,
-- in the fields windows.lua's slot reads; got, what the call charges
-- each window, fills as the decisions charge them.
local function window(k, a)
  local b, j, hz = windowStarts(a)
  if b == nil then error(j) end
  local v = redis.call('HMGET', k, unpack(ARGV, a + 3 + j, a + 2 + hz))
  local c = {}
  for w = j, hz - 1 do c[w] = tonumber(v[w - j + 1]) or 0 end
  return {bs = b, j = j, hz = hz, cnt = c, got = {}, at = a + 3, cost = tonumber(ARGV[a + 1]), rate = tonumber(ARGV[a + 2])}
end

-- gcra reads GCRA item k, whose arguments start at ARGV[a] ("g", or "a"
-- with a lead), with the call's pause paused: its cost, T, DVT, cost*T,
-- the least tat the lead and the pause allow (a pause drains its tat, as
-- reserve.lua's) and the stored tat, which each admitted decision moves
-- on.
local function gcra(k, a, paused)
  local cost, T, dvt = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local least = now
  if ARGV[a] == 'a' then least = now + tonumber(ARGV[a + 4]) end
  if paused > 0 then
    local p = paused + math.min(dvt, drain) - cost * T
    if p > least then least = p end
  end
  return {cost = cost, T = T, dvt = dvt, ct = cost * T, least = least, stored = tonumber(redis.call('GET', k)) or 0}
end

-- one makes the decision of one request, waiting at most maxwait, on the
-- items' figures as the decisions before it in the call left them, puts
-- its reply in rep (1 .. 4 + 4n, overwritten by the next decision), and
-- moves those figures on when it admits: each GCRA item's stored tat,
-- each window item's counts. It writes a number at a time, compares
-- without math.max and makes no table: what a further decision of a run
-- costs is this function.
local function one(items, wins, paused, maxwait, rep)
  local t, decider = now, -1
  if paused > t then t, decider = paused, -2 end
  for i = 1, n do
    local x = items[i]
    if x.ct then
      local tat = x.stored
      if x.least > tat then tat = x.least end
      x.tat = tat
      local e = tat + x.ct - x.dvt
      rep[1 + 4 * i] = e -- its earliest time, meanwhile
      if not wins and e > t then t, decider = e, i - 1 end -- a constant: one round
    end
  end
  local ok = true
  if wins then -- reserve.lua's rounds, in stack order
    ok = false
    for round = 1, 16 do
      -- stale: a window moved t, or was looked at before an item after
      -- it moved t. A round with none is final: a GCRA item's time is a
      -- constant t has passed, every window saw the final t and kept it,
      -- so reserve.lua's next round would move nothing, and is not made
      -- (but within its 16 rounds, as reserve.lua's).
      local moved, beyond, seen, stale = false, false, false, false
      for i = 1, n do
        local x, e = items[i], t
        if x.ct then
          e = rep[1 + 4 * i]
          if e > t then t, decider, moved, stale = e, i - 1, true, stale or seen end
        else
          e, beyond = windowFrom(x, t)
          if e > t then t, decider, moved, stale = e, i - 1, true, true end
          seen = true
        end
        if beyond then break end
      end
      if beyond then break end
      if not moved or (not stale and round < 16) then ok = true break end
    end
  end
  local allowed = ok and t - now <= maxwait
  rep[1], rep[2], rep[3], rep[4] = allowed and 1 or 0, now, t, decider
  for i = 1, n do
    local x, o = items[i], 4 * i
    local rem, reset, mark, prev = 0, 0, 0, 0
    if x.ct == nil then
      local b, k = x.bs, x.j
      if allowed then
        k = slot(x, t)
        x.cnt[k], x.got[k], mark = x.cnt[k] + x.cost, (x.got[k] or 0) + x.cost, b[k]
      end
      rem, reset = x.rate - x.cnt[k], b[k + 1] - now
    elseif allowed then
      local set = x.tat
      if t > set then set = t end
      set = set + x.ct
      rem, reset, mark, prev = math.floor((x.dvt - (set - t)) / x.T), set - now, set, x.stored
      x.stored, x.set = set, true
    else
      rem, reset = math.floor((x.dvt - (x.tat - now)) / x.T), x.tat - now
    end
    if rem < 0 then rem = 0 end
    if reset < 0 then reset = 0 end
    rep[o + 1], rep[o + 2], rep[o + 3], rep[o + 4] = rem, reset, mark, prev
  end
end

-- decide reads every key once, makes the m decisions in order, their
-- packed replies one after the other in out, then writes each key once:
-- a GCRA item's last tat, a window's charges, and, when a charge was a
-- window's first (its count was 0), the dropping of ended windows and the
-- key's expiry (windows.lua's cleanWindows, which reads the charges just
-- made).
-- An item's arguments start at ARGV[a], every item's at 9 + 4 per GCRA
-- item before it, + 1 per lead, + 8 per window.
local function decide(out)
  local paused = 0
  if np > 0 then
    local v = redis.call('MGET', unpack(KEYS, n + 1, n + np))
    for p = 1, np do
      local u = tonumber(v[p])
      if u and u > paused then paused = u end
    end
  end
  local items, wins, a = {}, false, 9
  for i = 1, n do
    if ARGV[a] == 'w' then
      items[i], wins = window(KEYS[i], a), true
      a = a + 8
    else
      items[i] = gcra(KEYS[i], a, paused)
      if ARGV[a] == 'a' then a = a + 1 end
      a = a + 4
    end
  end
  local w, rep, pack = 4 + 4 * n, {}, struct.pack
  local f = '>' .. string.rep('i8', w)
  one(items, wins, paused, tonumber(ARGV[5]), rep)
  out[1] = pack(f, unpack(rep, 1, w))
  for d = 2, m do
    one(items, wins, paused, tonumber(ARGV[argc + 2 + d]), rep)
    out[d] = pack(f, unpack(rep, 1, w))
  end
  for i = 1, n do
    local x = items[i]
    if x.ct == nil then
      local first
      for k = x.j, x.hz - 1 do
        local got = x.got[k]
        if got then
          redis.call('HINCRBY', KEYS[i], ARGV[x.at + k], got)
          if x.cnt[k] == got then first = k end
        end
      end
      if first then cleanWindows(KEYS[i], x.bs, x.j, x.at, x.bs[first + 1]) end
    elseif x.set then
      redis.call('SET', KEYS[i], x.stored, 'PX', ttl(x.stored - now))
    end
  end
end

local out = {}
local ok, err = pcall(decide, out)
if not ok then
  if type(err) ~= 'table' then err = redis.error_reply(tostring(err)) end
  return {err}
end
if m == 1 then return out[1] end
return table.concat(out)
