package quota

import "maps"

// This file is the decision of a Fair item (package doc "Fair share") on
// state held in memory: the active set of a key, a tenant's lane, and
// what a decision reads and writes of them.

// fairSetKey is the key, within the tag, of the active set of the Fair
// item whose key is key: "!" is outside every part KeyOf makes, so no
// limit's key can be it.
func fairSetKey(key string) string { return "!fairz:" + key }

// fairLaneKey is the key, within the tag, of the lane of tenant part p
// (FairPart: no ":" in it) of the Fair item whose key is key.
func fairLaneKey(key, p string) string { return "!fair:" + key + ":" + p }

// fairSet is the active set of a Fair item's key (package doc "Fair
// share"): each tenant's weight and when it was last seen, in a list
// ordered by (seen, part), oldest first, as a Redis ZSET orders them, and
// the sum of the weights. It lives in the cell of the key fairSetKey.
type fairSet struct {
	members    map[string]*fairMember
	head, tail *fairMember
	sum        int64 // W: the sum of the members' weights
	newest     int64 // the latest seen recorded: every member's seen is at or before it
	until      int64 // newest + the span it was written with: the set is idle from then on
	peak       int   // the most members since members was made
}

// fairMember is one tenant of a fairSet.
type fairMember struct {
	part         string
	seen, weight int64
	prev, next   *fairMember
}

// before reports whether m sorts before (seen, part).
func (m *fairMember) before(seen int64, part string) bool {
	return m.seen < seen || m.seen == seen && m.part < part
}

// weigh returns W for a decision of tenant p of weight w at now (package
// doc "Fair share": the stale members leave, p joins or is refreshed),
// with span the limit's FairSpan in µs. With write it also makes those
// changes; without, it changes nothing. A nil set is empty.
func (f *fairSet) weigh(p string, w, now, span int64, write bool) int64 {
	if f == nil || f.newest+span <= now { // no member is live: forgotten
		if write { // f is not nil: record makes it
			*f = fairSet{} // a new map: a Go map never shrinks
			f.add(p, w, now)
			f.until = f.newest + span
		}
		return w
	}
	sum := f.sum
	own := f.members[p]
	m := f.head
	for k := 0; k < FairExpire && m != nil && m.seen+span <= now; k++ {
		next := m.next
		sum -= m.weight
		if m == own {
			own = nil
		}
		if write {
			f.unlink(m)
			delete(f.members, m.part)
		}
		m = next
	}
	if own != nil {
		sum += w - own.weight
	} else {
		sum += w
	}
	if write {
		if own != nil {
			f.unlink(own)
			delete(f.members, p)
		}
		f.add(p, w, now)
		f.sum = sum
		f.until = f.newest + span
		if f.peak >= rebuildMin && len(f.members) < f.peak/4 {
			// Far fewer members than the map once held: move them to a
			// new map, paid for by the deletes since the last one.
			f.members = maps.Clone(f.members)
			f.peak = len(f.members)
		}
	}
	return sum
}

// add puts tenant p of weight w, seen at now, in its place in the list,
// and its weight in the sum. p is not a member.
func (f *fairSet) add(p string, w, now int64) {
	if f.members == nil {
		f.members = make(map[string]*fairMember)
	}
	m := &fairMember{part: p, seen: now, weight: w}
	f.members[p] = m
	f.peak = max(f.peak, len(f.members))
	f.sum += w
	f.newest = max(f.newest, now)
	at := f.tail // m goes after at: from the tail, as now is the latest but for a clock stepped back
	for at != nil && !at.before(now, p) {
		at = at.prev
	}
	m.prev = at
	if at == nil {
		m.next, f.head = f.head, m
	} else {
		m.next, at.next = at.next, m
	}
	if m.next == nil {
		f.tail = m
	} else {
		m.next.prev = m
	}
}

// unlink takes m out of the list and its weight out of the sum.
func (f *fairSet) unlink(m *fairMember) {
	if m.prev == nil {
		f.head = m.next
	} else {
		m.prev.next = m.next
	}
	if m.next == nil {
		f.tail = m.prev
	} else {
		m.next.prev = m.prev
	}
	m.prev, m.next = nil, nil
	f.sum -= m.weight
}

// fairMode says how a Fair item answers a fixpoint (package doc "Fair
// share").
type fairMode uint8

const (
	fairNear  fairMode = iota // the decision: at the request's tolerance, up to its latest slot
	fairWhole                 // a deferral's time: at an appointment's tolerance, no horizon
	fairOwn                   // a denial's time: at the request's tolerance, no horizon
)

// fairItem is what a decision of a Fair item reads beyond a GCRA item's.
type fairItem struct {
	setCell   *cell      // the cell of the active set (fairSetKey)
	lane      *gcraState // the tenant's lane
	part      string     // the tenant's part (FairPart)
	w, W      int64      // the tenant's weight; the active weight sum, w included
	Ti, bi    int64      // the lane's interval and burst (FairLane)
	tat, prev int64      // the lane's tat: max(stored, now); as stored
	dvt       int64      // the tolerance K admits this request at (fairLeaves)
	held      int64      // the tolerance of a request back at its appointment
	hz        int64      // the latest slot of K: now + H in-share, else now
	a         int64      // the appointment a deferral books: max(now, the lane's time), now with Appointment
	span      int64      // FairSpan, µs
	in, appt  bool       // in-share; Appointment
	room      bool       // over its share, with others active, and its lane could still book it within FairSpan: it charges the lane
	mode      fairMode   // which fixpoint runs
	charged   bool       // the lane was charged: its mark is laneSet over prev
	laneSet   int64
}

// initFair reads what a Fair item needs on shard s for tenant sh of a
// request with appointment appt, decided at now: the active set's W, the
// lane, the standing. it is already initialised as a GCRA item.
func (it *item) initFair(s *shard, tag, key string, sh Share, appt bool, now int64) {
	f := &fairItem{part: FairPart(sh.Key), w: sh.Weighted(), appt: appt, hz: now + it.T,
		span: it.lim.FairSpan().Microseconds()}
	f.setCell = s.cell(tag, fairSetKey(key), now)
	var set *fairSet
	if f.setCell.cls != nil {
		set = f.setCell.cls.fair
	}
	f.W = set.weigh(f.part, f.w, now, f.span, false)
	B := it.lim.burst()
	f.Ti, f.bi = FairLane(it.T, B, f.W, f.w)
	f.lane = &s.cell(tag, fairLaneKey(key, f.part), now).gcraState
	f.prev = f.lane.tat
	f.tat = max(f.lane.tat, now)
	due := f.tat + it.cost*f.Ti - f.bi*f.Ti // when the lane admits the cost
	f.in = !appt && due <= f.hz
	f.held = it.dvt - fairLeaves(B, it.cost, 1)*it.T
	switch {
	case f.in:
		f.dvt = it.dvt
	case appt: // back at its appointment: at now, leaving the hold
		f.dvt, f.hz = f.held, now
	default: // over its share: at now, leaving FairOverHold, or FairIdleHold once its lane is booked FairSpan ahead
		f.room = f.W > f.w && due <= now+f.span
		leave := min(FairOverHold(B), B-it.cost)
		if !f.room && f.W > f.w {
			leave = FairIdleHold(B, it.cost)
		}
		f.dvt, f.hz = it.dvt-leave*it.T, now
	}
	f.a = now
	if !appt {
		f.a = max(now, due)
	}
	it.fair = f
}

// fairLeaves returns how many events of K's burst B a request of cost n
// back at its appointment leaves to those within their share (package
// doc "Fair share"): k times the fair hold, and never so much that a lone
// such request could not go at once when K is full: at most B - n. (One
// over its share leaves FairOverHold.)
func fairLeaves(B, n, k int64) int64 { return min(k*FairHold(B), B-n) }

// earliestFair is earliest for a Fair item: K's GCRA time at the
// request's tolerance, beyond past its latest slot; in the fixpoints of
// a deferral and a denial, with no horizon.
func (it *item) earliestFair(t int64) (int64, bool) {
	f := it.fair
	switch f.mode {
	case fairWhole:
		return max(t, it.tat+it.cost*it.T-f.held), false
	case fairOwn:
		return max(t, it.tat+it.cost*it.T-f.dvt), false
	}
	e := max(t, it.tat+it.cost*it.T-f.dvt)
	return e, e > f.hz
}

// hasFair reports whether a decision's stack has a Fair item.
func hasFair(items []item) bool {
	for i := range items {
		if items[i].fair != nil {
			return true
		}
	}
	return false
}

// deferFair is the second fixpoint of a stack with a Fair item whose
// first one stopped (package doc "Fair share"): every Fair item at the
// tolerance the request comes back at with its appointment, with no
// horizon, from the latest of now, the pause's end and the appointments.
// It returns the time, the decider and whether every limit admits then
// within its horizon.
func deferFair(items []item, now, paused int64) (t int64, decider int, ok bool) {
	t, decider = now, NoDecider
	if paused > t {
		t, decider = paused, PausedDecider
	}
	for i := range items {
		if f := items[i].fair; f != nil {
			f.mode = fairWhole
			if f.a > t {
				t, decider = f.a, i
			}
		}
	}
	return fixpoint(items, t, decider)
}

// denyFair is the fixpoint that gives the RetryAfter of a stack with a
// Fair item that is neither admitted nor deferred: when the stack would
// admit the request as it stands (every Fair item at the request's own
// tolerance, with no horizon) if nobody else reserved meanwhile.
func denyFair(items []item, now, paused int64) (t int64, decider int, ok bool) {
	t, decider = now, NoDecider
	if paused > t {
		t, decider = paused, PausedDecider
	}
	for i := range items {
		if f := items[i].fair; f != nil {
			f.mode = fairOwn
		}
	}
	return fixpoint(items, t, decider)
}

// chargeFair books what an admitted request takes of the lanes of its
// Fair items at slot t (in-share without Appointment, or over its share
// with room in its lane: the lane, as a GCRA charge at t) and writes
// their active sets.
func chargeFair(items []item, now, t int64) {
	for i := range items {
		if f := items[i].fair; f != nil {
			if f.in && !f.appt || f.room {
				f.bookLane(t, items[i].cost)
			}
			f.record(now)
		}
	}
}

// bookFair books a deferred request's appointments (without
// Appointment: each Fair item's lane, as a GCRA charge at its
// appointment) and writes the active sets.
func bookFair(items []item, now int64) {
	for i := range items {
		if f := items[i].fair; f != nil {
			if !f.appt {
				f.bookLane(f.a, items[i].cost)
			}
			f.record(now)
		}
	}
}

// bookLane charges the lane cost n at t, keeping the mark.
func (f *fairItem) bookLane(t, n int64) {
	f.lane.tat = max(f.tat, t) + n*f.Ti
	f.laneSet, f.charged = f.lane.tat, true
}

// record writes the decision into the active set.
func (f *fairItem) record(now int64) {
	cls := f.setCell.classes()
	if cls.fair == nil {
		cls.fair = &fairSet{}
	}
	cls.fair.weigh(f.part, f.w, now, f.span, true)
}

// fairBooking is what a booking of a stack with a Fair item keeps beyond
// a plain one's: the tenant's part, and per item the lane charge.
type fairBooking struct {
	part  string
	lanes []fairMark
}

// fairMark is the lane charge of one item of a booking: its mark and the
// lane's interval and burst as decided; charged is false for any item
// whose lane was not charged (and for items that are not Fair).
type fairMark struct {
	mark
	Ti, bi  int64
	charged bool
}

// fairMarks returns the lane charges of an admitted decision's items,
// nil when the stack has no Fair item.
func fairMarks(items []item) *fairBooking {
	var fb *fairBooking
	for i := range items {
		f := items[i].fair
		if f == nil {
			continue
		}
		if fb == nil {
			fb = &fairBooking{part: f.part, lanes: make([]fairMark, len(items))}
		}
		if f.charged {
			fb.lanes[i] = fairMark{mark: mark{set: f.laneSet, prev: f.prev}, Ti: f.Ti, bi: f.bi, charged: true}
		}
	}
	return fb
}

// settle is settle for a GCRA state charged with mark m: delta more (a
// debt, up to reach past now) or less (a refund, only while the state's
// tat is still m's) at interval T (package doc "Settle").
func (g *gcraState) settle(m mark, delta, T, reach, now int64) {
	delta = min(delta, MaxExact/T) // keeps stored times exact
	switch {
	case delta > 0: // debt: the next requests wait for it, at most reach from now
		if tat := min(max(g.tat, now)+delta*T, now+reach); tat > g.tat {
			g.tat = tat
		}
	case g.tat == m.set: // the latest reservation: as if it cost actual
		g.tat = m.set + delta*T
		if g.tat <= now {
			g.tat, g.holes = 0, nil
		}
	}
}

// settleLanes settles the lane charges of a booking, as package doc
// "Fair share" says: each at its interval and burst as decided, with a
// debt reaching at most the limit's Period and the lane's tolerance past
// now. The caller holds s.mu.
func (b *booking) settleLanes(s *shard, now int64, actual []int64) {
	for i, fm := range b.fair.lanes {
		it := &b.stack[i]
		if !fm.charged || actual[i] < 0 || actual[i] == it.Cost || Implausible(actual[i], it.Limit.Rate) {
			continue
		}
		g := &s.cell(b.tag, fairLaneKey(it.Key, b.fair.part), now).gcraState
		g.settle(fm.mark, actual[i]-it.Cost, fm.Ti, it.Limit.Period.Microseconds()+fm.bi*fm.Ti, now)
	}
}
