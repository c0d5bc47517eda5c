package quota

import (
	"cmp"
	"slices"
	"time"
)

// This file is the decision math of package doc "The decision", on state
// held in memory. It takes now as a parameter and never reads a clock.

// maxRounds bounds the fixpoint. Each round that does not end it moves t
// forward: a GCRA or rolling limit at most once, a window at most once per
// window of its horizon, so a stack needs far fewer rounds; hitting the bound means
// denial, never over-admission.
const maxRounds = 16

// gcraState is the state of a GCRA limit (of one lane of a limit with
// classes).
type gcraState struct {
	tat   int64  // theoretical arrival time, µs
	holes []hole // cancelled reservations not given back yet; see cancel
}

// cell is the state of one key.
type cell struct {
	gcraState       // GCRA: the state (the bottom lane's, for a limit with classes)
	until     int64 // pause: paused until, µs
	wins      []win // Window: counts of windows that have not ended
	// leases are a Concurrency limit's leases: lease id -> expiry, µs.
	// Expired ones are dropped by the next decision on the key.
	leases map[uint64]int64

	// roll holds the counts of a Rolling limit's buckets not expired.
	roll []bucket
	// rollW is the bucket width roll was counted with. A limit of another
	// width (its period changed) cannot read those buckets: to it the key
	// is idle, and its first charge starts afresh.
	rollW int64

	// A learning GCRA limit's recorded figure (package doc "Learning"):
	// the limit the vendor stated, the slot time of the reservation whose
	// response stated it, and when the record expires.
	learned, learnedAt, learnedUntil int64

	// cls is the state of a limit with classes, nil for any other: a
	// pointer, so that a plain key's memory is what it was before classes.
	cls *classState
}

// classState is what a key of a limit with classes holds beyond a plain
// limit's (package doc "Priority classes").
type classState struct {
	// lanes are the upper lanes of a GCRA limit: lane k for class k; the
	// bottom lane is the cell's own gcraState, so that a limit that gains
	// classes keeps what was spent. Each is the state of a key of its own
	// in the Redis store.
	lanes []gcraState
	// seen is the activity record of a Window, Rolling or Concurrency
	// limit: when each class above the bottom last had a request admitted
	// on the key (µs; 0: never). seenUntil is when the latest of them
	// stops holding its reserve.
	seen      []int64
	seenUntil int64
	// fair is the active set of a Fair limit's key, held in a cell of its
	// own (fairSetKey), nil in any other cell (package doc "Fair share").
	fair *fairSet
}

// bucket is the count of one bucket of a Rolling limit, [start, start+W),
// which the limit counts until until = start + W + Period. A cell keeps
// them sorted by start, with no bucket of count 0.
type bucket struct{ start, until, count int64 }

// hole is a GCRA reservation cancelled while a later one still held the
// key: the tat it set (mark) and the stored tat it replaced (prev).
type hole struct{ mark, prev int64 }

// mark is what Cancel and Sync need of one limit of a reservation: for
// GCRA the tat the reservation set and the stored tat it replaced, and
// for a limit with classes the lane charged (in count: a GCRA mark has no
// count of its own); for a window the start (in set) and end of the
// window charged and its count right after the charge; for a rolling
// window the start of the bucket charged (in set).
type mark struct{ set, prev, end, count int64 }

// win is the count of one calendar window [start, end).
type win struct{ start, end, count int64 }

func (c *cell) count(start int64) int64 {
	for _, w := range c.wins {
		if w.start == start {
			return w.count
		}
	}
	return 0
}

// add charges n to window [start, end) and drops windows ended by now.
func (c *cell) add(start, end, n, now int64) {
	kept := c.wins[:0]
	found := false
	for _, w := range c.wins {
		if w.start == start {
			w.count += n
			found = true
		}
		if w.end > now && w.count > 0 {
			kept = append(kept, w)
		}
	}
	c.wins = kept
	if !found && n > 0 {
		c.wins = append(c.wins, win{start, end, n})
	}
}

// expires is when the cell is back to idle and may be forgotten: a pause
// is kept PauseDrain past its end, while it may still drain.
func (c *cell) expires() int64 {
	e := c.tat
	if c.until > 0 {
		e = max(e, c.until+pauseDrain)
	}
	for _, w := range c.wins {
		e = max(e, w.end)
	}
	for _, x := range c.leases {
		e = max(e, x)
	}
	for _, b := range c.roll {
		e = max(e, b.until)
	}
	if c.cls != nil {
		for _, g := range c.cls.lanes {
			e = max(e, g.tat)
		}
		e = max(e, c.cls.seenUntil)
		if c.cls.fair != nil {
			e = max(e, c.cls.fair.until)
		}
	}
	return max(e, c.learnedUntil)
}

// classes returns the cell's class state, making it.
func (c *cell) classes() *classState {
	if c.cls == nil {
		c.cls = &classState{}
	}
	return c.cls
}

// lane returns the state of lane k of a GCRA limit with classes whose
// bottom lane is bottom (see Limit.Lanes), as a store that keeps each
// lane under a key of its own, expired at its tat, reads it: a lane back
// to idle is empty, whatever the other lanes of the cell hold.
func (c *cell) lane(k, bottom int, now int64) *gcraState {
	cls := c.classes()
	if len(cls.lanes) < bottom {
		cls.lanes = append(cls.lanes, make([]gcraState, bottom-len(cls.lanes))...)
	}
	g := &c.gcraState
	if k < bottom {
		g = &cls.lanes[k]
	}
	if g.tat <= now {
		g.tat, g.holes = 0, nil
	}
	return g
}

// hold returns what the classes above class keep from it in a Window,
// Rolling or Concurrency limit with classes (package doc "Priority
// classes"): the Hold of each class that had a request admitted on the
// key within the limit's ActiveSpan before now.
func (c *cell) hold(lim *Limit, class int, now int64) int64 {
	if c.cls == nil {
		return 0
	}
	var h int64
	span := lim.ActiveSpan().Microseconds()
	for k, seen := range c.cls.seen[:min(class, len(c.cls.seen))] {
		if seen > 0 && seen+span > now {
			h += lim.Hold(k)
		}
	}
	return h
}

// see records, in the activity record of a limit with classes, that a
// request of class was admitted at now. The bottom class keeps nothing
// from anyone, so it is not recorded.
func (c *cell) see(lim *Limit, class int, now int64) {
	if class >= len(lim.Reserve) {
		return
	}
	cls := c.classes()
	if len(cls.seen) < len(lim.Reserve) {
		cls.seen = append(cls.seen, make([]int64, len(lim.Reserve)-len(cls.seen))...)
	}
	cls.seen[class] = now
	cls.seenUntil = max(cls.seenUntil, now+lim.ActiveSpan().Microseconds())
}

// learnedLimit returns lim as a decision at now runs it: a learning limit at
// the figure recorded in c, if any (Limit.Learned).
func (c *cell) learnedLimit(lim *Limit, now int64) *Limit {
	if !lim.Learn {
		return lim
	}
	var stated int64
	if c.learnedUntil > now {
		stated = c.learned
	}
	return lim.Learned(stated)
}

// learn records the limit a vendor stated for learning limit lim in the
// response of the reservation whose slot was at (package doc "Learning"):
// unless a reservation after it stated one that is still recorded. When
// the figure lim runs at falls, the GCRA state is restated at the new one.
func (c *cell) learn(lim *Limit, stated, at, now int64) {
	if c.learnedUntil > now && at < c.learnedAt {
		return
	}
	from := c.learnedLimit(lim, now)
	c.learned, c.learnedAt, c.learnedUntil = stated, at, now+LearnTTL.Microseconds()
	if to := lim.Learned(stated); to.Rate < from.Rate {
		c.tat = restate(c.tat, now, from, to)
	}
}

// liveLeases drops the leases expired by now and returns how many are
// left and the soonest expiry among them (0 when none).
func (c *cell) liveLeases(now int64) (n, soonest int64) {
	for id, x := range c.leases {
		if x <= now {
			delete(c.leases, id)
			continue
		}
		n++
		if soonest == 0 || x < soonest {
			soonest = x
		}
	}
	return n, soonest
}

// buckets returns the cell's rolling buckets if they were counted with
// width w, else none.
func (c *cell) buckets(w int64) []bucket {
	if c.rollW != w {
		return nil
	}
	return c.roll
}

// rollAt is what a Rolling limit of width w counts at time at: the buckets
// not expired by then.
func (c *cell) rollAt(w, at int64) int64 {
	var n int64
	for _, b := range c.buckets(w) {
		if b.until > at {
			n += b.count
		}
	}
	return n
}

// rollAdd charges n to the bucket [start, start+w), counted until until,
// first dropping the buckets expired by now (and all of them when they
// were counted with another width).
func (c *cell) rollAdd(w, start, until, n, now int64) {
	if c.rollW != w {
		c.roll, c.rollW = c.roll[:0], w
	}
	kept := c.roll[:0]
	for _, b := range c.roll {
		if b.until > now {
			kept = append(kept, b)
		}
	}
	c.roll = kept
	j, found := slices.BinarySearchFunc(c.roll, start, func(b bucket, s int64) int { return cmp.Compare(b.start, s) })
	if found {
		c.roll[j].count += n
		return
	}
	c.roll = slices.Insert(c.roll, j, bucket{start: start, until: until, count: n})
}

// horizon holds the boundaries of the three windows a decision looks at:
// [b[0], b[1]) holds now, then [b[1], b[2]) and [b[2], b[3]).
type horizon [4]int64

func horizonAt(cal Calendar, now int64) horizon {
	s0, e0 := cal.Bounds(time.UnixMicro(now))
	_, e1 := cal.Bounds(e0)
	_, e2 := cal.Bounds(e1)
	return horizon{s0.UnixMicro(), e0.UnixMicro(), e1.UnixMicro(), e2.UnixMicro()}
}

// slot finds the window holding t: it returns its index j (the window is
// [h[j], h[j+1])), or -1 when t is past the horizon.
func (h *horizon) slot(t int64) int {
	for j := 0; j < 3; j++ {
		if t < h[j+1] {
			return j
		}
	}
	return -1
}

// laneItem is one lane of a GCRA limit with classes in a decision.
type laneItem struct {
	g            *gcraState
	T, dvt, size int64 // the lane's interval, tolerance and burst
	tat, prev    int64 // max(stored tat, now), drained by a pause; the stored tat as read
}

// item is one limit of a decision with its state and derived constants.
type item struct {
	lim  *Limit
	c    *cell
	cost int64 // what the request counts for in this limit
	// class is the request's class in this limit: Request.Class when the
	// limit has classes, else 0.
	class int
	// GCRA with classes: the lanes, the top first; the lane charged; now.
	lanes []laneItem
	lane  int
	now   int64
	// hold is, for a Window, Rolling or Concurrency limit with classes,
	// what the active classes above the request's keep from it.
	hold int64
	// fair is, for a Fair limit, its tenant's lane and active set; nil
	// for any other.
	fair *fairItem
	tat  int64 // GCRA: max(stored tat, now)
	prev int64 // GCRA: the stored tat as read, before this decision
	T    int64 // GCRA: emission interval
	dvt  int64 // GCRA: tolerance
	h    horizon
	// Concurrency: the lease TTL, the live leases before this decision
	// and the soonest expiry among them.
	ttl, live, soonest int64
	W                  int64 // Rolling: bucket width, µs
	P                  int64 // Rolling: period, µs
	due                int64 // Rolling: the earliest time it admits the cost
	hz                 int64 // Rolling: the latest slot it can charge, now + P + W
}

func (it *item) init(lim *Limit, c *cell, cost int64, class int, now int64) {
	it.lim, it.c, it.cost = lim, c, cost
	if lim.Reserve != nil {
		it.initClasses(class, now)
	}
	if lim.Kind == GCRA {
		lim = c.learnedLimit(lim, now)
		it.lim = lim
		it.T, it.dvt = lim.Interval(), lim.Tolerance()
		it.tat, it.prev = max(c.tat, now), c.tat
		return
	}
	if lim.Kind == Concurrency {
		it.ttl = lim.Period.Microseconds()
		it.live, it.soonest = c.liveLeases(now)
		return
	}
	if lim.Kind == Rolling {
		it.initRolling(now)
		return
	}
	it.h = horizonAt(lim.Calendar, now)
}

// initClasses reads what a limit with classes needs for a request of
// class: a GCRA limit its lanes, the others the reserves held above it.
func (it *item) initClasses(class int, now int64) {
	it.class, it.now = class, now
	if it.lim.Kind != GCRA {
		it.hold = it.c.hold(it.lim, class, now)
		return
	}
	bottom := len(it.lim.Reserve)
	it.lanes = make([]laneItem, bottom+1)
	it.c.lane(0, bottom, now) // makes every lane, so that no pointer below moves
	for k := range it.lanes {
		l := it.lim.lane(k)
		g := it.c.lane(k, bottom, now)
		it.lanes[k] = laneItem{g: g, T: l.Interval(), dvt: l.Tolerance(), size: l.burst(), tat: max(g.tat, now), prev: g.tat}
	}
}

// initRolling finds when a Rolling limit first admits the item's cost:
// now if what it counts at now leaves room, else the expiry of the bucket
// (oldest first) whose expiry leaves room. What a Rolling limit counts
// only falls as time passes, so it admits at every time from then on.
func (it *item) initRolling(now int64) {
	it.W, it.P = it.lim.BucketWidth(), it.lim.Period.Microseconds()
	it.hz = now + it.P + it.W
	it.due = now
	n := it.c.rollAt(it.W, now)
	for _, b := range it.c.buckets(it.W) {
		if n+it.cost+it.hold <= it.lim.Rate {
			break
		}
		if b.until > now {
			n -= b.count
			it.due = b.until
		}
	}
	if n+it.cost+it.hold > it.lim.Rate { // only while a hold keeps it: never within the horizon
		it.due = it.hz + 1
	}
}

// earliest returns the earliest time >= t at which the limit admits the
// item's cost, and whether that time is past what the limit can see (its
// horizon).
func (it *item) earliest(t int64) (int64, bool) {
	cost := it.cost
	switch it.lim.Kind {
	case GCRA:
		if it.lanes != nil {
			return it.earliestLane(t)
		}
		if it.fair != nil {
			return it.earliestFair(t)
		}
		return max(t, it.tat+cost*it.T-it.dvt), false
	case Rolling:
		e := max(t, it.due)
		return e, e > it.hz
	case Concurrency: // decided apart: see fullLease
		return t, false
	}
	j := it.h.slot(t)
	if j < 0 {
		return t, true
	}
	x := it.c.count(it.h[j]) + cost + it.hold
	if it.lim.Pace {
		if e, ok := it.paced(t, it.h[j], it.h[j+1], x); ok {
			return e, false
		}
	} else if x <= it.lim.Rate {
		return t, false
	}
	next := it.h[j+1]
	return next, next >= it.h[3]
}

// paced returns the earliest time >= t within the paced window [s, e) at
// which it admits a request that takes its count to x (package doc
// "Pacing"), and false when it admits none in this window.
func (it *item) paced(t, s, e, x int64) (int64, bool) {
	d := e - s
	f := PaceLead(d)
	if rl := it.lim.paceRate(it.class); x <= rl {
		u := max(t, paceTime(s, d, f, rl, x))
		if rl == it.lim.Rate || u < e-f {
			return u, true
		}
	}
	if x <= it.lim.Rate { // a lower class, in the window's last lead
		return max(t, e-f, paceTime(s, d, f, it.lim.Rate, x)), true
	}
	return 0, false
}

// laneAt returns when lane k of a GCRA item with classes admits the
// item's cost at the earliest at or after t, and false when it cannot
// (package doc "Priority classes"): the request's own lane and those
// below it at their GCRA time; a lane above it only when it is full now
// (so what is taken of it is refill that would overflow), for a slot
// within one interval of the whole limit from now.
func (it *item) laneAt(k int, t int64) (int64, bool) {
	l := &it.lanes[k]
	if it.cost > l.size {
		return 0, false
	}
	if k >= it.class {
		return max(t, l.tat+it.cost*l.T-l.dvt), true
	}
	if l.tat <= it.now && t <= it.now+it.T {
		return t, true
	}
	return 0, false
}

// earliestLane is earliest for a GCRA item with classes: the earliest
// time of any lane it may use. None means never (as past a horizon).
func (it *item) earliestLane(t int64) (int64, bool) {
	best, found := int64(0), false
	for k := range it.lanes {
		if e, ok := it.laneAt(k, t); ok && (!found || e < best) {
			best, found = e, true
		}
	}
	if !found {
		return t, true
	}
	return best, false
}

// decide runs the fixpoint of package doc "The decision". It returns the
// slot time t, the decider, and whether every limit admits at t within the
// horizon (the caller still checks max wait).
func decide(items []item, now, paused int64) (t int64, decider int, ok bool) {
	t, decider = now, NoDecider
	if paused > t {
		t, decider = paused, PausedDecider
	}
	if paused > 0 {
		drainPaused(items, paused)
	}
	return fixpoint(items, t, decider)
}

// fixpoint moves t, set by decider, forward until every item admits at
// it (or one is beyond its horizon, or the rounds run out): the loop of
// decide.
func fixpoint(items []item, t int64, decider int) (int64, int, bool) {
	for round := 0; round < maxRounds; round++ {
		moved := false
		for i := range items {
			e, beyond := items[i].earliest(t)
			if e > t {
				t, decider, moved = e, i, true
			}
			if beyond {
				return t, decider, false
			}
		}
		if !moved {
			return t, decider, true
		}
	}
	return t, decider, false
}

// fullLease returns the index of the first Concurrency item whose leases
// are all held, or -1, and the soonest expiry of that item's leases: the
// earliest time at which a lease is known to come back (a holder may
// release sooner, or renew). A full Concurrency limit denies whatever the
// max wait: no store knows when a holder finishes, and granting a lease
// that is still held at its slot would exceed the cap.
func fullLease(items []item) (int, int64) {
	for i := range items {
		if it := &items[i]; it.lim.Kind == Concurrency && it.live+1+it.hold > it.lim.Rate {
			return i, it.soonest
		}
	}
	return -1, 0
}

// charge books each item's cost at t and returns in marks (when not nil)
// per limit what Cancel and Settle need. A Concurrency item takes lease id, which
// expires a TTL after the slot.
func charge(items []item, now, t int64, marks []mark, id uint64) {
	for i := range items {
		it := &items[i]
		if it.lim.Reserve != nil {
			if it.lim.Kind == GCRA {
				it.chargeLane(t, marks, i)
				continue
			}
			it.c.see(it.lim, it.class, now)
		}
		if it.lim.Kind == Concurrency {
			if it.c.leases == nil {
				it.c.leases = make(map[uint64]int64)
			}
			it.c.leases[id] = t + it.ttl
			continue
		}
		if it.lim.Kind == GCRA {
			it.c.tat = max(it.tat, t) + it.cost*it.T
			if marks != nil {
				marks[i] = mark{set: it.c.tat, prev: it.prev}
			}
			continue
		}
		if it.lim.Kind == Rolling {
			start := t - t%it.W
			it.c.rollAdd(it.W, start, start+it.W+it.P, it.cost, now)
			if marks != nil {
				marks[i] = mark{set: start}
			}
			continue
		}
		j := it.h.slot(t)
		it.c.add(it.h[j], it.h[j+1], it.cost, now)
		if marks != nil {
			marks[i] = mark{set: it.h[j], end: it.h[j+1], count: it.c.count(it.h[j])}
		}
	}
}

// chargeLane charges a GCRA item with classes at t: the lowest lane that
// admits it then, so that a request takes its own class's lane before
// borrowing one above. The mark says which.
func (it *item) chargeLane(t int64, marks []mark, i int) {
	for k := len(it.lanes) - 1; k >= 0; k-- {
		if e, ok := it.laneAt(k, t); !ok || e != t {
			continue
		}
		l := &it.lanes[k]
		l.g.tat = max(l.tat, t) + it.cost*l.T
		it.lane = k
		if marks != nil {
			marks[i] = mark{set: l.g.tat, prev: l.prev, count: int64(k)}
		}
		return
	}
}

// laneStatus is status for a GCRA item with classes: what its lanes
// would admit at once, and when the last of them is back to full.
func (it *item) laneStatus(now, t int64, allowed bool) (rem, reset int64) {
	at := now
	if allowed {
		at = t
	}
	for k := range it.lanes {
		l := &it.lanes[k]
		tat := l.tat
		if allowed && k == it.lane {
			tat = l.g.tat
		}
		rem += max((l.dvt-(max(tat, at)-at))/l.T, 0)
		reset = max(reset, tat-now)
	}
	return rem, reset
}

// status reports a limit's state after the decision, at t when the request
// was admitted (and charged), at now when it was denied.
func (it *item) status(now, t int64, allowed bool) Status {
	var rem, reset, rate int64
	if it.lim.Kind == Concurrency {
		// ResetAfter is when the last live lease expires unless renewed.
		rem = it.lim.Rate - int64(len(it.c.leases))
		for _, x := range it.c.leases {
			reset = max(reset, x-now)
		}
	} else if it.lanes != nil {
		rem, reset = it.laneStatus(now, t, allowed)
	} else if it.lim.Kind == GCRA {
		at, tat := now, it.tat
		if allowed {
			at, tat = t, it.c.tat
		}
		rem = (it.dvt - (tat - at)) / it.T
		reset = tat - now
		if it.lim.Learn {
			rate = it.lim.Rate
		}
	} else if it.lim.Kind == Rolling {
		at := now
		if allowed {
			at = t
		}
		rem = it.lim.Rate - it.c.rollAt(it.W, at)
		for _, b := range it.c.buckets(it.W) {
			reset = max(reset, b.until-now)
		}
	} else {
		at := now
		if allowed {
			at = t
		}
		j := max(it.h.slot(at), 0)
		rem = it.lim.Rate - it.c.count(it.h[j])
		reset = it.h[j+1] - now
	}
	return Status{Remaining: max(rem, 0), ResetAfter: Micros(reset), Rate: rate}
}

// refund gives back what Cancel may, per package doc "Cancel": now is the
// store's time, t the reserved slot, marks what charge returned.
func refund(items []item, now, t int64, marks []mark, id uint64) {
	for i := range items {
		if it := &items[i]; it.lim.Kind == Concurrency {
			delete(it.c.leases, id)
		}
	}
	if now >= t {
		return
	}
	for i := range items {
		it := &items[i]
		if it.lim.Kind == Concurrency {
			continue
		}
		if it.lim.Kind == GCRA {
			g, _ := it.charged(marks[i], now)
			g.cancel(marks[i], now)
			continue
		}
		if it.lim.Kind == Rolling {
			it.c.rollRefund(it.lim.BucketWidth(), marks[i].set, it.cost)
			continue
		}
		for k := range it.c.wins {
			w := &it.c.wins[k]
			if w.start == marks[i].set && now < w.end {
				w.count = max(w.count-it.cost, 0)
			}
		}
	}
}

// settle books, per item, the actual cost of a reservation charged its
// estimate it.cost as marks says (package doc "Settle"); an actual below
// zero or Implausible leaves the item as it is, and leases and rolling
// windows are not settled. now is the store's time; it.lim is the limit
// as decided (a learning limit at its learned rate).
func settle(items []item, now int64, marks []mark, actual []int64) {
	for i := range items {
		it := &items[i]
		if actual[i] < 0 || actual[i] == it.cost || it.lim.Kind == Concurrency || it.lim.Kind == Rolling ||
			Implausible(actual[i], it.lim.Rate) {
			continue
		}
		delta := actual[i] - it.cost
		if it.lim.Kind == GCRA {
			g, lim := it.charged(marks[i], now)
			g.settle(marks[i], delta, lim.Interval(), lim.DebtReach(), now)
			continue
		}
		found := false
		for k := range it.c.wins {
			if w := &it.c.wins[k]; w.start == marks[i].set {
				found = true
				if now < w.end {
					w.count = max(w.count+delta, 0)
				}
			}
		}
		if !found && delta > 0 { // its count went back to zero and was dropped
			start, end := it.lim.Calendar.Bounds(time.UnixMicro(marks[i].set))
			if s, e := start.UnixMicro(), end.UnixMicro(); s == marks[i].set && now < e {
				it.c.wins = append(it.c.wins, win{s, e, delta})
			}
		}
	}
}

// charged returns the GCRA state a reservation with mark m charged in a
// GCRA item and the limit it was charged at: the item's own state and
// limit, or for a limit with classes the lane the mark names (package doc
// "Priority classes").
func (it *item) charged(m mark, now int64) (*gcraState, *Limit) {
	if it.lim.Reserve == nil {
		return &it.c.gcraState, it.lim
	}
	k := min(max(int(m.count), 0), len(it.lim.Reserve))
	l := it.lim.lane(k)
	return it.c.lane(k, len(it.lim.Reserve), now), &l
}

// rollRefund gives n back to the rolling bucket that starts at start, if
// it is still counted (with width w). A bucket that reaches 0 is dropped,
// so that the newest bucket kept says when the limit is back to full.
// The slot of the charge has not come, so its bucket has not expired.
func (c *cell) rollRefund(w, start, n int64) {
	if c.rollW != w {
		return
	}
	for j := range c.roll {
		if b := &c.roll[j]; b.start == start {
			if b.count -= min(n, b.count); b.count == 0 {
				c.roll = slices.Delete(c.roll, j, j+1)
			}
			return
		}
	}
}

// cancel takes back the GCRA charge of a reservation whose slot has not
// come, which set the tat to m.set over m.prev (package doc "Cancel").
//
// When the stored tat is m.set, the reservation is the last one charged to
// the key: every reservation made after it is gone. The tat goes back to
// m.prev; then, where a hole (reservations cancelled earlier while a later
// one held the key) has the tat as its mark, to that hole's prev: the
// state as if none of them had been made. Why tat == m.set means no later
// reservation is live: a reservation sets the tat above the one it read
// (a cost is at least 1 and T at least 1µs), so along the reservations
// charged since the key was last idle the marks only grow; the tat only
// falls here, by going back over reservations that are all cancelled and
// stopping at the mark of a live one (or below now). So the tat is always
// the mark of the latest reservation not taken back, marks are unique among
// those, and tat == m.set says that reservation is this one.
//
// When the tat is above m.set, a later reservation holds the key: its slot
// may have been set by another limit or a pause above this tat (a jump),
// so nothing of this charge can come back safely now. It is kept as a hole
// until the tat comes back down to it. A hole whose mark time has passed
// no longer matters (the tat can only come back to a time not yet passed).
//
// When the tat is below m.set, the state has been forgotten or reset since:
// there is nothing to give back.
//
// Each hole is a run of cancelled reservations, one after another in the
// key's queue (see addHole), so the tat goes back over at most one, and a
// cancel costs O(log holes) whatever the order of the cancels before it.
func (c *gcraState) cancel(m mark, now int64) {
	// The holes are sorted by mark: those passed are a prefix.
	c.holes = c.holes[c.holeAt(now+1):]
	switch {
	case c.tat == m.set:
		tat := m.prev
		if j := c.holeAt(tat); tat > now && j < len(c.holes) && c.holes[j].mark == tat {
			tat = c.holes[j].prev
			c.holes = slices.Delete(c.holes, j, j+1)
		}
		if tat <= now { // idle
			tat, c.holes = 0, nil
		}
		c.tat = tat
	case c.tat > m.set:
		c.addHole(hole{mark: m.set, prev: m.prev})
	}
}

// holeAt returns the index of the first hole whose mark is at least at.
func (c *gcraState) holeAt(at int64) int {
	i, _ := slices.BinarySearchFunc(c.holes, at, func(h hole, at int64) int { return cmp.Compare(h.mark, at) })
	return i
}

// addHole keeps h, joined with the holes right before and after it in the
// key's queue: the one whose mark is h.prev (the reservation charged just
// before) and the one whose prev is h.mark (charged just after). The tat
// reaches the joined marks only through these links, so the run behaves
// as its links did, and no two holes of c ever link: a tail cancel walks
// at most one. Holes stay sorted by mark, and so by prev: each
// reservation's (prev, mark] follows the one charged before it.
func (c *gcraState) addHole(h hole) {
	i := c.holeAt(h.prev)
	if i < len(c.holes) && c.holes[i].mark == h.prev {
		h.prev = c.holes[i].prev
		c.holes = slices.Delete(c.holes, i, i+1)
	}
	if i < len(c.holes) && c.holes[i].prev == h.mark {
		h.mark = c.holes[i].mark
		c.holes[i] = h
		return
	}
	c.holes = slices.Insert(c.holes, i, h)
}

// drain applies the vendor's remaining to one limit of a reservation with
// mark m, per package doc "Sync": the reservations charged after this one
// (after) stay, the rest of the state admits at most remaining more at
// once, and nothing is ever loosened. lim and c are the limit and its
// state at now.
func drain(lim *Limit, c *cell, m mark, remaining, now int64) {
	if lim.Kind == Rolling || lim.Kind == Concurrency {
		return // not synced (Reservation.Sync)
	}
	remaining = min(max(remaining, 0), lim.Capacity())
	if lim.Kind == GCRA && lim.Reserve != nil {
		drainLanes(lim, c, m, remaining, now)
		return
	}
	if lim.Kind == GCRA {
		c.gcraState.drain(lim, m, remaining, now)
		return
	}
	if now >= m.end {
		return // the window charged has ended: the vendor speaks of another
	}
	cur := c.count(m.set)
	after := max(cur-m.count, 0)
	if target := lim.Rate - remaining + after; target > cur {
		c.add(m.set, m.end, target-cur, now)
	}
}

// drain is drain for one GCRA state of limit lim.
func (g *gcraState) drain(lim *Limit, m mark, remaining, now int64) {
	remaining = min(remaining, lim.burst())
	T, dvt := lim.Interval(), lim.Tolerance()
	after := max(g.tat-m.set, 0)
	if target := now + dvt - remaining*T + after; target > max(g.tat, now) {
		g.tat = target
	}
}

// drainLanes is drain for a GCRA limit with classes, the vendor's
// remaining (within the limit's burst) on the whole limit (package doc
// "Priority classes"): the lowest lanes are drained first, lane k to
// what is left of remaining above the bursts of the lanes over it (taken
// to be full). The lane the reservation charged is drained by its mark;
// every other lane has no mark of this reservation, so all that is booked
// in it counts as made after it (its mark is now), and stays.
func drainLanes(lim *Limit, c *cell, m mark, remaining, now int64) {
	bottom := len(lim.Reserve)
	c.lane(0, bottom, now)
	above := int64(0)
	for k := 0; k <= bottom; k++ {
		l := lim.lane(k)
		lm := mark{set: now}
		if int64(k) == m.count {
			lm = m
		}
		c.lane(k, bottom, now).drain(&l, lm, max(remaining-above, 0), now)
		above += l.burst()
	}
}
