--[[
after.lua acts on an admitted reservation after its request went: one call
per response, whatever operations apply, with an op code per item (an item
may appear once per op, its key repeated in KEYS). Numbers, clock and
TTLs are as in reserve.lua.

Op "sync" (package quota's doc, "Sync"): the vendor reported R, how many
more events of cost 1 it admits, in the limit's units. The limit is
drained so that it admits at most R more at once on top of the
reservations made after this one, and is never loosened:

  GCRA    after = max(0, cur - mark), where cur is the stored tat and
          mark the tat this reservation set: what the reservations
          charged after it occupy (tats only grow through reservations).
          A lane of a limit with classes that the reservation did not
          charge comes with the mark "now" (reserve.lua, "Classes"): all
          it has booked ahead counts as after.
          tat = now + DVT - R*T + after is stored when it is later than
          both cur and now. The holes key is left alone: a tat raised
          above every live mark makes a later Cancel of an earlier
          reservation a hole, and one of a later reservation goes back at
          most to this tat.
  window  the window charged, while it has not ended: after = max(0,
          count - count at mark), where count at mark is the window's
          count right after this reservation's charge; the count becomes
          Rate - R + after when that is more. The key's TTL is only ever
          lengthened, to at least that window's end.

A key that is gone (expired, flushed) reads as 0: the sync then rebuilds
the state from the vendor's figure. So does a GCRA key whose tat has
passed, which its TTL (rounded up to the millisecond, plus a test's
slack) may keep a moment longer: its reservations occupy nothing.

Op "learn" (package quota's doc, "Learning"): the vendor stated the limit
L of a learning limit in the response of a reservation whose slot was at.
The limit's learned key (a hash: limit, at) records it unless it holds a
figure stated for a later slot: a stale response changes nothing, while
a newer one moves the figure either way. The key expires TTL after the
last figure recorded. When the rate the limit runs at falls (the figures
recorded before and now, clamped to [N, hi] as reserve.lua does, an
absent one N), its item key, a GCRA tat, is restated at the new rate as
quota's restate does: the time booked ahead of now, d = tat - now, holds
ceil(d/T) events at the old interval T = ceil(P/L); each takes the new
interval T', up to now + P + DVT' (the new rate's tolerance,
floor(B*L'/N)*T'), and never below the tat. So what was admitted at the
higher figure counts at the lower one. The tat is left alone when d is
at or past that bound (the result could only be the tat), so no product
passes it: every figure stays an exact integer.

Op "release": give a lease back (a concurrency limit's key, a sorted set
of lease id -> expiry: see reserve.lua, "Leases"): ZREM. Releasing a lease
that expired or was released already does nothing. A lease that was still
held is announced: PUBLISH on the store's channel with the key as the
message, which wakes the first waiter for that key in each process
listening (notify.go). PUBLISH names no key, so a script may call it in
a cluster too, where it reaches the subscribers on every node. It is a
pcall: a user whose ACL denies the channel still releases (its waiters
fall back to their expiry timers).

Op "renew": extend a lease still held to its TTL from now, never
shortening it, and the key's expiry with it. A lease that has expired is
not taken again: its place may be another request's by now.

Op "settle": book a reservation's actual cost in one limit, as package
quota's doc, "Settle", says: delta = actual - charged. GCRA: an excess
(delta > 0) moves the tat by delta*T from max(tat, now), a debt the next
requests wait for, but never past now + reach (the limit's period and
tolerance: the next request waits at most a period for the debt, when
the vendor's limit has refilled) nor back; a refund (delta < 0) comes back only while the stored
tat is still the mark this reservation set (no later reservation was
placed on it, whatever set their slots; see cancel.lua), to mark +
delta*T, the key deleted when that is idle. Window: the count of the
window charged moves by delta while that window is open, never below zero
and, for an excess, past the rate if need be.

KEYS  per entry, in the order of ARGV's entries, its item key; for
      "learn" the learned key, then the item key (both in the request's
      hash tag: the learned key is named after the item key)
ARGV  1 now (µs) or "" for TIME; 2 TTL slack (ms); 3 n, the count of
      entries; then per entry an op and its arguments:
        "sync", "g", T (µs), DVT (µs), R, mark (µs, or "now")
        "sync", "w", rate, R, window start (µs, as reserve.lua wrote it),
                     window end (µs), count at mark
          where 0 <= R <= the limit's capacity
        "release", lease id, the channel a release is announced on
        "renew", lease id, TTL (µs)
        "settle", "g", mark (the tat set), delta, T (µs), reach (µs)
        "settle", "w", the window start charged, its end (µs), delta
        "learn", L, at (µs), TTL (µs), P (µs), N, B, hi
          where P, N, B and hi are the limit's period, floor rate,
          burst and highest rate, as reserve.lua's item "l" has them
Reply the number of entries that changed something: keys synced, leases
renewed or released that were still held, items settled, figures learned.
]]

-- now, slack, ttl and drain come from prelude.lua.
local n = tonumber(ARGV[3])

-- learnedRate is the rate a learning limit runs at when the figure L is
-- recorded (nil: none), as reserve.lua clamps it.
local function learnedRate(L, N, hi)
  return math.min(math.max(L or N, N), hi)
end

-- restate re-expresses the tat stored at key, booked at rate from, at
-- the lower rate to (header, op "learn"); P, N and B are the limit's
-- period (µs), floor and burst.
local function restate(key, from, to, P, N, B)
  local cur = tonumber(redis.call('GET', key)) or 0
  local d = cur - now
  local T = math.floor((P + to - 1) / to)
  local reach = P + math.floor(B * to / N) * T
  if d <= 0 or d >= reach then return end
  local Tf = math.floor((P + from - 1) / from)
  local booked = math.floor((d + Tf - 1) / Tf)
  local tat = now + reach
  if booked <= math.floor(reach / T) then tat = now + booked * T end
  if tat > cur then redis.call('SET', key, tat, 'PX', ttl(tat - now)) end
end

local changed = 0
local a, k = 4, 1
for _ = 1, n do
  local op, kind = ARGV[a], ARGV[a + 1]
  if op == 'sync' and kind == 'g' then
    local T, dvt = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local r, mark = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]) or now -- "now": no slot of its own
    local cur = tonumber(redis.call('GET', KEYS[k])) or 0
    if cur <= now then cur = 0 end -- idle: as if it had expired already
    local after = math.max(cur - mark, 0)
    local tat = now + dvt - r * T + after
    if tat > cur and tat > now then
      redis.call('SET', KEYS[k], tat, 'PX', ttl(tat - now))
      changed = changed + 1
    end
    a = a + 6
  elseif op == 'sync' and kind == 'w' then
    local rate, r = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local field, wend = ARGV[a + 4], tonumber(ARGV[a + 5])
    local atmark = tonumber(ARGV[a + 6])
    if now < wend then
      local cur = tonumber(redis.call('HGET', KEYS[k], field)) or 0
      local after = math.max(cur - atmark, 0)
      local count = rate - r + after
      if count > cur then
        redis.call('HSET', KEYS[k], field, count)
        local px = ttl(wend - now)
        local left = redis.call('PTTL', KEYS[k])
        if left > px then px = left end
        redis.call('PEXPIRE', KEYS[k], px)
        changed = changed + 1
      end
    end
    a = a + 7
  elseif op == 'release' then
    local x = tonumber(redis.call('ZSCORE', KEYS[k], ARGV[a + 1]))
    redis.call('ZREM', KEYS[k], ARGV[a + 1])
    if x and x > now then
      changed = changed + 1
      redis.pcall('PUBLISH', ARGV[a + 2], KEYS[k])
    end
    a = a + 3
  elseif op == 'renew' then
    local x = tonumber(redis.call('ZSCORE', KEYS[k], ARGV[a + 1]))
    if x and x > now then
      changed = changed + 1
      local until_ = math.max(x, now + tonumber(ARGV[a + 2]))
      redis.call('ZADD', KEYS[k], 'XX', until_, ARGV[a + 1])
      local px = ttl(until_ - now)
      if redis.call('PTTL', KEYS[k]) < px then redis.call('PEXPIRE', KEYS[k], px) end
    end
    a = a + 3
  elseif op == 'settle' and kind == 'g' then
    local mark, delta, T = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
    local cur = tonumber(redis.call('GET', KEYS[k])) or 0
    local tat = nil
    if delta > 0 then
      tat = math.min(math.max(cur, now) + delta * T, now + tonumber(ARGV[a + 5]))
      if tat <= cur then tat = nil end
    elseif cur == mark then
      tat = mark + delta * T
    end
    if tat ~= nil then
      changed = changed + 1
      if tat > now then
        redis.call('SET', KEYS[k], tat, 'PX', ttl(tat - now))
      else
        redis.call('DEL', KEYS[k])
      end
    end
    a = a + 6
  elseif op == 'settle' and kind == 'w' then
    local delta = tonumber(ARGV[a + 4])
    if now < tonumber(ARGV[a + 3]) then
      local count = tonumber(redis.call('HGET', KEYS[k], ARGV[a + 2])) or 0
      local set = math.max(count + delta, 0)
      if set ~= count then
        changed = changed + 1
        redis.call('HSET', KEYS[k], ARGV[a + 2], set)
        local px = ttl(tonumber(ARGV[a + 3]) - now)
        if redis.call('PTTL', KEYS[k]) < px then redis.call('PEXPIRE', KEYS[k], px) end
      end
    end
    a = a + 5
  elseif op == 'learn' then
    local at = tonumber(ARGV[a + 2])
    local rec = redis.call('HMGET', KEYS[k], 'limit', 'at')
    local prev = tonumber(rec[2])
    if prev == nil or at >= prev then
      redis.call('HSET', KEYS[k], 'limit', ARGV[a + 1], 'at', at)
      redis.call('PEXPIRE', KEYS[k], ttl(tonumber(ARGV[a + 3])))
      changed = changed + 1
      local P, N, B, hi = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6]), tonumber(ARGV[a + 7])
      local from, to = learnedRate(tonumber(rec[1]), N, hi), learnedRate(tonumber(ARGV[a + 1]), N, hi)
      if to < from then restate(KEYS[k + 1], from, to, P, N, B) end
    end
    a, k = a + 8, k + 1 -- and the item key
  else
    return redis.error_reply('ERR throttle: after.lua: unknown op ' .. tostring(op) .. ' ' .. tostring(kind))
  end
  k = k + 1
end
return changed
