--[[
reserve.lua decides one request of package quota against a stack of limits
in one atomic step: the algorithm of package quota's doc, "The decision",
step for step, on state kept in Redis. It writes only when it admits.

Numbers. Every time is an integer count of microseconds since the Unix
epoch and every duration an integer count of microseconds. Lua 5.1 has only
doubles, which hold every integer below 2^53 (about 9.0e15) exactly. Now is
about 1.8e15 (2^51 is reached in 2041) and the Go side refuses any GCRA
tolerance above 2^51 µs (71 years), so every sum, difference and product
below is an exact integer. The one division, for Remaining, is math.floor
of the quotient of two integers below 2^53, which rounds correctly. Redis
formats a number handed to redis.call with %.17g, so integers below 1e17
reach it in full; window fields are the ARGV strings as Go formatted them,
never re-formatted here.

Clock. now is the server's TIME, not the caller's clock: the store is the
one clock, so a fleet whose machines disagree on the time still agrees on
the quota. Redis 7 replicates a script's effects, not the script, so
reading TIME in a script that writes is safe. A test may pass its own now
in ARGV[1]; production never does.

TTLs. Every key written expires when its state is back to idle: a GCRA key
at its stored tat, a window key at the end of the latest window it counts.
TTLs are milliseconds rounded up, so a key never expires while its state
still matters; ARGV[2] adds slack milliseconds to every TTL (zero in
production; a test with a stepped clock keeps keys longer, since its clock
does not follow the real time a TTL runs on). Expiry only forgets state
that is idle anyway, so a longer TTL never changes a decision.

Windows. Lua has no time zones, so Go computes, per window limit, five
window starts B0 < B1 < B2 < B3 < B4 around its own clock (B1 starts the
window holding the caller's now). The script takes the window j holding the
server's now, so a caller's clock off by less than a window is harmless,
and looks at most three windows ahead, j .. j+2 (capped at B4): a request
that no window before that horizon admits is denied. A window key is a
hash: field = window start (µs), value = count. The script reads only the
windows j .. j+2 (HMGET); the first charge of a window also drops the
windows that have ended and sets the key's expiry, which a later charge of
the same window leaves as it is.

Cost. What a call costs Redis is mostly its redis.call's (about 1 µs each
beyond the command's own work) and the tables it makes (about 0.1 µs each
with the garbage they leave), so the script reads nothing a kind does not
need, reads the pause keys with one MGET, keeps an item's state in one
table (not a table per field), and makes the window view only for a call
that has a window limit. A lone 1-GCRA decision makes 7 tables.

Functions. Redis runs this file anew on every call, so each local
function below is a closure made per call, about 0.1 µs of Redis time
whether it is used or not: the path of GCRA and window items (parse,
slot, charge, flush) is a few functions, and the kinds that always go
alone (rolling windows, concurrency) share one to parse and one to charge.
The functions of the upper-case kinds (limits with classes, paced windows
and Fair limits) are made only by a call that has one (upperFns), and in
groups by concern, each only for an item that uses it: the holds of
classes over windows, concurrency and rolling limits, the lanes of a GCRA
limit with classes, pacing, and fair share. A plain call runs 4 Lua
instructions more for classes than before they existed, and 3 more for
fair share (of about 430 for a lone GCRA limit).

Rolling windows. Buckets of width W (Go computes it: ceil(P / 100)),
aligned to multiples of W since the epoch; a bucket b counts until b + W +
P, its end plus the period. A rolling key is a hash: field = bucket start
(µs), value = count, and four fields of its own: sum (the sum of the
buckets), old (no bucket starts before it), new (the newest bucket with a
count) and width (the W it was counted with). A key of another width (the
period changed), or whose newest bucket has expired, or that lacks them,
counts nothing, and is deleted before the first charge. The script walks
buckets from old: first those expired by now (taken out of the sum and
deleted when it writes), then, while the rest leave no room for the cost,
on, each expiry moving the earliest time the limit admits. Every walk
starts where the last one ended, and a key spans at most 2 periods and 2
buckets, so a decision reads each bucket once at most and mostly none.
Sums stay below 2^53: counts at most the rate (at most 2^51) per period
spanned.

Leases. A Concurrency limit's key is a sorted set of leases: member = the
lease id (unique fleet-wide: the Go side makes it from a random per-process
prefix and a counter), score = its expiry (µs). A lease expires a TTL after
the slot or its last renewal (after.lua), so the leases of a process that
died come back. Live leases are those whose expiry is after now; the
decision counts them (ZCOUNT) and takes no part in the fixpoint: a limit
with a free lease admits at any time, and a full one denies the request
whatever its max wait (no store knows when a holder finishes), with the
soonest expiry as the time to retry and itself as the decider. Admitting
drops the expired leases, adds this one and expires the key with its
latest lease.

Pauses. The latest paused-until of the pause keys holds the request back
while it is in force, and drains every GCRA item before the fixpoint, in
force or not: tat = max(tat, paused + min(DVT, drain) - cost*T), which
changes nothing once now passes paused + drain (a pause key lives that
long). It stays below 2^53 µs like the slot times (paused is at most now +
2^51, drain a minute).

The fixpoint ends within a few rounds (a GCRA or rolling limit moves t at
most once, a window at most once per window of its horizon); it is capped
at 16 rounds, and running out of rounds denies, never over-admits.

Requests. One call decides m requests (Go coalesces those of concurrent
callers; package doc, "Coalescing"), one after the other in their order,
each on the state the ones before it left and each all or nothing on its
own, at one now. The reads and writes of GCRA and window keys go through
the call's view of them: a key is read once and written once, at the end,
so that requests that share keys cost one read and one write per key. A
request whose arguments and keys are those of the request before it (the
common case: concurrent callers of one stack) reuses that request's
parsed items and pauses, refreshed from the view, instead of parsing them
again; only stacks of GCRA and window limits, without learning. Each
request gets its own reply or error, and the flush cannot fail for one
of them: a key of another type fails the request that reads it, and a
request that meets a key another request of the call charged as a limit
of another kind (a GCRA limit and a window, after a reload changed a
kind) fails alone with WRONGTYPE before it charges anything, as it would
alone once the other's write was in.

Peeking. With "peek" for the TTL slack (ARGV[2]) the call writes nothing
(it is run as EVAL_RO, which Redis refuses to let write): every request is
denied before its reply points, so nothing is charged and nothing flushed,
and a pause does not drain. Its reply is what a request of cost 0 sees,
with the state's figures appended (below). This is how operators' tools
read the state (inspect.go): one implementation of the math, here.

Learning. A learning GCRA limit (package quota's doc, "Learning") reads
the figure the vendor stated, recorded by after.lua in a hash beside its
item key (field limit), clamps it to [N, hi] and runs at rate L per P
with a burst of floor(B*L/N): T = ceil(P/L), DVT = floor(B*L/N)*T, as
quota.Limit.Learned does. Go bounds hi so that B*L stays below 2^51.
Only a learning item reads it: one HGET.

Classes. A limit with priority classes (package quota's doc, "Priority
classes") and a paced window are items of their own kinds, upper-case, so
that a plain item's path is what it was. A GCRA limit with classes ("G")
is L lanes, each a plain GCRA state: the bottom lane (L-1) is the item
key, lane q < L-1 a key of its own (Go's laneKey), read through the
call's view like any GCRA key (one MGET for those not read yet). A
request of class c admits at t by the earliest of its lanes: lane q >= c
by its GCRA; lane q < c (borrowed) only when its tat is at or before now
and t is within one whole-limit interval T of now, at t; a lane whose
burst is below the cost never. It charges the lowest lane that admits at
the slot and replies which (mark and prev are that lane's). A pause
drains each lane as a GCRA limit of its own. Its remaining is the sum of
the lanes' at the slot (each at most its burst), its reset after the
latest. A Window, Rolling or Concurrency limit with classes ("W" with
classes, "R", "C") reads its activity record, a hash beside the item key
(class -> µs of its last admitted request, expiring ActiveFor after the
last write), for the classes above the request's (one HMGET): the hold h
is the sum of Hold(q) over those active (recorded within ActiveFor before
now). It admits only with room for the cost and h: a window count + cost
+ h <= rate in the window of t, a rolling window sum + cost + h <= rate
(past its horizon when expiries alone cannot make the room), a
concurrency limit live + 1 + h <= rate. Admitting a class above the
bottom records now as its activity (HSET and PEXPIRE). Go sends each
lane's interval and tolerance and each class's hold precomputed, so the
script does no basis-point arithmetic, and every figure stays an exact
integer as above. Requests with classes are coalesced like any GCRA and
window stack (activity records are written at once, so the next request
of the call reads them), but never reuse the request before them.

Pacing. A paced window ("W", pace rate Rl > 0: the rate, or for a class
below the top the rate less the pace reserve's share of it; P the pace
reserve in basis points, 0 without) admits, in window [s, e) with
D = e - s, F = floor(D / 100) and Fres = P's share of D (exact integers:
floor(D / 10000) * P + floor(D % 10000 * P / 10000)), a request that
takes the count to x = count + cost + h at t >= s - L + ceil(x * (D /
Rl)), computed as written (a double product of x and the double quotient
D / Rl, then ceil), which is Go's float64 expression to the µs. The top
class (c = 0, and every class of a window without classes) has lead
L = F + Fres and Rl the rate. A class below the top has lead L = F, needs
x <= Rl before the release R = e - max(F, Fres), and from R on paces at
the whole rate: max(t, R, its line at the rate). A window that cannot
admit x at all sends the request to the next window, as an unpaced one
does. D is below 2^52 µs, so every term is exact but the product, whose
rounding the ceiling absorbs.

Fair share. A Fair limit ("F"; package quota's doc, "Fair share") is a
GCRA limit of key K shared among the tenants of its requests. Its extra
keys, in the request's hash tag, are the tenant's lane (a GCRA tat,
read and written through the call's view like K, and expiring at its
tat), the active set (a ZSET: tenant part -> the µs it was last seen) and
its weights (a HASH: part -> weight, and "" -> W, their sum). A decision
reads K and the lane in one MGET, the set's newest score (ZRANGE -1 -1),
and when that is live (seen + span > now) its stale members, at most 16,
lowest in (score, part) as a ZSET orders them (ZRANGE BYSCORE LIMIT),
with their weights, the tenant's own and W in one HMGET; when no member
is live the set counts as empty, as its expiry would leave it. W is the
recorded sum, less the stale members' weights and the tenant's old
weight, plus its weight w. The lane: Ti = min(ceil(T * W / w),
floor(2^51 / B)) (a double product, then the quotient, then ceil: Go's
float64 expression to the µs; T*W may pass 2^53, where both round
alike), at least 1, and bi = max(1, floor(B * w / W)) (exact: B*w is
below 2^53 by the limit's validation). With ltat = max(lane, now), the
request is within its share when it has no Appointment and ltat + cost*Ti
- bi*Ti <= now + T; K then admits it at t >= tat + cost*T - DVT up to now
+ T; back at an appointment, at t >= tat + cost*T - (DVT - min(h, B -
cost)*T) up to now; over its share, leaving min(max(2h, floor(B/2)), B -
cost) instead (h = max(1, floor(B/10)); quota.FairOverHold), or, when W >
w and the lane could not book it within the span (ltat + cost*Ti - bi*Ti
> now + span), the larger of that and B - cost - 2h (quota.FairIdleHold);
with W > w and that room, an admission over its share charges the lane.
Past that latest slot the fixpoint stops (beyond). Then, unless a lease
cap is full, a second fixpoint from the latest of now, the pause and the
appointments (max(now, ltat + cost*Ti - bi*Ti) without Appointment, now
with it), every Fair item at an appointment's tolerance and with no
horizon, gives a deferral's time; within the max wait the request is
deferred (reply allowed = 2): a lane without Appointment is booked at its
appointment a (a GCRA charge: max(ltat, a) + cost*Ti), the set is
written, nothing else is charged. Otherwise a third fixpoint, every Fair
item at the request's own tolerance with no horizon, gives the denial's
time, and nothing is written. An admission within its share, or over it
with room, charges the lane at the slot beside K. An admission or a
deferral writes the set at once (so that the next request of the call
reads it): the stale members leave (ZREM, HDEL; UNLINK of both keys when
none was live), the tenant is added (ZADD now, HSET of its weight and
W), and both keys expire the span past
now (PEXPIRE). Fair requests are coalesced like any GCRA and window
stack, but never reuse the request before them. Cancel and Settle act on
the lane charged as on a GCRA key of its own (cancel.lua, after.lua). A
peek runs neither the second fixpoint nor the third, and adds the
set's size (ZCARD).

KEYS  per request: its n item keys, in stack order, then its np pause
      keys, then its nx extra keys, in stack order: a learning item's
      learned key, a GCRA item with classes' lanes 0 .. L-2, a held
      item's activity record, a Fair item's tenant's lane, active set
      and weights
ARGV  1 now (µs) or "" for TIME; 2 TTL slack (ms) or "peek"; 3 m; then per
      request:
      its count of ARGV entries (these five included), max wait (µs), n,
      np, nx, then per item either
        "g", cost, T (µs), DVT (µs)                   a GCRA limit, or
        "a", cost, T, DVT, lead (µs)                  a GCRA limit charged
                                                      with a lead (its tat
                                                      taken as at least
                                                      now + lead), or
        "l", cost, T, DVT, P (µs), N, B, hi            a learning GCRA limit
                                                      (T, DVT at rate N), or
        "w", cost, rate, B0, B1, B2, B3, B4 (µs)      a calendar window, or
        "r", cost, rate, P (µs), W (µs)               a rolling window, or
        "c", rate, TTL (µs), lease id                 a concurrency limit, or
        "G", cost, T (µs), c, L, then per lane q = 0 .. L-1 its T_q, DVT_q
                                                      a GCRA limit with classes,
        "W", the "w" entries, Rl (0: not paced), P, 1 with classes
             (then the class part) or 0               a window with classes
                                                      or paced,
        "R", the "r" entries, the class part          a rolling window or
        "C", the "c" entries, the class part          a concurrency limit
                                                      with classes, or
        "F", cost, T (µs), DVT (µs), B, span (µs), part, w, appointment
                                                      a Fair limit
      where cost is what the request counts for in that limit, c the
      request's class in it, and the class part: c, 1 when admitting
      records c's activity (a class above the bottom) else 0, ActiveFor
      (µs), then Hold(0) .. Hold(c-1); a peek sends the bottom class, so
      that every class's activity is read; for a Fair limit B is its
      burst, span quota.Limit.FairSpan, part and w the tenant's part
      (quota.FairPart) and weight, appointment 1 when the request comes
      back at one, else 0
Reply per request, either an error (the server's now is outside B0..B4,
      or a command failed, e.g. WRONGTYPE) or: allowed (1, 0, or 2 when
      deferred), now, t (the slot time; when deferred, the appointment's
      time), decider (0-based item, -1 none, -2 a pause), then
      per item: remaining, reset after (µs), mark (GCRA: the tat set;
      window: the window start charged; rolling: the bucket start charged;
      concurrency: 0; 0 when denied), prev (GCRA, when admitted: the
      stored tat this decision replaced, as read, 0 when the key did not
      exist; else 0). For a concurrency limit, remaining is the leases
      left and reset after the time until its latest lease expires. mark
      and prev are what cancel.lua needs.
      A peek appends per item: used (window: the count of the window of
      now; rolling: of its buckets up to now; GCRA: capacity - remaining;
      concurrency: the leases held), ahead (window, rolling: the count
      charged to later windows or buckets), debt (GCRA: the events of cost
      1 by which its tat lies beyond its tolerance, rounded up; window: its
      count beyond its rate), next (concurrency: the time until its soonest
      lease expires, 0 when none is held), exists (1 when the key exists);
      then per pause key the time it holds requests back until, 0 when it
      is not in force.
      Then, per learning item, in stack order, the rate L it ran at.
      Last, per GCRA item with classes, in stack order, the lane charged
      (-1 when denied), and for a peek then each lane's remaining and
      reset after (µs); for a peek, per held item, per class read, how
      long its reserve stays held (µs, 0 when the class is not active).
      After those, per Fair item, in stack order, its lane's mark and
      prev (the tat an admission within its share set and the stored tat
      it replaced; 0 and 0 when the lane was not charged), Ti and bi; and
      for a peek then the active set's members and W after the decision's
      expiry, before the tenant joins (0 and 0 when no member is live),
      how far the lane is booked past now (µs, 0 when idle) and how long
      until it would give a request of cost 1 its appointment (µs, 0:
      at once).
]]

-- now, slack, ttl and drain come from prelude.lua; windowStarts, slot,
-- windowFrom and cleanWindows from windows.lua.
local peek = ARGV[2] == 'peek'
local m = tonumber(ARGV[3])

-- The call's view of the GCRA and window keys: each read once and written
-- once, at the end (flush), so that the decisions of one call that share
-- keys cost one read and one write per key, not per decision. GCRA: gval
-- (key -> stored tat, 0 when missing), gw and gorder (the keys to write,
-- in order). Window, made with the call's first window item: wval (key ->
-- field -> count, as the decisions so far left it), winc and worder (key
-- -> field -> increment to write, and the keys in order), wclean (key ->
-- the first charge of a window: the window starts, j, the ARGV index of
-- B0 and the end of the latest window charged).
local gval, gw, gorder = {}, {}, {}
local wval, winc, worder, wclean

-- wget returns the counts of key k's fields, having read those of the
-- fields ARGV[from .. to] that the call has not read yet.
local function wget(k, from, to)
  local h = wval[k]
  if h == nil then
    h = {}
    wval[k] = h
  end
  for x = from, to do
    if h[ARGV[x]] == nil then
      local v = redis.call('HMGET', k, unpack(ARGV, from, to))
      for y = from, to do
        if h[ARGV[y]] == nil then h[ARGV[y]] = tonumber(v[y - from + 1]) or 0 end
      end
      break
    end
  end
  return h
end

local function field(b)
  return string.format('%d', b)
end

-- The items of the decision being made: items[i] is item i's table, made
-- by parseItems with every field its kind uses (one table per item: a
-- table costs the script more than a command's own work, so there are no
-- per-field tables). Every kind: kind ('g', 'w', 'r' or 'c'), key, cost.
-- GCRA: T, dvt, stored (the key as read, 0 when missing), tat, lead (only
-- an "a" item: the lead its tat is taken from). Window:
-- rate, bs (its starts, 0-based), at (ARGV index of B0), j (window of
-- now), hz (horizon index), cnt (counts by window index, of the windows
-- j .. horizon, as read). Rolling: rate, per (period), wid (bucket
-- width), sum (at now), old, new (the key's, nil when it counts nothing),
-- reset (delete the key before writing), gone (fields of buckets expired
-- by now), due (the earliest time it admits), rb and rs (the walk: the
-- next bucket and the sum of the buckets from it on), rc (counts read, by
-- bucket start). Concurrency: rate, T (its lease TTL), lid (the lease
-- id), live (the live leases), soonest (when they fill the limit, the
-- soonest expiry).
local items = {}

-- cls holds the functions of the upper-case kinds: limits with classes,
-- paced windows and Fair items (header, "Classes", "Pacing" and "Fair
-- share"), made by upperFns for the first item that needs them, each
-- group of them (holds, class lanes, pacing, fair share) only for an item
-- that uses it: a plain call does not pay for their closures (header,
-- "Functions"). cls.fkb is the KEYS base of the last request parsed that
-- has a Fair item.
local cls

-- count returns the count of rolling item x's bucket b, reading it once.
local function count(x, b)
  local c = x.rc[b]
  if c == nil then
    c = tonumber(redis.call('HGET', x.key, field(b))) or 0
    x.rc[b] = c
  end
  return c
end

-- rollAt returns what rolling item x counts at t: its walk moves on over
-- the buckets expired by t. t never goes back.
local function rollAt(x, t)
  local b, W, P = x.rb, x.wid, x.per
  while b ~= nil and b <= x.new and b + W + P <= t do
    x.rs = x.rs - count(x, b)
    b = b + W
  end
  x.rb = b
  return x.rs
end

-- parseWindow returns the item of window key k whose arguments start at
-- ARGV[a], with the counts of the windows it can charge read through the
-- view; or nil and an error reply when the server's now is outside the
-- windows the client computed.
local function parseWindow(k, a)
  local b, j, hz = windowStarts(a)
  if b == nil then return nil, j end
  -- Only the windows the decision can charge, j .. horizon - 1: the
  -- others matter only to the first charge of a window (flush).
  if wval == nil then wval, winc, worder, wclean = {}, {}, {}, {} end
  local h = wget(k, a + 3 + j, a + 2 + hz)
  local c = {}
  for w = j, hz - 1 do c[w] = h[ARGV[a + 3 + w]] end
  return {kind = 'w', key = k, cost = tonumber(ARGV[a + 1]), rate = tonumber(ARGV[a + 2]),
    bs = b, at = a + 3, j = j, hz = hz, cnt = c}
end

-- parseAlone returns the item of key k of a kind that is never coalesced,
-- whose arguments start at ARGV[a]: a concurrency limit ("c"), with its
-- live leases counted, or a rolling window ("r"), with its buckets expired
-- by now walked over (header, "Rolling windows") and the earliest time it
-- admits. sk is the activity record of a limit with classes ("C", "R",
-- whose class arguments follow), else nil.
local function parseAlone(kind, k, a, sk)
  if kind == 'c' then
    local x = {kind = 'c', key = k, cost = 1, rate = tonumber(ARGV[a + 1]), T = tonumber(ARGV[a + 2]),
      lid = ARGV[a + 3], live = 0, soonest = nil, h = 0}
    if sk then cls.held(x, sk, a + 4) end
    x.live = redis.call('ZCOUNT', k, '(' .. string.format('%d', now), '+inf')
    if x.live + 1 + x.h > x.rate then
      local first = redis.call('ZRANGE', k, '(' .. string.format('%d', now), '+inf',
        'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
      x.soonest = tonumber(first[2])
    end
    return x
  end
  local P, W = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  local x = {kind = 'r', key = k, cost = tonumber(ARGV[a + 1]), rate = tonumber(ARGV[a + 2]),
    per = P, wid = W, sum = 0, old = nil, new = nil, reset = nil, gone = {}, due = now,
    rb = nil, rs = 0, rc = {}, h = 0}
  if sk then cls.held(x, sk, a + 5) end
  local v = redis.call('HMGET', k, 'sum', 'old', 'new', 'width')
  local sum, old, new = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
  if sum == nil or old == nil or new == nil or tonumber(v[4]) ~= W or new + W + P <= now then
    sum, old, new, x.reset = 0, nil, nil, true
  else
    local b = old
    while b + W + P <= now do -- stops at new at the latest
      local c = count(x, b)
      if c ~= 0 then
        sum = sum - c
        x.gone[#x.gone + 1] = field(b)
      end
      b = b + W
    end
    old = b
  end
  x.sum, x.old, x.new, x.rb, x.rs = sum, old, new, old, sum
  -- The earliest time it admits: when the oldest buckets have expired;
  -- past its horizon when the classes above hold more than expiries free.
  local e, need = now, x.cost + x.h
  while x.rs + need > x.rate and x.rb ~= nil and x.rb <= new do
    e = x.rb + W + P
    rollAt(x, e)
  end
  if x.rs + need > x.rate then e = now + P + W + 1 end
  x.due = e
  return x
end

-- upperFns makes cls: the dispatch of the upper-case kinds (parseClassed,
-- classReply) and the factories of their functions, one per concern, each
-- run by parseClassed for the first item that needs its group: the holds
-- of classes over windows, concurrency and rolling limits (holdFns), the
-- lanes of a GCRA limit with classes (laneFns), pacing (pacingFns) and
-- fair share (fairFns). The factories are inside upperFns so that a plain
-- call makes none of their closures (header, "Functions"), and a call
-- makes only the groups its items use.
local function upperFns()
  -- holdFns adds to cls what a limit with classes other than a GCRA
  -- limit (a window, a concurrency or a rolling limit; header, "Classes")
  -- needs: held, the hold the active classes above a request keep, read
  -- from the limit's activity record.
  local function holdFns()
    -- held reads, for item x of a limit with classes whose class arguments
    -- start at ARGV[a] (c, w, span, then the holds of classes 0 .. c-1; header,
    -- "Classes"), the activity record sk, and sets x.h, what the active
    -- classes above the request's keep from it, and what charging it writes
    -- (x.sk, x.sc, x.sw, x.span). A peek keeps the record read (x.seen).
    local function held(x, sk, a)
      local c = tonumber(ARGV[a])
      x.sk, x.sc, x.sw, x.span, x.h = sk, c, ARGV[a + 1] == '1', tonumber(ARGV[a + 2]), 0
      if c == 0 then return end
      local f = {}
      for q = 1, c do f[q] = q - 1 end
      local v = redis.call('HMGET', sk, unpack(f))
      for q = 1, c do
        local at = tonumber(v[q])
        if at and at > 0 and at + x.span > now then x.h = x.h + tonumber(ARGV[a + 2 + q]) end
        v[q] = at or 0
      end
      if peek then x.seen = v end
    end

    cls.held = held
  end

  -- laneFns adds to cls the lanes of a GCRA limit with classes ("G";
  -- header, "Classes"): parseLanes reads them, laneAt is when a lane
  -- admits (slotTime), chargeLanes charges the lowest lane that admits.
  local function laneFns()
    -- parseLanes returns the item of a GCRA limit with classes ("G") whose
    -- item key, the bottom lane's, is k, whose arguments start at ARGV[a] and
    -- whose other lanes' keys follow KEYS[xk] (header, "Classes"): per lane q
    -- (0-based, the top first) its key, interval and tolerance (lk, lT, ldvt),
    -- its stored tat (lst, 0 when missing) and tat (ltat), read through the
    -- view, those not read yet in one MGET.
    local function parseLanes(k, a, xk)
      local L = tonumber(ARGV[a + 4])
      local x = {kind = 'G', key = k, cost = tonumber(ARGV[a + 1]), T = tonumber(ARGV[a + 2]),
        c = tonumber(ARGV[a + 3]), L = L, lk = {}, lT = {}, ldvt = {}, lst = {}, ltat = {}, lane = -1}
      local miss
      for q = 0, L - 1 do
        local key = k
        if q < L - 1 then key = KEYS[xk + q + 1] end
        x.lk[q], x.lT[q], x.ldvt[q] = key, tonumber(ARGV[a + 5 + 2 * q]), tonumber(ARGV[a + 6 + 2 * q])
        if gval[key] == nil then
          miss = miss or {}
          miss[#miss + 1] = key
        end
      end
      if miss then
        local v = redis.call('MGET', unpack(miss))
        for y = 1, #miss do gval[miss[y]] = tonumber(v[y]) or 0 end
      end
      for q = 0, L - 1 do
        x.lst[q] = gval[x.lk[q]]
        x.ltat[q] = math.max(x.lst[q], now)
      end
      return x
    end

    -- laneAt returns the earliest time at or after t at which lane q of item
    -- x, a GCRA limit with classes, admits its cost, or nil when it cannot:
    -- the request's own lane and those below it by their GCRA; a lane above
    -- it only when full now, for a slot within one interval of the whole
    -- limit from now (header, "Classes").
    local function laneAt(x, q, t)
      local n, T, dvt = x.cost, x.lT[q], x.ldvt[q]
      if n * T > dvt then return nil end
      if q >= x.c then return math.max(t, x.ltat[q] + n * T - dvt) end
      if x.ltat[q] <= now and t <= now + x.T then return t end
      return nil
    end

    -- chargeLanes charges item x, a GCRA limit with classes, at slot t when
    -- allowed, in the call's view: the lowest lane that admits it then (its
    -- own before one above it), which it remembers (x.lane). It returns the
    -- item's remaining (the sum of the lanes') and reset after (the latest
    -- lane's), the tat set and the stored tat it replaced; a peek keeps each
    -- lane's remaining and reset after (x.lrem, x.lreset).
    local function chargeLanes(x, allowed, t)
      local at, lane, set, mark, prev = now, -1, 0, 0, 0
      if allowed then
        at = t
        for q = x.L - 1, 0, -1 do
          if laneAt(x, q, t) == t then lane = q break end
        end
        local k = x.lk[lane]
        set = math.max(x.ltat[lane], t) + x.cost * x.lT[lane]
        if not gw[k] then
          gw[k] = true
          gorder[#gorder + 1] = k
        end
        gval[k] = set
        mark, prev = set, x.lst[lane]
      end
      x.lane = lane
      local rem, reset = 0, 0
      if peek then x.lrem, x.lreset = {}, {} end
      for q = 0, x.L - 1 do
        local tat = x.ltat[q]
        if q == lane then tat = set end
        local r = math.floor((x.ldvt[q] - (math.max(tat, at) - at)) / x.lT[q])
        if r < 0 then r = 0 end
        rem = rem + r
        if tat - now > reset then reset = tat - now end
        if peek then x.lrem[q], x.lreset[q] = r, math.max(tat - now, 0) end
      end
      return rem, reset, mark, prev
    end

    cls.parseLanes, cls.laneAt, cls.chargeLanes = parseLanes, laneAt, chargeLanes
  end

  -- pacingFns adds to cls the pacing of a paced window ("W" with a paced
  -- rate; header, "Pacing"): paced, when a window of it admits (slotTime).
  local function pacingFns()
    -- paced returns the earliest time at or after t at which window k of the
    -- paced window item x admits a request that takes its count to v, or nil
    -- when that window cannot (header, "Pacing").
    local function paced(x, k, t, v)
      local s, e = x.bs[k], x.bs[k + 1]
      local D = e - s
      local F = math.floor(D / 100)
      local P = x.pr
      local Fres = math.floor(D / 10000) * P + math.floor((D % 10000) * P / 10000)
      if (x.sc or 0) == 0 or P == 0 then
        if v > x.rate then return nil end
        return math.max(t, s - (F + Fres) + math.ceil(v * (D / x.rate)))
      end
      local R = e - math.max(F, Fres)
      if v <= x.rl then
        local u = math.max(t, s - F + math.ceil(v * (D / x.rl)))
        if u < R then return u end
      end
      if v <= x.rate then return math.max(t, R, s - F + math.ceil(v * (D / x.rate))) end
      return nil
    end

    cls.paced = paced
  end

  -- fairFns adds to cls fair share (a Fair limit, "F"; header, "Fair
  -- share"): parseFair reads a Fair item's lane and active set,
  -- fairDecide runs the second and third fixpoints after slotTime's
  -- first, and fairReply books the lane and writes the active set
  -- (bookLane, record) once the reply holds the other figures.
  local function fairFns()
    -- parseFair returns the item of Fair key k (header, "Fair share")
    -- whose arguments start at ARGV[a] and whose extra keys (the tenant's
    -- lane, the active set and its weights) follow KEYS[xk], of the request
    -- whose keys start after KEYS[kb]: K and the lane read through the
    -- call's view (those not read yet in one MGET), the active set as the
    -- decision sees it (its newest score; its stale members, at most 16,
    -- oldest first; their weights, the tenant's own and W in one HMGET),
    -- the lane's interval and burst, the request's standing and its
    -- appointment.
    local function parseFair(k, a, xk, kb)
      local lk, zk, wk = KEYS[xk + 1], KEYS[xk + 2], KEYS[xk + 3]
      local cost, T, dvt, B = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
      local span, p, w, appt = tonumber(ARGV[a + 5]), ARGV[a + 6], tonumber(ARGV[a + 7]), ARGV[a + 8] == '1'
      local miss
      if gval[k] == nil then miss = {k} end
      if gval[lk] == nil then
        miss = miss or {}
        miss[#miss + 1] = lk
      end
      if miss then
        local v = redis.call('MGET', unpack(miss))
        for y = 1, #miss do gval[miss[y]] = tonumber(v[y]) or 0 end
      end
      -- The active set. No member live (or none): forgotten, as its
      -- expiry would, both keys dropped when it is written. Else the stale
      -- members lowest in (seen, part), at most 16, leave (drop); then the
      -- tenant joins or is refreshed.
      local setW, own, drop = 0, nil, {}
      local newest = redis.call('ZRANGE', zk, -1, -1, 'WITHSCORES')
      local live = #newest > 0 and tonumber(newest[2]) + span > now
      if live then
        drop = redis.call('ZRANGE', zk, '-inf', string.format('%d', now - span), 'BYSCORE', 'LIMIT', 0, 16)
        local v = redis.call('HMGET', wk, '', p, unpack(drop))
        setW, own = tonumber(v[1]) or 0, tonumber(v[2])
        for j = 1, #drop do
          setW = setW - (tonumber(v[j + 2]) or 0)
          if drop[j] == p then own = nil end
        end
      end
      local W = setW - (own or 0) + w
      if W < w then W = w end -- only a hash changed by hand: never a lane faster than the whole limit
      -- The lane: quota.FairLane, the float expression in Go's order.
      local Ti = math.min(math.ceil(T * W / w), math.floor(2251799813685248 / B))
      if Ti < 1 then Ti = 1 end
      local bi = math.max(1, math.floor(B * w / W))
      local lst = gval[lk]
      local ltat = math.max(lst, now)
      local due = ltat + cost * Ti - bi * Ti
      -- The standing: what of K it leaves (quota.FairHold, at most B - cost).
      local h = math.max(1, math.floor(B / 10))
      local held = dvt - math.min(h, B - cost) * T
      local x = {kind = 'F', key = k, cost = cost, T = T, dvt = dvt, stored = gval[k], held = held,
        fk = lk, lst = lst, ltat = ltat, Ti = Ti, bi = bi, zk = zk, wk = wk, p = p, w = w, W = W,
        setW = setW, drop = drop, live = live, span = span, appt = appt, a = now,
        inshare = not appt and due <= now + T}
      x.tat = math.max(x.stored, now)
      if x.inshare then
        x.fd, x.hz = dvt, now + T
      elseif appt then
        x.fd, x.hz = held, now
      else
        -- Over its share: quota.FairOverHold while others are active and
        -- its lane could book it within the span (room: admitted, it
        -- charges the lane), quota.FairIdleHold once it could not.
        local leave = math.min(math.max(2 * h, math.floor(B / 2)), B - cost)
        x.room = W > w and due <= now + span
        if not x.room and W > w then leave = math.max(leave, B - cost - 2 * h) end
        x.fd, x.hz = dvt - leave * T, now
      end
      x.own = x.fd
      if not appt then x.a = math.max(now, due) end
      cls.fkb = kb
      return x, a + 9, xk + 3
    end

    -- fairDecide follows the first fixpoint (t, decider, ok; full, the
    -- full concurrency item) of the request with Fair items whose n items
    -- are decided: when it stopped (beyond) with no lease cap full, a
    -- second one from the latest of now, the pause's end (paused) and the
    -- appointments, every Fair item at an appointment's tolerance with no
    -- horizon, says whether the request is deferred (its time within
    -- maxwait); if not, a third one, every Fair item at the request's own
    -- tolerance with no horizon, gives a denial's time. It returns the
    -- time and the decider, and keeps whether the request is deferred for
    -- fairReply (cls.deferred). slotTime runs the fixpoints. A peek only
    -- reads: it runs neither. Each Fair item is then a GCRA item of K for
    -- the reply (replyItems).
    local function fairDecide(slotTime, n, t, decider, ok, full, paused, maxwait)
      local deferred = false
      if not ok and full == nil and not peek then
        local t0, d0 = now, -1
        if paused > t0 then t0, d0 = paused, -2 end
        for i = 1, n do
          local x = items[i]
          if x.kind == 'F' then
            x.fd, x.hz = x.held, nil
            if x.a > t0 then t0, d0 = x.a, i - 1 end
          end
        end
        local ok2
        t, decider, ok2 = slotTime(n, paused, t0, d0)
        deferred = ok2 and t - now <= maxwait
        if not deferred then
          t0, d0 = now, -1
          if paused > t0 then t0, d0 = paused, -2 end
          for i = 1, n do
            local x = items[i]
            if x.kind == 'F' then x.fd = x.own end
          end
          t, decider = slotTime(n, paused, t0, d0)
        end
      end
      for i = 1, n do
        if items[i].kind == 'F' then items[i].kind = 'g' end
      end
      cls.deferred = deferred
      return t, decider
    end

    -- bookLane charges Fair item x's lane its cost at t, a GCRA charge in
    -- the call's view, and returns the tat set.
    local function bookLane(x, t)
      local set = math.max(x.ltat, t) + x.cost * x.Ti
      if not gw[x.fk] then
        gw[x.fk] = true
        gorder[#gorder + 1] = x.fk
      end
      gval[x.fk] = set
      return set
    end

    -- record writes Fair item x's active set as its decision found it, the
    -- tenant seen now: at once, so that the next request of the call reads
    -- it. A set with no member live is dropped whole first (with what its
    -- weights may still hold). Both keys expire the span past this write.
    local function record(x)
      if not x.live then
        redis.call('UNLINK', x.zk, x.wk)
      elseif #x.drop > 0 then
        redis.call('ZREM', x.zk, unpack(x.drop))
        redis.call('HDEL', x.wk, unpack(x.drop))
      end
      redis.call('ZADD', x.zk, now, x.p)
      redis.call('HSET', x.wk, x.p, x.w, '', x.W)
      local px = ttl(x.span)
      redis.call('PEXPIRE', x.zk, px)
      redis.call('PEXPIRE', x.wk, px)
    end

    -- fairReply does, for the n items of a request with Fair items decided
    -- at t (allowed, deferred or neither), what the Fair items add once the
    -- other figures are in reply: reply[1] is 2 for a deferral; an
    -- admission within its share charges the lane at t, a deferral without
    -- Appointment books it at the appointment, and both record the tenant
    -- in the active set; it appends per Fair item the lane's mark and prev
    -- (0 when it was not charged), interval and burst, and for a peek the
    -- active set's members and weight after the decision's expiry (before
    -- the tenant joins), how far the lane is booked past now and how long
    -- until it would give a request of cost 1 its appointment.
    local function fairReply(reply, n, allowed, t)
      local deferred = cls.deferred
      if deferred then reply[1] = 2 end
      for i = 1, n do
        local x = items[i]
        if x.fk then
          local mark, prev = 0, 0
          if allowed and (x.inshare or x.room) then
            mark, prev = bookLane(x, t), x.lst
          elseif deferred and not x.appt then
            bookLane(x, x.a)
          end
          if allowed or deferred then record(x) end
          local r = #reply
          reply[r + 1], reply[r + 2], reply[r + 3], reply[r + 4] = mark, prev, x.Ti, x.bi
          if peek then
            local members = 0
            if x.live then members = redis.call('ZCARD', x.zk) - #x.drop end
            reply[r + 5], reply[r + 6] = members, x.setW
            reply[r + 7] = math.max(x.lst - now, 0)
            reply[r + 8] = math.max(x.ltat + (1 - x.bi) * x.Ti - now, 0)
          end
        end
      end
    end

    cls.parseFair, cls.fairDecide, cls.fairReply = parseFair, fairDecide, fairReply
  end

  -- classReply does, for the n items of a request decided (allowed or
  -- not) at t, whose keys start after KEYS[kb], what items of the
  -- upper-case kinds add once their figures are in reply: an admission
  -- of a class above the bottom records its activity, now, for
  -- ActiveFor; and it appends to reply (header, "Reply") per GCRA item
  -- with classes the lane charged (-1 when denied), and for a peek each
  -- lane's remaining and reset after, and per held item how long each
  -- class read stays active; then, for a request with Fair items, what
  -- fairReply does.
  local function classReply(reply, n, allowed, t, kb)
    for i = 1, n do
      local x = items[i]
      if x.kind == 'G' then
        reply[#reply + 1] = x.lane
        if peek then
          for q = 0, x.L - 1 do
            reply[#reply + 1] = x.lrem[q]
            reply[#reply + 1] = x.lreset[q]
          end
        end
      elseif x.sk then
        if allowed and x.sw then
          redis.call('HSET', x.sk, x.sc, now)
          redis.call('PEXPIRE', x.sk, ttl(x.span))
        end
        if peek then
          for q = 1, x.sc do
            local left = 0
            if x.seen[q] > 0 then left = math.max(x.seen[q] + x.span - now, 0) end
            reply[#reply + 1] = left
          end
        end
      end
    end
    if cls.fkb == kb then cls.fairReply(reply, n, allowed, t) end
  end

  -- parseClassed returns the item of key k of a limit with classes, a
  -- paced window or a Fair limit (an upper-case kind) whose arguments
  -- start at ARGV[a], whose extra keys follow KEYS[xk], of the request
  -- whose keys start after KEYS[kb], the ARGV index after them and the
  -- last extra key it read; or nil and an error reply. Like parseItems,
  -- it fails an item whose key the call charged as another kind.
  local function parseClassed(kind, k, a, xk, kb)
    if ((kind == 'G' or kind == 'F') and winc ~= nil and winc[k] ~= nil) or (kind == 'W' and gw[k]) then
      return nil, a, xk, redis.error_reply('WRONGTYPE throttle: ' .. k .. ' was charged as a limit of another kind in this call')
    end
    local x
    if kind == 'F' then
      if cls.parseFair == nil then fairFns() end
      return cls.parseFair(k, a, xk, kb)
    elseif kind == 'G' then
      if cls.parseLanes == nil then laneFns() end
      x = cls.parseLanes(k, a, xk)
      return x, a + 5 + 2 * x.L, xk + x.L - 1
    elseif kind == 'W' then
      local err
      x, err = parseWindow(k, a)
      if x == nil then return nil, a, xk, err end
      x.kind, x.rl, x.pr, x.h = 'W', tonumber(ARGV[a + 8]), tonumber(ARGV[a + 9]), 0
      if x.rl > 0 and cls.paced == nil then pacingFns() end
      if ARGV[a + 10] ~= '1' then return x, a + 11, xk end
      if cls.held == nil then holdFns() end
      cls.held(x, KEYS[xk + 1], a + 11)
      return x, a + 14 + x.sc, xk + 1
    end
    -- 'C', 'R'
    if cls.held == nil then holdFns() end
    x = parseAlone(string.lower(kind), k, a, KEYS[xk + 1])
    if kind == 'C' then a = a + 4 else a = a + 5 end
    return x, a + 3 + x.sc, xk + 1
  end


  cls = {parseClassed = parseClassed, classReply = classReply}
end

-- parseItems fills items with the n items of the request whose keys start
-- after KEYS[kb] and whose items' arguments start at ARGV[a] (np pause
-- keys follow its item keys, then its extra keys), GCRA and window
-- state read through the view. It returns the rates its learning items
-- run at (header, "Learning"; nil when it has none), or nil and an error
-- reply. A request that meets a key the call charged as a limit of
-- another kind (a reload changed the limit's kind, with requests in
-- flight) fails alone with WRONGTYPE before it charges anything, as it
-- would alone once the other's write was in: the flush writes each key as
-- one kind only.
local function parseItems(kb, a, n, np)
  -- xk: the last extra key (learned, lanes, activity records) read, once
  -- one is.
  local learned, xk
  for i = 1, n do
    local kind, k, x = ARGV[a], KEYS[kb + i], nil
    local gcra = kind == 'g' or kind == 'l' or kind == 'a'
    if (gcra and winc ~= nil and winc[k] ~= nil) or (kind == 'w' and gw[k]) then
      return nil, redis.error_reply('WRONGTYPE throttle: ' .. k .. ' was charged as a limit of another kind in this call')
    end
    if gcra then
      local stored = gval[k]
      if stored == nil then
        stored = tonumber(redis.call('GET', k)) or 0
        gval[k] = stored
      end
      x = {kind = 'g', key = k, cost = tonumber(ARGV[a + 1]), T = tonumber(ARGV[a + 2]),
        dvt = tonumber(ARGV[a + 3]), stored = stored, tat = math.max(stored, now)}
      if kind == 'l' then
        -- Run at the rate its learned key records, clamped to [N, hi].
        local P, N, B, hi = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6]), tonumber(ARGV[a + 7])
        learned = learned or {}
        xk = (xk or kb + n + np) + 1
        local L = tonumber(redis.call('HGET', KEYS[xk], 'limit')) or N
        L = math.min(math.max(L, N), hi)
        if L ~= N then
          x.T = math.floor((P + L - 1) / L)
          x.dvt = math.floor(B * L / N) * x.T
        end
        learned[#learned + 1] = L
        a = a + 4
      elseif kind == 'a' then
        -- Quota taken ahead: charged no earlier than now + lead on its
        -- schedule (package quota's Request.Lead).
        x.lead = tonumber(ARGV[a + 4])
        x.tat = math.max(stored, now + x.lead)
        a = a + 1
      end
      a = a + 4
    elseif kind == 'w' then
      local err
      x, err = parseWindow(k, a)
      if x == nil then return nil, err end
      a = a + 8
    elseif kind == 'c' then
      x = parseAlone(kind, k, a)
      a = a + 4
    elseif kind == 'r' then
      x = parseAlone(kind, k, a)
      a = a + 5
    else
      if cls == nil then upperFns() end
      local err
      x, a, xk, err = cls.parseClassed(kind, k, a, xk or kb + n + np, kb)
      if x == nil then return nil, err end
    end
    items[i] = x
  end
  return learned, nil
end

-- last is the request decided before this one in the call, as {kb, ab,
-- paused, v}, when it parsed whole and has only GCRA and window items: a
-- request with the same arguments and keys (concurrent callers of one
-- stack) reuses its items and its pauses instead of parsing them again.
local last

-- sameAsLast reports whether the request at (kb, ab) has last's arguments
-- and keys. Lua interns strings, so each comparison is a pointer's.
local function sameAsLast(kb, ab)
  if last == nil or ARGV[ab] ~= ARGV[last.ab] then return false end
  local lab, lkb = last.ab, last.kb
  for i = 1, tonumber(ARGV[ab]) - 1 do
    if ARGV[ab + i] ~= ARGV[lab + i] then return false end
  end
  for i = 1, tonumber(ARGV[ab + 2]) + tonumber(ARGV[ab + 3]) do
    if KEYS[kb + i] ~= KEYS[lkb + i] then return false end
  end
  return true
end

-- load readies items for the request at (kb, ab), with n items and np
-- pauses, and reads its pauses: last's, when it has last's arguments and
-- keys (a GCRA item's state read again from the view; a window item's
-- counts already follow it, a charge adds to both), else parsed, the
-- pause keys read in one MGET (only pause.lua writes them: strings), and
-- remembered as last when a request after it may reuse them (a call of
-- several requests; stacks of GCRA and window limits without learning).
-- It returns the learning items' rates (or nil), the latest paused-until
-- and the pause values read; or nil and an error reply.
local function load(kb, ab, n, np)
  if sameAsLast(kb, ab) then
    for i = 1, n do
      local x = items[i]
      if x.kind == 'g' then
        x.stored = gval[x.key]
        x.tat = math.max(x.stored, now + (x.lead or 0))
      end
    end
    return nil, last.paused, last.v
  end
  last = nil
  local learned, err = parseItems(kb, ab + 5, n, np)
  if err ~= nil then return nil, nil, nil, err end
  local paused, v = 0, nil
  if np > 0 then
    v = redis.call('MGET', unpack(KEYS, kb + n + 1, kb + n + np))
    for p = 1, #v do
      local u = tonumber(v[p])
      if u and u > paused then paused = u end
    end
  end
  if m == 1 or learned ~= nil then return learned, paused, v end
  for i = 1, n do
    local kind = items[i].kind
    if kind ~= 'g' and kind ~= 'w' then return learned, paused, v end
  end
  last = {kb = kb, ab = ab, paused = paused, v = v}
  return learned, paused, v
end

-- slotTime returns the earliest time t at which all n items admit the
-- request, not before paused; the item that set it (0-based, -1 none, -2
-- the pause); whether it was found within 16 rounds and every item's
-- horizon (a GCRA or rolling limit moves t at most once, a window at most
-- once per window of its horizon); and the first concurrency item with no
-- lease left, if any, which takes no part in the fixpoint: a limit with a
-- free lease admits at any time. With from, the fixpoint starts at from,
-- set by by, and the pause has drained already: a Fair item's second and
-- third fixpoints (fairDecide).
local function slotTime(n, paused, from, by)
  local t, decider, ok = now, -1, false
  if from then
    t, decider = from, by
  else
    -- A pause drains the GCRA buckets it holds back: at its end each has
    -- room for this request alone, drained by at most quota.PauseDrain
    -- (package quota's doc, "After a pause").
    if paused > 0 and not peek then
      for i = 1, n do
        local x = items[i]
        if x.kind == 'g' or x.kind == 'F' then
          x.tat = math.max(x.tat, paused + math.min(x.dvt, drain) - x.cost * x.T)
        elseif x.kind == 'G' then
          for q = 0, x.L - 1 do
            x.ltat[q] = math.max(x.ltat[q], paused + math.min(x.ldvt[q], drain) - x.cost * x.lT[q])
          end
        end
      end
    end
    if paused > t then t, decider = paused, -2 end
  end
  for _ = 1, 16 do
    local moved, beyond = false, false
    for i = 1, n do
      local x = items[i]
      local kind, e = x.kind, t
      if kind == 'g' then
        e = x.tat + x.cost * x.T - x.dvt
      elseif kind == 'r' then
        e = math.max(t, x.due)
        beyond = e > now + x.per + x.wid
      elseif kind == 'w' then
        e, beyond = windowFrom(x, t)
      elseif kind == 'G' then
        e = nil
        for q = 0, x.L - 1 do
          local f = cls.laneAt(x, q, t)
          if f ~= nil and (e == nil or f < e) then e = f end
        end
        if e == nil then e, beyond = t, true end
      elseif kind == 'W' then
        local k = slot(x, t)
        if k == nil then
          beyond = true
        else
          local v, f = x.cnt[k] + x.cost + x.h, nil
          if x.rl > 0 then
            f = cls.paced(x, k, t, v)
          elseif v <= x.rate then
            f = t
          end
          if f == nil then
            e = x.bs[k + 1]
            beyond = e >= x.bs[x.hz]
          else
            e = f
          end
        end
      elseif kind == 'F' then
        e = x.tat + x.cost * x.T - x.fd
        beyond = x.hz ~= nil and (e > x.hz or t > x.hz)
      end
      if e > t then t, decider, moved = e, i - 1, true end
      if beyond then break end
    end
    if beyond then break end
    if not moved then ok = true break end
  end
  for i = 1, n do
    local x = items[i]
    if x.kind == 'c' and x.live + 1 + x.h > x.rate then return t, i - 1, ok, x end
  end
  return t, decider, ok, nil
end

-- chargeAlone charges item x of a kind that is never coalesced at slot t
-- when allowed, writing its key at once, and returns its remaining, reset
-- after and mark: a concurrency limit adds its lease, expiring at t plus
-- its TTL; a rolling window counts in the bucket holding t.
local function chargeAlone(x, allowed, t)
  local rem, reset, mark = 0, 0, 0
  if x.kind == 'c' then
    local held = x.live
    if allowed then
      held = held + 1
      redis.call('ZREMRANGEBYSCORE', x.key, '-inf', now)
      redis.call('ZADD', x.key, t + x.T, x.lid)
    end
    if held > 0 then
      local latest = redis.call('ZRANGE', x.key, 0, 0, 'REV', 'WITHSCORES')
      reset = tonumber(latest[2]) - now
      if allowed then redis.call('PEXPIRE', x.key, ttl(reset)) end
    end
    return x.rate - held, reset, 0
  end
  local W, P, new = x.wid, x.per, x.new
  rem = x.rate - x.sum
  if allowed then
    -- What it counts at t before this charge: the charged bucket holds t,
    -- so it has not expired then.
    rem = x.rate - rollAt(x, t) - x.cost
    local b = t - math.fmod(t, W)
    local old = x.old
    if old == nil or b < old then old = b end
    if new == nil or b > new then new = b end
    if x.reset then redis.call('DEL', x.key) end
    if #x.gone > 0 then redis.call('HDEL', x.key, unpack(x.gone)) end
    redis.call('HINCRBY', x.key, field(b), x.cost)
    redis.call('HSET', x.key, 'sum', x.sum + x.cost, 'old', old, 'new', new, 'width', W)
    redis.call('PEXPIRE', x.key, ttl(new + W + P - now))
    mark = b
  end
  if new then reset = new + W + P - now end
  return rem, reset, mark
end

-- peekItem appends to reply, from index r on, the figures a peek adds for
-- item x, which has rem remaining (see Reply).
local function peekItem(reply, r, x, rem)
  local used, ahead, debt, soon = 0, 0, 0, 0
  if x.kind == 'g' then
    used = math.floor(x.dvt / x.T) - rem
    local over = x.tat - now - x.dvt
    if over > 0 then debt = math.ceil(over / x.T) end
  elseif x.kind == 'G' then
    for q = 0, x.L - 1 do
      used = used + math.floor(x.ldvt[q] / x.lT[q])
      local over = x.ltat[q] - now - x.ldvt[q]
      if over > 0 then debt = debt + math.ceil(over / x.lT[q]) end
    end
    used = used - rem
    reply[r + 1], reply[r + 2], reply[r + 3], reply[r + 4] = used, ahead, debt, soon
    reply[r + 5] = math.min(redis.call('EXISTS', unpack(x.lk, 0, x.L - 1)), 1)
    return
  elseif x.kind == 'c' then
    used = x.live
    if used > 0 then
      local first = redis.call('ZRANGE', x.key, '(' .. string.format('%d', now), '+inf',
        'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
      soon = tonumber(first[2]) - now
    end
  elseif x.kind == 'r' then
    if x.new ~= nil then
      local W = x.wid
      for b = now - math.fmod(now, W) + W, x.new, W do ahead = ahead + count(x, b) end
      used = x.sum - ahead
    end
  else
    used = x.cnt[x.j]
    for k = x.j + 1, x.hz - 1 do ahead = ahead + x.cnt[k] end
    if used > x.rate then debt = used - x.rate end
  end
  reply[r + 1], reply[r + 2], reply[r + 3], reply[r + 4] = used, ahead, debt, soon
  reply[r + 5] = redis.call('EXISTS', x.key)
end

-- replyItems appends to reply each of the n items' figures (header,
-- "Reply"), charging each at slot t when allowed: GCRA and window items
-- in the call's view, written by flush.
local function replyItems(reply, n, allowed, t)
  for i = 1, n do
    local x = items[i]
    local kind, rem, reset, mark, prev = x.kind, 0, 0, 0, 0
    if kind == 'g' then
      local T, dvt = x.T, x.dvt
      if allowed then
        local set = math.max(x.tat, t) + x.cost * T
        if not gw[x.key] then
          gw[x.key] = true
          gorder[#gorder + 1] = x.key
        end
        gval[x.key] = set
        rem, reset, mark, prev = math.floor((dvt - (set - t)) / T), set - now, set, x.stored
      else
        rem, reset = math.floor((dvt - (x.tat - now)) / T), x.tat - now
      end
    elseif kind == 'w' or kind == 'W' then
      local b, k = x.bs, x.j
      if allowed then
        k = slot(x, t)
        local f = ARGV[x.at + k]
        local inc = winc[x.key]
        if inc == nil then
          inc = {}
          winc[x.key] = inc
          worder[#worder + 1] = x.key
        end
        inc[f] = (inc[f] or 0) + x.cost
        wval[x.key][f] = wval[x.key][f] + x.cost
        mark = b[k]
        -- The first charge of a window drops the windows that have ended
        -- and sets the key's expiry (flush). A later charge of the same
        -- window has nothing to do: the key's TTL covers every window with
        -- a count (only this script and after.lua write counts, each with
        -- that TTL), and no window has ended since the first charge of the
        -- window of now.
        if x.cnt[k] == 0 then
          local cl = wclean[x.key]
          if cl == nil or b[k + 1] > cl.last then
            wclean[x.key] = {b = b, j = x.j, at = x.at, last = b[k + 1]}
          end
        end
        x.cnt[k] = x.cnt[k] + x.cost
      end
      rem, reset = x.rate - x.cnt[k], b[k + 1] - now
    elseif kind == 'G' then
      rem, reset, mark, prev = cls.chargeLanes(x, allowed, t)
    else
      rem, reset, mark = chargeAlone(x, allowed, t)
    end
    if rem < 0 then rem = 0 end
    if reset < 0 then reset = 0 end
    local r = 4 * i
    reply[r + 1], reply[r + 2], reply[r + 3], reply[r + 4] = rem, reset, mark, prev
    if peek then peekItem(reply, 4 + 4 * n + 5 * (i - 1), x, rem) end
  end
end

-- decide decides the request whose keys start after KEYS[kb] and whose
-- arguments start at ARGV[ab] and returns its reply.
local function decide(kb, ab)
  local maxwait = tonumber(ARGV[ab + 1])
  local n, np = tonumber(ARGV[ab + 2]), tonumber(ARGV[ab + 3])
  local learned, paused, v, err = load(kb, ab, n, np)
  if err ~= nil then return err end
  local t, decider, ok, full = slotTime(n, paused)
  local allowed = not peek and full == nil and ok and t - now <= maxwait
  if cls and cls.fkb == kb then
    t, decider = cls.fairDecide(slotTime, n, t, decider, ok, full, paused, maxwait)
  end
  if full ~= nil and full.soonest > t then t = full.soonest end
  local reply = {0, now, t, decider}
  if allowed then reply[1] = 1 end
  replyItems(reply, n, allowed, t)
  if peek then
    for p = 1, np do
      local u = tonumber(v[p]) or 0
      if u <= now then u = 0 end
      reply[4 + 9 * n + p] = u
    end
  end
  if learned then
    for _, L in ipairs(learned) do reply[#reply + 1] = L end
  end
  if cls then cls.classReply(reply, n, allowed, t, kb) end
  return reply
end

-- flush writes what the call charged in its view: each GCRA key once,
-- then per window key its increments and, when it had a window's first
-- charge, its clean-up.
local function flush()
  for _, k in ipairs(gorder) do
    local v = gval[k]
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
  local ok, rep = pcall(decide, kb, ab)
  if not ok then
    if type(rep) ~= 'table' then rep = redis.error_reply(tostring(rep)) end
  end
  out[r] = rep
  kb = kb + tonumber(ARGV[ab + 2]) + tonumber(ARGV[ab + 3]) + tonumber(ARGV[ab + 4])
  ab = ab + tonumber(ARGV[ab])
end
flush()
return out
