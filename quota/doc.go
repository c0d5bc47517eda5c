// Package quota decides requests against stacks of rate limits and calendar
// quotas, atomically, in one step per decision.
//
// A Request names a stack of Items (a Limit and the key of its state for
// this request's scope), a cost and the longest wait the caller accepts. A
// Store finds the earliest time t* at which every limit of the stack, and
// every pause the request names, admits the request. If t* - now is within
// MaxWait it charges every limit for t* and returns an admitted
// Reservation: the caller sleeps until t* and goes, and a fleet of callers
// is served in arrival order without polling or locks. Otherwise it changes
// nothing and says when to retry. A request refused by one limit consumes
// nothing of the others.
//
// This package holds the limit math, the Store interface, the in-process
// MemoryStore and the shared conformance suite (package quotatest). The
// Redis store lives in package redisstore. The package depends on the
// standard library only.
//
// # The decision
//
// All times are integer microseconds on the store's clock. For each limit:
//
//   - GCRA (Rate per Period, Burst): emission interval T = ceil(Period/Rate),
//     tolerance DVT = Burst*T. With tat = max(stored_tat, now), the limit
//     admits a request of cost c at any time >= tat + c*T - DVT. Charging it
//     at t sets stored_tat = max(tat, t) + c*T.
//   - Window (Rate per calendar window): a count per window. The limit admits
//     at t when count(window(t)) + c <= Rate; otherwise the earliest time is
//     the start of the next window. Charging it at t adds c to window(t),
//     so a reservation that waits into the next window is counted there.
//   - Rolling window (Rate per Period, any trailing Period): buckets of
//     width W = ceil(Period/RollingBuckets), aligned to multiples of W
//     since the epoch. An event charged at t counts in the bucket b that
//     holds t until b + W + Period, the bucket's end plus a Period: past
//     any trailing Period that could hold the event. With S(x) the sum of
//     the buckets still counted at x, the limit admits at t when S(t) + c
//     <= Rate. S only falls as time passes, so the earliest time >= t is t
//     or the expiry of a bucket (oldest first). Charging it at t adds c
//     to t's bucket, which may lie ahead of now for a waiting reservation:
//     S counts such buckets too. It never admits more than Rate in any
//     trailing Period (S(x) is at least the events in (x - Period, x] for
//     every x from the slot on, and an event changes no earlier count);
//     it holds each event at most W longer than exact, so a steady demand
//     is admitted at least Rate*(1 - 1/RollingBuckets) per Period. It
//     looks at most Period + W ahead: a slot later than that is denied,
//     which bounds a key to 2*RollingBuckets+2 buckets.
//   - A pause admits at any time >= its paused-until. It also drains
//     every GCRA limit of the request, in force or not: with P the latest
//     paused-until of the request's pauses, tat = max(tat, P +
//     min(DVT, PauseDrain) - c*T) (see "After a pause").
//   - Concurrency (Rate leases, TTL Period): see "Leases". It takes no
//     part in the fixpoint.
//
// The store finds t* by a fixpoint: start at t = max(now, paused-until); ask
// every limit in order for the earliest time >= t it admits; if one is
// later, move t there (that limit is the decider) and ask again. Limits only
// ever move t forward, a GCRA or rolling limit at most once (each admits
// at every time from its earliest on), and a window moves it a whole
// window at a time, so this ends within a few rounds. A store looks at most three windows ahead
// (the one holding now and the two after it): a request that no window up
// to the end of the third admits is denied with RetryAfter at that end.
//
// Per limit the Result gives Remaining and ResetAfter; see Status. Keys
// expire when their state is back to idle (a GCRA tat in the past, a window
// that has ended, every rolling bucket expired), so idle scopes cost no memory.
//
// # After a pause
//
// A pause is set when the vendor throttled a request: the fleet sent more
// than the vendor would take (its account is shared, or its limit is lower
// than configured). Time passing during the pause refills every bucket, so
// without more, the requests held back, and those that arrive when it
// ends, would go at the pause's end as one burst, which the vendor
// throttles again. So a pause drains the GCRA buckets of the requests it
// holds back: at the pause's end P, a limit's bucket holds room for the
// request being decided (cost c) and nothing more, tat >= P + DVT - c*T.
// The first request still goes at P, and the ones after it follow one per
// T, at the limit's rate, regaining the burst only as the bucket refills.
// A bucket is drained by at most PauseDrain's worth of refill (a minute):
// the pause says the vendor's short-term rate was exceeded, so the bursts
// of per-second and per-minute limits go, while an hourly limit keeps most
// of its burst.
//
// The drain only raises a tat, so it never admits more than the limits
// would. It is computed from the pause's paused-until alone, which the
// decision reads anyway, in force or not: a request decided after the
// pause has ended is drained too (with fail-fast callers, nothing is
// admitted during a pause), and once now passes P + PauseDrain the drain
// is below now and changes nothing. So a store keeps a pause PauseDrain
// past its end, and a longer TTL never changes a decision. The first
// reservation after the pause stores the drained tat, which paces the
// ones after it. Calendar windows are not drained: a window's count is
// already the vendor's count of that window.
//
// # A pause set while requests wait
//
// A reservation made before a pause is not moved by it: its slot was
// decided. So a caller that waits for its slot asks, when the slot comes,
// whether a pause of its request now holds it back, and if so decides
// again (the store then puts it after the pause). A Store that is a
// PauseNotifier answers from what the process knows, with no round trip:
// the pauses it set, at once, and those the fleet set, announced by the
// store while the process watches (the Redis store through a PUBLISH from
// the script that pauses; the memory store knows its own). A pause is held
// for its length from when the process hears of it, on the process's
// clock.
//
// # Cancel
//
// A waiter that will not use its slot cancels it (Reservation.Cancel). If
// the slot time has come, nothing comes back. Otherwise each window gives c
// back to the window it was charged to, while that window has not ended;
// each rolling window gives c back to the bucket it was charged to (still
// counted: it holds the slot, which has not come); and each GCRA limit compares its stored tat with the tat this
// reservation set (its mark; the reservation also remembers prev, the
// stored tat it replaced):
//
//   - Equal: this is the last reservation charged to the key, every later
//     one is gone. The tat goes back to prev, and on over every hole (see
//     below) it reaches: where a hole's mark equals the tat, to that hole's
//     prev. The state is then exactly as if none of those reservations had
//     been made, whatever limit or pause set their slots.
//   - Above: a later reservation holds the key. Nothing comes back now: its
//     slot may have been set by another limit or a pause above this tat (a
//     jump), and then it needs the tat it set even without this charge. The
//     charge is kept as a hole (mark, prev) until the tat comes back down
//     to its mark, that is until the later reservations are cancelled too,
//     or until time passes it (a hole whose mark has passed is dropped).
//     A hole joins the holes right before and after it in the key's queue
//     into one run, which gives back what they would have, so no cancel
//     goes back over more than one hole.
//   - Below: the state was forgotten or reset since; nothing comes back.
//
// Equal means no later reservation is live because the tat only grows
// through reservations (each sets it above the one it read) and only falls
// through such rollbacks, which stop at a live reservation's mark; so the
// stored tat is always the mark of the latest reservation not given back.
//
// So after any set of cancels, in any order, what stays reserved is what
// the live reservations need, except that the slots of cancelled
// reservations made before a live one stay reserved until it is cancelled
// too or time passes them: at most the longest max wait. This never
// over-admits.
//
// # Leases
//
// A Concurrency limit caps the requests in flight: each admitted request
// takes a lease, held from the decision until the caller releases it
// (Reservation.Release, when the response is done) or it expires, Period
// (the lease TTL) after the slot or after its last renewal
// (Reservation.Renew). Expiry is what gives back the leases of a process
// that died; a live holder renews its leases well within the TTL.
//
// Unlike the other kinds, a lease limit cannot say when it will admit: a
// lease comes back when its holder finishes, which no store knows. So it
// takes no part in the fixpoint. A limit with a free lease admits at any
// time; one whose leases are all held denies the request whatever its max
// wait, is its decider, and gives as RetryAfter the later of the stack's
// slot and its soonest lease expiry (the earliest time a lease is known to
// come back, should its holder neither release nor renew). A store never
// grants a lease ahead of time: the caller that accepts a wait waits
// itself and decides again ("Waiting for a lease").
//
// A request holds one lease per Concurrency limit whatever its cost, and
// all of them under one lease id. A waiter holds its leases while it
// waits, and Cancel gives them back whenever it comes.
//
// # Waiting for a lease
//
// A caller refused by a full Concurrency limit that may still wait (the
// transport, within its max wait) waits for a lease to come back and then
// decides again. A lease comes back at one of two moments: its holder
// releases it (or cancels its reservation), or it expires. The store
// cannot announce an expiry, but the refusal's RetryAfter says when the
// soonest one falls, so the caller sets a timer for it. A release it can
// announce: a Store that is also a LeaseNotifier queues the waiters of
// this process per key, in arrival order, and wakes the first one per
// lease released (the memory store directly; the Redis store through a
// PUBLISH from the script that releases, to every process subscribed).
// Nothing polls: a waiter decides again only when a lease may be free.
//
// A waiter joins the queue before the decision it will wait on, so a
// release in between still wakes it; a woken waiter that finds the lease
// taken again rejoins at its place; one that leaves without using its
// wake hands it to the next. The refused decisions charged nothing, so
// each new decision is a whole one, of every limit of the stack.
//
// What is fair: within a process, waiters get leases in arrival order,
// one per release, except that a request arriving when a lease is free
// takes it without queueing (it never saw a full limit). Across processes
// there is no queue: a release wakes the first waiter of every process
// waiting on the key, and whichever decides first gets the lease (another
// process's new request may, too); the others wait again, keeping their
// places at home. So a waiter can lose any number of times, bounded by
// its max wait, after which it is refused like any other request. A lost
// notification (a Redis reconnect; an
// expiry) delays a waiter to the next release or its timer, never admits
// more than the limit: only a decision admits.
//
// # Settle
//
// A request whose cost is only known after its response (a model API's
// tokens, a GraphQL query's actual cost) reserves an estimate and settles
// the actual cost afterwards (Reservation.Settle), in one step. With delta
// = actual - estimate, per limit:
//
//   - GCRA, an excess (delta > 0): the tat moves to max(tat, now) +
//     delta*T, even past the tolerance: a debt that delays the requests
//     after it, so that only the one request already sent exceeds the
//     limit. It moves no further than now + Limit.DebtReach (the period
//     plus the tolerance), so the next request waits at most one period
//     (and its own interval) for any debt, however many settles pile up:
//     by then the vendor's limit has refilled.
//   - GCRA, a refund: only while the stored tat is still the mark this
//     reservation set, that is while no later reservation was placed on
//     it (the rule of Cancel's "Equal" case, and for the same reason: a
//     later reservation's slot may have been set by another limit or a
//     pause above this tat, and lowering the tat under it could let the
//     next requests exceed the limit). The tat becomes mark + delta*T, as
//     if the reservation had cost actual. Otherwise the refund is dropped:
//     never over-admitting, at the price of charging the estimate to a
//     busy key.
//   - Window: the count of the window charged moves by delta while that
//     window is open, never below zero; an excess may take it past the
//     rate, a debt that refuses requests until the window ends.
//   - Rolling window, and Concurrency: not settled; the estimate stays
//     charged (a rolling bucket's count cannot tell this reservation's
//     share from the later ones', and a lease counts 1 whatever the cost).
//
// An actual cost above the limit's rate (Implausible: more than it admits
// in one period or window, for a learning limit at the rate it was
// decided at) is malformed, since no vendor enforcing the limit could
// have served it to one request: that limit keeps its estimate. So one
// response's usage figure blocks a GCRA limit for at most a period, and a
// window for at most the rest of the window, with a figure the window
// could have held.
//
// # Sync
//
// The vendor is the one who counts: its account may be shared with
// traffic the store never sees, and a store may forget its state (a Redis
// restart). Reservation.Sync gives the store what the vendor said on the
// response to a reservation's request: for some limits of the stack, how
// many more events of cost 1 it would admit (R, in the limit's units). The
// store drains each such limit so that it admits at most R more at once,
// on top of the reservations made after this one, and never loosens it:
//
//   - GCRA: after = max(0, stored_tat - mark) is what the reservations
//     charged after this one occupy (tats only grow through reservations,
//     so the stored tat above this reservation's mark is theirs). The
//     stored tat becomes max(stored_tat, now + DVT - R*T + after) when
//     that is later than both the stored tat and now. The limit then
//     refills at its own rate: the refill model is the limit's, not the
//     vendor's.
//   - Window: the window charged keeps its count at mark (the count right
//     after this reservation's charge); after = max(0, count - count at
//     mark), and the count becomes max(count, Rate - R + after). Once that
//     window has ended the vendor speaks of another one, and nothing
//     changes.
//
// A response sent before later reservations reached the vendor did not
// count them; keeping them (after) means a stale response never undoes a
// newer charge. A later reservation the vendor did count is counted twice,
// which only drains more. A sync raises a tat above every live mark, so a
// later Cancel of an earlier reservation finds the tat above its mark and
// gives nothing back (it becomes a hole), and one of a later reservation
// goes back at most to the synced tat: Cancel never undoes a sync.
//
// # Learning
//
// A vendor's plan limit is often unknown until a response states it, and
// it changes with the plan. A GCRA limit with Learn set runs at the limit
// the vendor states, within bounds: its Rate and Burst are the floor, and
// an Observed.Limit L given to Sync (the vendor's figure in the limit's
// units, headroom applied) is recorded in the store, beside the limit's
// state, for every later decision of every process: one more read per
// decision of a learning limit, none for the others. A decision runs the
// limit at rate L clamped to [Rate, Ceiling] (LearnBounds; Ceiling 0 is
// DefaultLearnCeiling times Rate), its burst scaled by the same factor,
// floor(Burst*L/Rate), so that the tolerance (how long a burst lasts)
// stays the configured one: Limit.Learned. The rate a decision ran at is
// its Status.Rate.
//
// The figure lives in the store, not in each process, because the
// processes share the limit's state: one that learned a larger figure
// moves the tat as far as its larger tolerance lets it, and one still at
// the floor then finds the tat beyond its smaller tolerance and is
// starved. Deciding with the store's figure, every process runs the same
// limit.
//
// A stated limit is not ordered like a remaining count: a plan may go
// down as well as up, and both take effect. What orders figures is the
// reservation whose response stated them: a figure is recorded unless the
// recorded one came from a reservation with a later slot, so a response
// sent before a plan change, read after one sent later, changes nothing.
// When the recorded figure lowers the rate the limit runs at, the same
// store call restates the limit's state at the new rate: the time booked
// ahead of now counts as the events it holds at the old interval (a part
// of one as one), each at the new interval, up to DebtReach of the new
// rate from now and never below what was booked. What was admitted at
// the higher figure then counts at the lower one. A higher figure leaves
// the state as it is.
// A figure lives LearnTTL after the last response that stated it; then
// the limit is back at its floor until a response states it again. The
// remaining of an observation that states a limit too is applied at the
// stated rate (the vendor counts it in the bucket it states).
//
// # Priority classes
//
// A Limit with a Reserve is shared among ordered classes: class 0 the
// top, class len(Reserve) the bottom. A request names its class with
// Request.Class; a limit without a Reserve ignores it. Reserve[k] is the
// share of the limit, in basis points, that class k keeps from the
// classes below it. The arithmetic is exact integer math in every store:
// Portion(bp, of) = of/10000*bp + of%10000*bp/10000, rounded down.
//
// A GCRA limit with classes is kept as lanes, one per class (Limit.Lanes):
// lane k < len(Reserve) is a GCRA limit of rate Portion(Reserve[k], Rate)
// and burst Portion(Reserve[k], Burst), the bottom lane has the rest of
// each. Each lane rounds its interval up, so together they never admit
// more than Burst at once and Rate per Period after it. The bottom lane's
// state is the limit's own key (so a limit that gains classes keeps what
// was spent, and a process without classes shares it); each upper lane
// has a key of its own. For a request of class c and cost n, deciding at
// candidate time t, with T the whole limit's interval:
//
//   - its own lane and every lane below it (k >= c) admit by the GCRA
//     rule of that lane, when n fits the lane's burst;
//   - a lane above it (k < c) is borrowed only while it is full at now
//     (its tat at most now), when n fits its burst, and only for t <=
//     now + T: a lower class takes only refill that would otherwise
//     overflow, one request at a time;
//   - the earliest time of the limit is the earliest of those lanes; the
//     request is charged, at its slot, to the lowest lane that admits it
//     then (the largest k), so a class keeps its own lane for when the
//     lanes below are spent.
//
// The reservation remembers the lane it charged: Cancel and Settle act on
// that lane's state at that lane's limit, by their rules below (Settle's
// Implausible still compares with the whole limit's rate: the vendor
// enforces the whole). A pause drains every lane by its own bucket, and a
// lane the drain puts past now is not full, so not lent. Sync (the vendor
// says R remain of the whole limit) drains the lowest lanes first: lane k
// is synced to max(0, R - the bursts of the lanes above it), which are
// taken to be full; the lane charged by the reservation's mark, every
// other lane as if its mark were now, so that all that is booked in it
// counts as made after the response and stays. Status sums the lanes'
// Remaining and takes the latest of their ResetAfter.
//
// The bounds: a request of class c never waits behind slots a lower
// class booked, since a lower class books only its own lane and those
// below it, and takes of a higher lane one request at a time (borrowing
// needs the lane full), which delays that lane's class by at most the
// borrowed cost times the lane's interval. A class asking within its
// lane's rate and burst is admitted within one interval T however deep
// the lower classes queue. When the classes above are idle, a lower class
// gets their lanes' rate but one request: a lane is lent when full, and
// left one below full (and refill it gains while full, before the next
// lower request comes, overflows).
//
// A Window, Rolling or Concurrency limit with classes holds reserves
// instead. A class is active on a key when a request of it was admitted
// on the key within the limit's ActiveSpan (ActiveFor, by default
// DefaultActiveFor) before now; the store records, on each admission of
// a class above the bottom, the class's time in the key's activity
// record. For a request of class c, the hold h is the sum of Hold(k)
// (Portion(Reserve[k], Rate)) over the active classes k < c, and the limit
// admits only if:
//
//   - Window: count(window of t) + n + h <= Rate, also for a wait into a
//     later window;
//   - Rolling: the count at t + n + h <= Rate;
//   - Concurrency: live leases + 1 + h <= Rate.
//
// h is read at now: a reserve is held until ActiveFor after its class's
// last admitted request, and then the classes below get the whole limit.
// Only lower classes read the record, and denials write nothing.
//
// A request with no class on limits without a Reserve reads and writes
// nothing more than before, in either store, and the memory store
// allocates nothing more for it.
//
// # Pacing
//
// A Window limit with Pace spreads its quota over its window [s, e),
// D = e - s long (a daylight-saving day is 23 or 25 hours), so that it
// lasts until the vendor's reset instead of running out early. Its lead
// is F = PaceLead(D) = D/100 (whole µs). A request that takes the
// window's count to x = count + n + h is admitted at t only when a line
// at rate Rl with lead L has reached x by t:
//
//	paceTime(x) = s - L + ceil(x * (D / Rl))
//
// computed in float64 exactly in this order in every store (Go:
// float64(x) * (float64(D) / float64(Rl)), then math.Ceil; Lua:
// math.ceil(x * (D / Rl))), so that the stores find the same µs; x <=
// Rate always. Without a PaceReserve every request follows one line:
// Rl = Rate, L = F. It starts F before the window, so the first hundredth
// of the quota is there at its start, and reaches Rate at e - F.
//
// A PaceReserve (on a limit with classes) keeps a share of the window for
// class 0, in time and in count. Let Fres = Portion(PaceReserve, D), the
// reserve's share of the window's length (exact integers; Lua:
// math.floor(D / 10000) * bp + math.floor((D % 10000) * bp / 10000)),
// and the release R = e - max(F, Fres) = PaceRelease(s, e).
//
//   - Class 0 follows the line of Rl = Rate with lead L = F + Fres: it is
//     always Fres of the window (the reserve's share of its quota) ahead of
//     where it would be without a reserve, from the window's start, so
//     lower classes that booked ahead along their own line (up to their
//     max wait) never put it behind them.
//   - A class below 0 follows, before R, the line of Rl = Rate -
//     Portion(PaceReserve, Rate) with lead F, and may not pass that Rl; from R
//     on it follows the line of Rate with lead F and may take what is
//     left. Its earliest time in a window is max(t, paceTime(x)) on the
//     first line when that is before R, else max(t, R, paceTime(x) on the
//     second).
//
// So a reserve class 0 does not use is released for the last Fres of the
// window (or the last F, when the reserve is below 1%), long enough for
// the lower classes' demand of that stretch to use it up. A window that
// cannot admit x at all sends the request to the next window, as without
// Pace. A caller that waits is given the time the line reaches its count;
// one that fails fast, a RetryAfter to then.
//
// # Fair share
//
// A Limit with Fair is a GCRA limit (the vendor's account-wide limit, key
// K) shared among the tenants of its requests. A request names its tenant
// and weight with Request.Share: the tenant's part p = FairPart(Key), its
// weight w = Share.Weighted() (1 to MaxWeight). With T, B and DVT = B*T
// K's interval, burst and tolerance, n the item's cost (a class is
// ignored) and H = T: nobody books K more than H ahead, so K stays the
// exact truth of what goes to the vendor, and the order of the waits
// lives in a lane per tenant, its virtual time at its fair rate. A
// request that cannot go near now gets an appointment in its tenant's
// lane and comes back then.
//
// State, per fair item key K, all in the request's tag: K's GCRA state,
// as any GCRA limit's; each tenant's lane, a GCRA tat (idle once it is at
// or before now); and the active set, each tenant's weight and when it
// was last seen (µs), with W the sum of the weights in it. (Redis: the
// lane is the string <prefix>{<tag>}:!fair:<K>:<p>, the set the ZSET
// !fairz:<K>, member p, score seen, and the HASH !fairw:<K>, p -> weight
// and the field "" -> W; p is never "".)
//
// The active set, at a decision at now, with S = Limit.FairSpan() (the
// Period, at least FairActive) in µs; a member is stale when seen + S <=
// now:
//
//  1. If no member is live (every one stale, or none), the set is empty,
//     W = 0: it is forgotten, as its expiry would.
//  2. Else the stale members lowest in (seen, p) order (p compared as
//     bytes, as a ZSET orders equal scores), at most FairExpire (16), leave
//     it, their weights taken from W.
//  3. Then tenant p: a member has its weight set to w (W moves by the
//     difference), a newcomer joins with w (W += w); its seen is now.
//
// W is that sum, p included. An admitted or deferred decision writes the
// result (Redis: both keys then expire S and a slack past the write; rule
// 1 makes the expiry change no decision). A denied decision, and a read of
// the state (status), write nothing and see the same W.
//
// The lane: (Ti, bi) = FairLane(T, B, W, w): Ti = ceil(T*W/w) (float64,
// product first; at most MaxExact/B), bi = max(1, B*w/W). With tat_i =
// max(the lane's tat, now), the request's standing is one of three, each
// leaving K to those above it, with h = FairHold(B) = max(1, B/10):
//
//   - within its share: no Appointment, and its lane admits it near now,
//     tat_i + n*Ti - bi*Ti <= now + H. K admits it at t when t >= tat_K +
//     n*T - DVT and t <= now + H.
//   - back at its appointment (Appointment set): K admits it at t when t
//     >= tat_K + n*T - (DVT - min(h, B-n)*T) and t <= now: at once or not
//     at all, leaving the hold to those within their share.
//   - over its share (any other): as at an appointment, leaving
//     min(FairOverHold(B), B-n) instead, max(2h, B/2): the appointments,
//     which keep the order of the waits, and the requests within their
//     share come before it, and it takes only what they leave unused.
//     It has room when another tenant is active (W > w) and its lane
//     could book it within the span, tat_i + n*Ti - bi*Ti <= now + S;
//     with another active and no room it leaves FairIdleHold(B, n) =
//     max(min(FairOverHold(B), B-n), B-n-2h) instead: only what nobody
//     else is using.
//
// tat_K is K's, drained by a pause as any GCRA limit's. In the fixpoint a
// time past the latest slot is beyond: the fixpoint stops, as past a
// window's horizon.
//
// Admitted: the fixpoint ends within every horizon at t, no lease cap is
// full and t - now <= MaxWait. Every item is charged at t as usual, K
// included; a request within its share, or over it with room, also
// charges its lane, tat_i = max(tat_i, t) + n*Ti; the active set is
// written. A fixpoint that ends within the horizons but past MaxWait is
// denied as any (RetryAfter t - now).
//
// Deferred: the fixpoint stopped (beyond), the stack has a fair item and
// no lease cap is full. A second fixpoint finds when the stack would
// admit the request back at its appointment, every fair item at that
// standing's tolerance and with no horizon, from t0 = max(now, the
// pause's end, a), a the latest appointment of the fair items: a_k =
// max(now, tat_i + n*Ti - bi*Ti) without Appointment, now with it. If it
// ends within the other limits' horizons at tf, and tf - now <= MaxWait,
// the result is Deferred (not Allowed) with RetryAfter tf - now: without
// Appointment each fair item's lane is booked at its appointment, tat_i =
// max(tat_i, a_k) + n*Ti (a GCRA charge at a_k); the active sets are
// written; nothing else is charged. The decider is the second fixpoint's:
// the item that last moved t, else the fair item whose appointment set t0
// (the first of the latest), else the pause.
//
// Denied otherwise, writing nothing, with RetryAfter from a third fixpoint:
// every fair item at the request's own tolerance with no horizon, from
// max(now, the pause's end): when the stack would admit the request as it
// stands if nobody reserved meanwhile (or where that fixpoint stopped).
//
// Status of a fair item is K's, as any GCRA limit's. Cancel of an
// admitted request gives back K by the GCRA rules, and its lane charge by
// the same rules on the lane (its own mark); a Deferred result has
// nothing to cancel: a lost appointment delays only its tenant's later
// appointments, by its slot. Settle settles K as any GCRA limit, and the
// lane charge as a GCRA limit of interval Ti and tolerance bi*Ti as
// decided, whose DebtReach is Period + bi*Ti: so a tenant pays for what
// its requests actually cost in its own lane. Sync drains K alone: the
// vendor speaks of the whole limit, and a lane is no vendor's.
//
// The bounds: K is a GCRA limit charged only near now, so the vendor
// never sees more than the limit. A lone tenant's lane is the whole
// limit (W = w: Ti = T, bi = B) and is charged with K, so its requests
// are within their share whenever K admits them near now; its waiters'
// appointments follow one another at K's rate, leaving the hold once: it
// gets the whole rate. A request within its share (of cost at most h) is
// admitted within H whatever the others demand, as long as the other
// requests within their share at that moment leave it room in the hold:
// appointments and requests over their share leave K's tat at most DVT -
// h*T past now, and the lanes' rates add up to at most K's, so those
// within their share take the hold only in their lanes' bursts.
// Otherwise it is deferred, its lane booked at once, to when K admits it
// at an appointment. (The conformance measures it: a tenant arriving
// behind 300 waiters of another goes within H, where the bound asked for
// is H and its lane interval.)
//
// What a tenant takes over its share while others are active is charged
// to its own lane: it delays the tenant's own later appointments, not the
// others', and the spare goes by the lanes, by weight, not to whoever
// asks first. Only while the lane is booked less than S ahead: what a
// tenant takes over its share pushes its lane at most to now + S +
// bi*Ti, so its own appointments are delayed by that at most, and once
// the others have gone (S after their last decision) its lane is within
// its share again within S + bi*Ti. Past that it takes only what nobody
// else uses (FairIdleHold), charging nothing: the limit stays
// work-conserving. A request with no fair item reads and writes what it
// did, and the memory store allocates nothing more for it.
package quota
