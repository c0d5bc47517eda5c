--[[
cancel.lua gives back what an admitted reservation may, per package
quota's doc, "Cancel". Numbers, clock and TTLs are as in reserve.lua.

A lease (a concurrency limit's) is given back whenever the cancel comes.
Of the rest, if the slot time has come, nothing is given back. Otherwise
each window
gives the cost back to the window it was charged to, while that window has
not ended, never taking a count below zero; each rolling window gives it
back to the bucket it was charged to (which holds the slot, so it is still
counted), when the key was counted with the same bucket width, never
taking a count below zero: a bucket that reaches zero is deleted, the key's
new moves back to the newest bucket left, and a key whose sum reaches zero
is deleted (see reserve.lua, "Rolling windows"); and each GCRA limit
compares
its stored tat (cur) with the tat this reservation set (mark):

  cur == mark  the reservation is the last one charged to the key: every
               reservation made after it is gone (see below). The tat goes
               back to prev, the stored tat this reservation replaced;
               then, while a hole has the tat as its mark, to that hole's
               prev: the state as if none of them had been made, whatever
               limit or pause set their slots. A tat back at or before now
               is idle: the key and its holes are deleted.
  cur > mark   a later reservation holds the key. Its slot may have been
               set by another limit or a pause above this tat (a jump), so
               no part of this charge can come back safely now: it is kept
               as a hole (mark -> prev) until the tat comes back down to it,
               when the later reservations are cancelled too.
  cur < mark   the state was forgotten or reset since (expiry, an
               operator's Reset): nothing to give back.

Why cur == mark means every later reservation is gone: a reservation sets
the tat above the one it read (cost >= 1, T >= 1µs), so along the
reservations charged since the key was last idle the marks only grow; the
tat only falls here, going back over reservations that are all cancelled
and stopping at the mark of a live one (or below now). So the stored tat is
always the mark of the latest reservation not taken back, marks are unique
among those, and cur == mark says that reservation is this one.

Holes live in a sorted set beside the item key, in its hash tag (see
Store.cancelledKey): score = the hole's mark, member = its prev. A hole
is a run: a new hole joins the one whose mark is its prev (the
reservation charged just before it) and the one whose prev is its mark
(charged just after), since the tat reaches the joined marks only
through those links. So no two holes link, a tail cancel goes back over
at most one, and waiters cancelled in arrival order leave one member,
not one each. A hole whose mark has passed cannot be reached any more
(the tat only comes back to a time not yet passed), so every write first
drops up to PRUNE of those; the set expires with its latest mark. (A
hash from mark to prev could not find the passed ones without reading
every field, and on a key whose queue never drains every new hole would
extend its TTL: passed holes would pile up.) Members are unique: the
prevs of holes not passed are marks of distinct reservations. reserve.lua
never reads the set.

The work of one call is bounded, whatever the set holds: per GCRA item
O(log holes) to find and join holes, at most PRUNE passed holes dropped
(each write adds at most one hole, so they do not pile up), at most WALK
links followed (one, but for holes written before holes were joined),
and an idle key's set is UNLINKed, freed off the script. PRUNE and WALK
are 64: each step is a sorted-set operation of a microsecond or so, so
the bound stays far below a decision's timeout, and 64 is far more than
the one hole a call adds; a walk cut short by WALK only leaves slots
reserved, and the next tail cancel goes on from there.

KEYS  1..n   the reservation's item keys, in stack order; then, per GCRA
             item in stack order, its holes key
ARGV  1 now (µs) or "" for TIME; 2 TTL slack (ms); 3 t, the slot time (µs);
      4 n; then per item either
        "g", mark, prev (µs)      a GCRA limit: the tat this reservation
                                  set and the stored tat it replaced, as
                                  reserve.lua replied them, or
        "w", cost, the window start charged (µs, as reserve.lua wrote it),
             that window's end (µs), or
        "r", cost, the bucket start charged (µs, as reserve.lua replied
             it), the bucket width (µs)
        "c", the lease id, the channel   a concurrency limit's lease; one
                                  still held is announced on the channel,
                                  as after.lua's "release" does
      where cost is what the reservation counted for in that limit
Reply 1 when the slot time had not come, else 0.
]]

-- now, slack, ttl and drain come from prelude.lua.
local t = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local due = now >= t

local PRUNE, WALK = 64, 64

-- prune drops up to PRUNE holes whose mark has passed, the lowest first.
local function prune(holes)
  local passed = redis.call('ZCOUNT', holes, '-inf', now)
  if passed > 0 then
    redis.call('ZREMRANGEBYRANK', holes, 0, math.min(passed, PRUNE) - 1)
  end
end

local a, h = 5, n + 1
for i = 1, n do
  if ARGV[a] == 'c' then
    local x = tonumber(redis.call('ZSCORE', KEYS[i], ARGV[a + 1]))
    redis.call('ZREM', KEYS[i], ARGV[a + 1])
    if x and x > now then redis.pcall('PUBLISH', ARGV[a + 2], KEYS[i]) end
    a = a + 3
  elseif due then
    if ARGV[a] == 'g' then h, a = h + 1, a + 3 else a = a + 4 end
  elseif ARGV[a] == 'g' then
    local mark = tonumber(ARGV[a + 1])
    local holes = KEYS[h]
    h = h + 1
    local cur = tonumber(redis.call('GET', KEYS[i])) or 0
    if cur == mark then
      prune(holes)
      local tat = tonumber(ARGV[a + 2])
      for _ = 1, WALK do
        if tat <= now then break end
        local hole = redis.call('ZRANGE', holes, tat, tat, 'BYSCORE', 'LIMIT', 0, 1)
        if #hole == 0 then break end
        redis.call('ZREM', holes, hole[1])
        tat = tonumber(hole[1])
      end
      if tat > now then
        redis.call('SET', KEYS[i], tat, 'PX', ttl(tat - now))
      else
        redis.call('DEL', KEYS[i])
        redis.call('UNLINK', holes)
      end
    elseif cur > mark then
      prune(holes)
      -- Members stay the strings callers sent: a Lua number would print
      -- a 16-digit time in another form.
      local prev = ARGV[a + 2]
      local before = redis.call('ZRANGE', holes, prev, prev, 'BYSCORE', 'LIMIT', 0, 1)
      if #before == 1 then
        redis.call('ZREM', holes, before[1])
        prev = before[1]
      end
      local after = redis.call('ZSCORE', holes, ARGV[a + 1])
      if after then
        redis.call('ZREM', holes, ARGV[a + 1])
        mark = tonumber(after)
      end
      redis.call('ZADD', holes, mark, prev)
      local px = ttl(mark - now)
      local left = redis.call('PTTL', holes)
      if left > px then px = left end
      redis.call('PEXPIRE', holes, px)
    end
    a = a + 3
  elseif ARGV[a] == 'r' then
    local key, b, W = KEYS[i], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local v = redis.call('HMGET', key, 'sum', 'old', 'new', 'width')
    local sum, old, new = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
    local f = string.format('%d', b)
    local count = tonumber(redis.call('HGET', key, f))
    if sum and old and new and tonumber(v[4]) == W and count and count > 0 then
      local back = math.min(tonumber(ARGV[a + 1]), count)
      if sum - back <= 0 then
        redis.call('DEL', key)
      elseif back < count then
        redis.call('HINCRBY', key, f, -back)
        redis.call('HSET', key, 'sum', sum - back)
      else
        redis.call('HDEL', key, f)
        if b == new then
          new = b - W
          while new > old and not redis.call('HGET', key, string.format('%d', new)) do
            new = new - W
          end
        end
        redis.call('HSET', key, 'sum', sum - back, 'new', new)
      end
    end
    a = a + 4
  else
    if now < tonumber(ARGV[a + 3]) then
      local cost = tonumber(ARGV[a + 1])
      local count = tonumber(redis.call('HGET', KEYS[i], ARGV[a + 2]))
      if count and count > 0 then
        redis.call('HINCRBY', KEYS[i], ARGV[a + 2], -math.min(cost, count))
      end
    end
    a = a + 4
  end
end
if due then return 0 end
return 1
