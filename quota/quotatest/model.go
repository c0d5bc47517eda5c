package quotatest

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// Model is a reference implementation of the decision, written straight
// from the design and deliberately unlike the stores: instead of a
// fixpoint it lists every time at which the answer can change (now, the
// pause's end, each GCRA limit's earliest time, each window boundary) and
// takes the first at which every limit admits. Nor does it keep a GCRA
// key's tat: it keeps the charges that make it up and folds them (see
// charges.tat), so that Cancel is the design's rule itself rather than the
// stores' bookkeeping of it. A pause drains the GCRA buckets of the
// requests it holds back: the model books such a request's charge as if
// it went no earlier than the drain's floor (see floor). Nor does it keep
// a rolling window's buckets: it keeps a log of every event admitted and
// places each in its bucket when it asks what a limit counts; Check
// verifies the log against the exact rule, at most Rate in any trailing
// Period. Leases are intervals of time, [taken, ended), with no ids: a
// Concurrency limit admits when fewer than its rate of them contain the
// present. It keeps no TTLs and is not safe for
// concurrent use. Differential compares stores against it, and Check
// verifies that what it admitted never exceeds a limit.
//
// Priority classes and pacing (package quota's doc, "Priority classes"
// and "Pacing") are the design's predicates, not the stores' earliest
// times: a GCRA limit with classes is a set of lanes, each a GCRA key of
// the model's own, and admits at a time when any lane the class may use
// does, charging the lowest; a held limit reads a log of the admissions
// per key and class; a paced window admits x events by a time when its
// line (for the class, at that time) has reached x.
type Model struct {
	gcra  map[string]*charges
	count map[string]map[int64]int64
	log   map[string][]*event // rolling: the events admitted, uncancelled
	pause map[string]int64
	// leases are every lease taken, per key, released or not.
	leases map[string][]*lease
	// admitted is every reservation admitted, for Check.
	admitted []*ModelReservation
	// seen is, per key of a held limit with classes, every admission
	// of a class above the bottom: the activity log.
	seen map[string][]admission
	// fair is, per key of a Fair limit, its active set: each tenant's
	// part, weight and when it was last seen (see fairmodel.go).
	fair map[string]map[string]*tenantSeen
	// views are, during Reserve, the Fair items' views of the decision
	// (nil for other items).
	views []*fairView
}

// admission is one admitted request of a class on a key, at the
// decision's now.
type admission struct {
	class int
	at    int64
}

// charges is the state of a GCRA key: the reservations charged to it, in
// the order they were made, from the last time it was idle. A cancelled
// reservation's charge is taken out once every charge made after it has
// been taken out too (the design's Reservation rule: a cancelled slot
// comes back once every reservation after it is gone); until then it
// stays, at the slot it was given.
type charges []*charge

// event is one reservation's charge to a rolling window.
type event struct{ slot, cost int64 }

type charge struct {
	slot      int64 // the reserved time, µs
	occupy    int64 // cost * T, µs
	cancelled bool
}

// tat folds the charges, as GCRA charges each reservation at its slot:
// tat = max(tat, slot) + cost*T.
func (cs charges) tat() int64 {
	var tat int64
	for _, c := range cs {
		tat = max(tat, c.slot) + c.occupy
	}
	return tat
}

// lease is one lease of a Concurrency limit: held from taken until ended
// (its expiry, or when it was released).
type lease struct{ taken, ended, rate int64 }

// NewModel returns an empty Model.
func NewModel() *Model {
	return &Model{gcra: map[string]*charges{}, count: map[string]map[int64]int64{},
		log: map[string][]*event{}, pause: map[string]int64{}, leases: map[string][]*lease{},
		seen: map[string][]admission{}, fair: map[string]map[string]*tenantSeen{}}
}

// held returns the leases of key k that hold at now, and the soonest and
// the latest end among them.
func (m *Model) held(k string, now int64) (n, soonest, latest int64) {
	for _, l := range m.leases[k] {
		if l.taken <= now && now < l.ended {
			n++
			if soonest == 0 || l.ended < soonest {
				soonest = l.ended
			}
			latest = max(latest, l.ended)
		}
	}
	return n, soonest, latest
}

// ModelReservation is what the Model decided, with what Cancel needs.
type ModelReservation struct {
	quota.Result
	// Beyond is true when the first admitting time lies past the three
	// windows a store looks at: the stores deny such a request with a
	// RetryAfter that is only a lower bound, so it is not compared.
	Beyond  bool
	slot    int64
	charges []*charge // per item: the GCRA charge, nil for a window
	starts  []int64   // per item: the window start charged
	events  []*event  // per item: the rolling window's event, else nil
	leases  []*lease  // per item: the lease taken, nil but for Concurrency
	lanes   []int     // per item: the lane charged, for a GCRA limit with classes
	// fairLanes are, per Fair item, the tenant's lane charge (nil when
	// its lane was not charged), with the lane's key, interval and burst.
	fairLanes []*laneCharge
	// used is, per item once settled, the cost Check counts: the actual
	// cost when it is below the estimate (an excess is a debt, beyond
	// what the limit admits by design); nil before Settle.
	used    []int64
	settled bool // Settle or Cancel was called: a Settle does nothing

	cancelled bool // cancelled before its slot: it never went
	req       quota.Request
	at        time.Time // the decision's now
}

func keyOf(tag, key string) string { return tag + "\x00" + key }

func micros(t time.Time) int64 { return t.UnixMicro() }

// expiry is when a rolling window stops counting an event at slot: the
// end of its bucket (of width ceil(Period/RollingBuckets), aligned to the
// epoch) plus the period.
func expiry(l *quota.Limit, slot int64) int64 {
	p := l.Period.Microseconds()
	w := (p + quota.RollingBuckets - 1) / quota.RollingBuckets
	return slot/w*w + w + p
}

// counted is what rolling window l counts at t under key k: the events
// not expired by then.
func (m *Model) counted(l *quota.Limit, k string, t int64) int64 {
	var n int64
	for _, e := range m.log[k] {
		if expiry(l, e.slot) > t {
			n += e.cost
		}
	}
	return n
}

func bounds(cal quota.Calendar, t int64) (int64, int64) {
	s, e := cal.Bounds(time.UnixMicro(t))
	return micros(s), micros(e)
}

// floor is the least tat the latest pause of req, until paused, leaves
// GCRA item i: the design's "After a pause" says the bucket then holds,
// at the pause's end, room for this request's cost alone, drained by at
// most quota.PauseDrain. 0 when there was no pause or the item is a
// window.
func floor(req *quota.Request, i int, paused int64) int64 {
	return floorOf(req.Items[i].Limit, req.CostOf(i), paused)
}

// floorOf is floor for GCRA limit l (a lane, for a limit with classes:
// each lane is drained as a bucket of its own) and a request of cost
// cost.
func floorOf(l *quota.Limit, cost, paused int64) int64 {
	if paused == 0 || l.Kind != quota.GCRA {
		return 0
	}
	drained := min(l.Tolerance(), quota.PauseDrain.Microseconds())
	return paused + drained - cost*l.Interval()
}

// classOf is the class req has in limit l: its Class when l has classes,
// else 0.
func classOf(req *quota.Request, l *quota.Limit) int {
	if l.Reserve == nil {
		return 0
	}
	return req.Class
}

// laneKey is the model's key of lane k of the GCRA limit with classes
// whose key is k: the bottom lane is the limit's own key.
func laneKey(k string, lane int, l *quota.Limit) string {
	if lane == len(l.Reserve) {
		return k
	}
	return fmt.Sprintf("%s\x00lane%d", k, lane)
}

// gcraKey is the model's key of what reservation r charged in GCRA item
// i: its lane's, for a limit with classes.
func (r *ModelReservation) gcraKey(i int) string {
	k := keyOf(r.req.Tag, r.req.Items[i].Key)
	if l := r.req.Items[i].Limit; l.Reserve != nil {
		return laneKey(k, r.lanes[i], l)
	}
	return k
}

// laneTat is the tat of lane k of GCRA item i as a decision at now with
// a pause until paused sees it.
func (m *Model) laneTat(req *quota.Request, i, k int, now, paused int64) int64 {
	l := req.Items[i].Limit
	ln := l.Lanes()[k]
	return max(m.tat(laneKey(keyOf(req.Tag, req.Items[i].Key), k, l)), now, floorOf(&ln, req.CostOf(i), paused))
}

// laneAdmits returns the lowest lane of GCRA item i (a limit with
// classes) that admits req at t, or -1: a lane of the request's class or
// below by the GCRA rule; a lane above only while it is full at now, for
// a slot at most one interval of the whole limit after now.
func (m *Model) laneAdmits(req *quota.Request, i int, t, now, paused int64) int {
	l := req.Items[i].Limit
	cost := req.CostOf(i)
	lanes := l.Lanes()
	for k := len(lanes) - 1; k >= 0; k-- {
		ln := &lanes[k]
		if cost > ln.Burst {
			continue
		}
		tat := m.laneTat(req, i, k, now, paused)
		if k >= req.Class && t >= tat+cost*ln.Interval()-ln.Tolerance() {
			return k
		}
		if k < req.Class && tat == now && t <= now+l.Interval() {
			return k
		}
	}
	return -1
}

// hold is what the classes above req's keep from it in held item i: the
// Hold of every class with an admission on the key within the limit's
// ActiveSpan before now.
func (m *Model) hold(req *quota.Request, i int, now int64) int64 {
	l := req.Items[i].Limit
	if l.Reserve == nil || l.Kind == quota.GCRA {
		return 0
	}
	var h int64
	for k := 0; k < req.Class; k++ {
		for _, a := range m.seen[keyOf(req.Tag, req.Items[i].Key)] {
			if a.class == k && a.at+l.ActiveSpan().Microseconds() > now {
				h += l.Hold(k)
				break
			}
		}
	}
	return h
}

// paceLine is when paced window [s, e) lets its count reach x at the
// rate rl, computed as every store must: in float64, in this order.
func paceLine(s, e, rl, x int64) int64 {
	d := e - s
	return s - quota.PaceLead(d) + int64(math.Ceil(float64(x)*(float64(d)/float64(rl))))
}

// windowAdmits is whether window item i (of window [s, e) holding t, with
// count) admits req at t with the hold h: its count, the cost and h within
// the rate, and for a paced window, the line of the request's class at t
// reached.
func windowAdmits(req *quota.Request, i int, t, s, e, count, h int64) bool {
	l := req.Items[i].Limit
	x := count + req.CostOf(i) + h
	if !l.Pace {
		return x <= l.Rate
	}
	rl := l.Rate
	if classOf(req, l) > 0 && t < e-quota.PaceLead(e-s) {
		rl -= quota.Portion(l.PaceReserve, l.Rate)
	}
	return x <= rl && t >= paceLine(s, e, rl, x)
}

// admits reports whether item i admits its cost at t, with a pause in
// force until paused.
func (m *Model) admits(req *quota.Request, i int, t, now, paused int64) bool {
	it := req.Items[i]
	cost := req.CostOf(i)
	k := keyOf(req.Tag, it.Key)
	switch it.Limit.Kind {
	case quota.GCRA:
		if it.Limit.Reserve != nil {
			return m.laneAdmits(req, i, t, now, paused) >= 0
		}
		tat := max(m.tat(k), now, floor(req, i, paused))
		if v := m.view(i); v != nil {
			return v.admits(t, tat, cost)
		}
		return t >= tat+cost*it.Limit.Interval()-it.Limit.Tolerance()
	case quota.Concurrency: // decided apart, at now: see Reserve
		return true
	}
	if it.Limit.Kind == quota.Rolling {
		return m.counted(it.Limit, k, t)+cost+m.hold(req, i, now) <= it.Limit.Rate
	}
	start, end := bounds(it.Limit.Calendar, t)
	return windowAdmits(req, i, t, start, end, m.count[k][start], m.hold(req, i, now))
}

// Reserve decides req at now.
func (m *Model) Reserve(req quota.Request, now time.Time) *ModelReservation {
	n := micros(now)
	var paused int64
	for _, p := range req.Pauses {
		paused = max(paused, m.pause[keyOf(req.Tag, p)])
	}
	if req.Over.Tag != "" {
		paused = max(paused, m.pause[keyOf(req.Over.Tag, req.Over.Key)])
	}
	start := max(n, paused)
	candidates := []int64{start}
	horizon := int64(1<<62 - 1)
	m.views = m.fairViews(&req, n)
	defer func() { m.views = nil }()
	for i, it := range req.Items {
		k := keyOf(req.Tag, it.Key)
		if it.Limit.Kind == quota.Concurrency {
			continue
		}
		if it.Limit.Kind == quota.GCRA && it.Limit.Reserve != nil {
			for j, ln := range it.Limit.Lanes() {
				tat := m.laneTat(&req, i, j, n, paused)
				candidates = append(candidates, tat+req.CostOf(i)*ln.Interval()-ln.Tolerance())
			}
			continue
		}
		if it.Limit.Kind == quota.GCRA {
			tat := max(m.tat(k), n, floor(&req, i, paused))
			candidates = append(candidates, tat+req.CostOf(i)*it.Limit.Interval()-it.Limit.Tolerance())
			if v := m.view(i); v != nil {
				c := tat + req.CostOf(i)*it.Limit.Interval()
				candidates = append(candidates, c-v.dvt, c-v.whole, v.a)
			}
			continue
		}
		if it.Limit.Kind == quota.Rolling {
			for _, e := range m.log[k] {
				candidates = append(candidates, expiry(it.Limit, e.slot))
			}
			// A rolling window looks one period and one bucket ahead.
			p := it.Limit.Period.Microseconds()
			horizon = min(horizon, n+p+(p+quota.RollingBuckets-1)/quota.RollingBuckets+1)
			continue
		}
		s, e := bounds(it.Limit.Calendar, n)
		for w := 0; w < 3; w++ {
			if it.Limit.Pace { // where the lines reach this window's count
				x := m.count[k][s] + req.CostOf(i) + m.hold(&req, i, n)
				rl := it.Limit.Rate - quota.Portion(it.Limit.PaceReserve, it.Limit.Rate)
				candidates = append(candidates, paceLine(s, e, it.Limit.Rate, x), paceLine(s, e, rl, x), e-quota.PaceLead(e-s))
			}
			candidates = append(candidates, e)
			if w == 2 {
				horizon = min(horizon, e)
			}
			s, e = bounds(it.Limit.Calendar, e)
		}
	}
	slices.Sort(candidates)
	// search returns the first candidate from from on at which every
	// item admits, or -1.
	search := func(from int64) int64 {
		for _, c := range candidates {
			if c < from {
				continue
			}
			ok := true
			for i := range req.Items {
				if !m.admits(&req, i, c, n, paused) {
					ok = false
					break
				}
			}
			if ok {
				return c
			}
		}
		return -1
	}
	slot := search(start)
	r := &ModelReservation{req: req, at: now}
	r.Limits = make([]quota.Status, len(req.Items))
	r.Beyond = slot < 0 || slot >= horizon
	r.Allowed = !r.Beyond && slot-n <= req.MaxWaitMicros()
	// A Concurrency limit whose leases are all held at now denies,
	// whatever the wait, until its soonest lease ends.
	full := false
	for i, it := range req.Items {
		if it.Limit.Kind != quota.Concurrency {
			continue
		}
		if held, soonest, _ := m.held(keyOf(req.Tag, it.Key), n); held+m.hold(&req, i, n) >= it.Limit.Rate {
			r.Allowed, r.Decider, full = false, i, true
			slot = max(slot, soonest)
			break
		}
	}
	if r.Beyond && !full && m.fairStack() {
		// No slot near now: the second search, with every Fair item at
		// its whole tolerance, from its appointment on.
		from := start
		for _, v := range m.views {
			if v != nil {
				v.second = true
				from = max(from, v.a)
			}
		}
		slot = search(from)
		r.Beyond = slot < 0 || slot >= horizon
		if r.Deferred = !r.Beyond && slot-n <= req.MaxWaitMicros(); r.Deferred {
			m.fairDefer(&req, n)
		} else {
			// Denied: when it would go as it stands, at its own
			// tolerance.
			for _, v := range m.views {
				if v != nil {
					v.second, v.own = false, true
				}
			}
			slot = search(start)
			r.Beyond = slot < 0 || slot >= horizon
		}
	}
	if !r.Allowed {
		if slot >= 0 {
			r.RetryAfter = time.Duration(slot-n) * time.Microsecond
		}
		for i := range req.Items {
			r.Limits[i] = m.status(&req, i, n, n, paused, -1)
		}
		return r
	}
	r.slot = slot
	r.Wait = time.Duration(slot-n) * time.Microsecond
	r.charges = make([]*charge, len(req.Items))
	r.starts = make([]int64, len(req.Items))
	r.leases = make([]*lease, len(req.Items))
	r.events = make([]*event, len(req.Items))
	r.lanes = make([]int, len(req.Items))
	// The lanes charged, read before any charge: the charges below
	// change what each lane admits.
	for i, it := range req.Items {
		if it.Limit.Kind == quota.GCRA && it.Limit.Reserve != nil {
			r.lanes[i] = m.laneAdmits(&req, i, slot, n, paused)
		}
	}
	for i, it := range req.Items {
		k := keyOf(req.Tag, it.Key)
		cost := req.CostOf(i)
		if it.Limit.Reserve != nil && it.Limit.Kind != quota.GCRA && req.Class < len(it.Limit.Reserve) {
			m.seen[k] = append(m.seen[k], admission{class: req.Class, at: n})
		}
		if it.Limit.Kind == quota.Concurrency {
			r.leases[i] = &lease{taken: n, ended: slot + it.Limit.Period.Microseconds(), rate: it.Limit.Rate}
			m.leases[k] = append(m.leases[k], r.leases[i])
			continue
		}
		if it.Limit.Kind == quota.GCRA {
			l := it.Limit
			if l.Reserve != nil { // the lane's own GCRA key
				k = laneKey(k, r.lanes[i], l)
				l = &l.Lanes()[r.lanes[i]]
			}
			cs := m.gcra[k]
			if cs == nil {
				cs = &charges{}
				m.gcra[k] = cs
			}
			if cs.tat() <= n { // idle: no charge can matter any more
				*cs = (*cs)[:0]
			}
			// Drained by a pause: booked as if it went at the floor.
			at := max(slot, floorOf(l, cost, paused))
			r.charges[i] = &charge{slot: at, occupy: cost * l.Interval()}
			*cs = append(*cs, r.charges[i])
			continue
		}
		if it.Limit.Kind == quota.Rolling {
			r.events[i] = &event{slot: slot, cost: cost}
			m.log[k] = append(m.log[k], r.events[i])
			continue
		}
		s, _ := bounds(it.Limit.Calendar, slot)
		if m.count[k] == nil {
			m.count[k] = map[int64]int64{}
		}
		m.count[k][s] += cost
		r.starts[i] = s
	}
	r.fairLanes = m.fairCharge(&req, n, slot)
	m.admitted = append(m.admitted, r)
	for i := range req.Items {
		r.Limits[i] = m.status(&req, i, n, slot, paused, r.lanes[i])
	}
	return r
}

// status is the design's Remaining and ResetAfter of item i at time at
// (the slot of an admitted request, whose charge is made; now for a
// denied one, with its pause's drain). charged is, for a GCRA limit with
// classes, the lane charged, or -1.
func (m *Model) status(req *quota.Request, i int, now, at, paused int64, charged int) quota.Status {
	it := req.Items[i]
	k := keyOf(req.Tag, it.Key)
	var rem, reset int64
	// An admitted request's charge is at or after its drain's floor,
	// so the floor matters only to a denied one.
	least := floor(req, i, paused)
	if it.Limit.Kind == quota.GCRA && it.Limit.Reserve != nil {
		// Each lane as a GCRA limit of its own, summed; a lane not
		// charged is seen as the decision saw it, drained by the pause.
		for j, ln := range it.Limit.Lanes() {
			tat := m.laneTat(req, i, j, now, paused)
			if j == charged {
				tat = max(m.tat(laneKey(k, j, it.Limit)), now)
			}
			if d := ln.Tolerance() - (max(tat, at) - at); d >= 0 {
				rem += d / ln.Interval()
			}
			reset = max(reset, tat-now)
		}
		return quota.Status{Remaining: rem, ResetAfter: time.Duration(reset) * time.Microsecond}
	}
	if it.Limit.Kind == quota.Concurrency {
		held, _, latest := m.held(k, now)
		rem, reset = it.Limit.Rate-held, latest-now
	} else if it.Limit.Kind == quota.GCRA {
		tat := max(m.tat(k), now, least)
		T := it.Limit.Interval()
		d := it.Limit.Tolerance() - (tat - at)
		if d >= 0 {
			rem = d / T
		}
		reset = tat - now
	} else if it.Limit.Kind == quota.Rolling {
		rem = it.Limit.Rate - m.counted(it.Limit, k, at)
		for _, e := range m.log[k] {
			reset = max(reset, expiry(it.Limit, e.slot)-now)
		}
	} else {
		s, e := bounds(it.Limit.Calendar, at)
		rem = it.Limit.Rate - m.count[k][s]
		reset = e - now
	}
	return quota.Status{Remaining: max(rem, 0), ResetAfter: time.Duration(max(reset, 0)) * time.Microsecond}
}

// tat is the GCRA state of key k.
func (m *Model) tat(k string) int64 {
	if cs := m.gcra[k]; cs != nil {
		return cs.tat()
	}
	return 0
}

// Cancel gives back what the design says a cancel at now gives back: the
// leases whenever it comes, the rest only before the slot.
func (m *Model) Cancel(r *ModelReservation, now time.Time) {
	n := micros(now)
	if !r.Allowed || r.cancelled {
		return
	}
	r.settled = true
	m.Release(r, now)
	if n >= r.slot {
		return
	}
	r.cancelled = true
	for i, it := range r.req.Items {
		k := keyOf(r.req.Tag, it.Key)
		if it.Limit.Kind == quota.Concurrency {
			continue
		}
		if it.Limit.Kind == quota.GCRA {
			r.charges[i].cancelled = true
			m.gcra[r.gcraKey(i)].trim()
			if lc := r.fairLane(i); lc != nil { // the lane charge too, by the same rule
				lc.c.cancelled = true
				m.gcra[lc.key].trim()
			}
			continue
		}
		if it.Limit.Kind == quota.Rolling {
			// The slot has not come, so neither has the event's expiry.
			m.log[k] = slices.DeleteFunc(m.log[k], func(e *event) bool { return e == r.events[i] })
			continue
		}
		if _, e := bounds(it.Limit.Calendar, r.starts[i]); n < e {
			m.count[k][r.starts[i]] = max(m.count[k][r.starts[i]]-r.req.CostOf(i), 0)
		}
	}
}

// Settle books r's actual costs at now (one per item, below zero or
// quota.Implausible: as charged), as the design says: an excess is a debt
// charged at now (a charge of the excess at slot now), cut where it would
// take the tat past now + the limit's DebtReach; a GCRA refund only when
// r's charge is the last of its key (no later one could have been placed
// on it), the charge then counting the actual cost; a window refund while
// the window is open. Leases and rolling windows are not settled.
func (m *Model) Settle(r *ModelReservation, actual []int64, now time.Time) {
	n := micros(now)
	if !r.Allowed || r.settled {
		return
	}
	r.settled = true
	r.used = make([]int64, len(actual))
	for i, it := range r.req.Items {
		est := r.req.CostOf(i)
		r.used[i] = est
		if actual[i] < 0 || actual[i] == est || it.Limit.Kind == quota.Concurrency || it.Limit.Kind == quota.Rolling ||
			quota.Implausible(actual[i], it.Limit.Learned(r.Limits[i].Rate).Rate) {
			continue
		}
		r.used[i] = min(est, actual[i])
		k := keyOf(r.req.Tag, it.Key)
		delta := actual[i] - est
		if it.Limit.Kind == quota.GCRA {
			l := it.Limit
			if l.Reserve != nil { // the lane charged, at its own limit
				l = &l.Lanes()[r.lanes[i]]
			}
			m.gcra[r.gcraKey(i)].settle(r.charges[i], delta, l.Interval(), l.DebtReach(), n)
			if lc := r.fairLane(i); lc != nil { // the lane at its own interval and reach
				m.gcra[lc.key].settle(lc.c, delta, lc.Ti, l.Period.Microseconds()+lc.bi*lc.Ti, n)
			}
			continue
		}
		if _, e := bounds(it.Limit.Calendar, r.starts[i]); n < e {
			m.count[k][r.starts[i]] = max(m.count[k][r.starts[i]]+delta, 0)
		}
	}
}

// Release ends r's leases at now, those that have not ended.
func (m *Model) Release(r *ModelReservation, now time.Time) {
	for _, l := range r.leases {
		if l != nil {
			l.ended = min(l.ended, micros(now))
		}
	}
}

// Renew moves the end of r's leases that hold at now to a TTL from now,
// never earlier.
func (m *Model) Renew(r *ModelReservation, now time.Time) {
	n := micros(now)
	for i, l := range r.leases {
		if l != nil && n < l.ended {
			l.ended = max(l.ended, n+r.req.Items[i].Limit.Period.Microseconds())
		}
	}
}

// Check returns an error when what the model admitted exceeds a limit. It
// looks at every admitted reservation that went or may still go (all but
// those cancelled before their slot) and requires, per key, for a GCRA
// limit that any of them at slots x <= y with costs summing to c in [x, y]
// have c*T <= y - x + DVT (the GCRA bound: a burst of Burst, then one per
// T), for a window that the costs whose slot lies in one window sum to at
// most its rate, for a rolling window that the costs whose slot lies in
// any trailing period (x - Period, x] sum to at most its rate (the exact
// rule, which knows nothing of buckets), and for a Concurrency limit that
// no more than its rate of leases hold at any time. It assumes that a key
// is always named with the same limit, as Differential does.
func (m *Model) Check() error {
	for k, ls := range m.leases {
		// +1 when a lease is taken, -1 when it ends; at one time, ends
		// first (a lease ended at t no longer holds at t).
		type edge struct{ at, d int64 }
		var edges []edge
		for _, l := range ls {
			if l.taken < l.ended {
				edges = append(edges, edge{l.taken, 1}, edge{l.ended, -1})
			}
		}
		slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.d, b.d)) })
		var held int64
		for _, e := range edges {
			if held += e.d; held > ls[0].rate {
				return fmt.Errorf("key %q: %d leases held at %v, above the rate %d", k, held, time.UnixMicro(e.at), ls[0].rate)
			}
		}
	}
	type keyed struct {
		lim    *quota.Limit
		events []event
	}
	keys := map[string]*keyed{}
	var order []string
	for _, r := range m.admitted {
		if r.cancelled {
			continue
		}
		for i, it := range r.req.Items {
			if it.Limit.Kind == quota.Concurrency {
				continue
			}
			k := keyOf(r.req.Tag, it.Key)
			kd := keys[k]
			if kd == nil {
				kd = &keyed{lim: it.Limit}
				keys[k] = kd
				order = append(order, k)
			}
			cost := r.req.CostOf(i)
			if r.used != nil {
				cost = r.used[i]
			}
			kd.events = append(kd.events, event{r.slot, cost})
			if it.Limit.Kind == quota.GCRA && it.Limit.Reserve != nil { // the lane too, a GCRA limit of its own
				lk := "lane " + r.gcraKey(i) // the bottom lane's key is the limit's
				ld := keys[lk]
				if ld == nil {
					ld = &keyed{lim: &it.Limit.Lanes()[r.lanes[i]]}
					keys[lk] = ld
					order = append(order, lk)
				}
				ld.events = append(ld.events, event{r.slot, cost})
			}
		}
	}
	for _, k := range order {
		kd := keys[k]
		l := kd.lim
		if l.Kind == quota.GCRA && l.Reserve != nil {
			// Lanes each round their interval up, not the whole
			// limit's: what they admit together is bounded by the
			// exact rate, Burst + Rate*span/Period in any span. With P
			// the sum of costs before event i and slots taken from the
			// first, the bound for events i..j is (Period*P_(j+1) -
			// Rate*slot_j) - (Period*P_i - Rate*slot_i) <= Burst*Period.
			ev := kd.events
			slices.SortStableFunc(ev, func(a, b event) int { return cmp.Compare(a.slot, b.slot) })
			p, burst := l.Period.Microseconds(), l.Capacity()
			var sum int64
			least := int64(math.MaxInt64)
			for _, e := range ev {
				at := e.slot - ev[0].slot
				least = min(least, p*sum-l.Rate*at)
				sum += e.cost
				if over := p*sum - l.Rate*at - least; over > burst*p {
					return fmt.Errorf("limit %s key %q: its lanes admitted %d events beyond Burst + Rate*span in a span ending at slot %v",
						l.Name, k, (over-burst*p+p-1)/p, time.UnixMicro(e.slot))
				}
			}
			continue
		}
		if l.Kind == quota.GCRA {
			// With events sorted by slot and P the sum of costs before
			// event i, the bound for events i..j is
			// (T*P_(j+1) - slot_j) - (T*P_i - slot_i) <= DVT: keep the
			// least T*P_i - slot_i seen.
			ev := kd.events
			slices.SortStableFunc(ev, func(a, b event) int { return cmp.Compare(a.slot, b.slot) })
			T, dvt := l.Interval(), l.Tolerance()
			var sum int64
			least := int64(math.MaxInt64)
			for _, e := range ev {
				least = min(least, T*sum-e.slot)
				sum += e.cost
				if over := T*sum - e.slot - least; over > dvt {
					return fmt.Errorf("limit %s key %q: admitted %dµs of GCRA charge beyond the bound in a span ending at slot %v",
						l.Name, k, over-dvt, time.UnixMicro(e.slot))
				}
			}
			continue
		}
		if l.Kind == quota.Rolling {
			// The count of (x - P, x] is highest at an event's slot x.
			ev := kd.events
			slices.SortStableFunc(ev, func(a, b event) int { return cmp.Compare(a.slot, b.slot) })
			p := l.Period.Microseconds()
			var sum int64
			first := 0
			for _, e := range ev {
				sum += e.cost
				for ev[first].slot <= e.slot-p {
					sum -= ev[first].cost
					first++
				}
				if sum > l.Rate {
					return fmt.Errorf("limit %s key %q: admitted %d in the %v up to %v, above its rate %d",
						l.Name, k, sum, l.Period, time.UnixMicro(e.slot), l.Rate)
				}
			}
			continue
		}
		per := map[int64]int64{}
		for _, e := range kd.events {
			s, _ := bounds(l.Calendar, e.slot)
			if per[s] += e.cost; per[s] > l.Rate {
				return fmt.Errorf("limit %s key %q: admitted %d in the window starting %v, above its rate %d",
					l.Name, k, per[s], time.UnixMicro(s), l.Rate)
			}
		}
		if l.Pace {
			if err := checkPaced(l, k, kd.events); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkPaced checks that a paced window's events, sorted by slot, never
// run ahead of its loosest line (the whole rate): the x-th event of a
// window goes no sooner than the line lets the count reach x.
func checkPaced(l *quota.Limit, k string, events []event) error {
	ev := slices.Clone(events)
	slices.SortStableFunc(ev, func(a, b event) int { return cmp.Compare(a.slot, b.slot) })
	var sum, start int64
	for j, e := range ev {
		s, end := bounds(l.Calendar, e.slot)
		if s != start {
			sum, start = 0, s
		}
		sum += e.cost
		if j+1 < len(ev) && ev[j+1].slot == e.slot {
			continue // the events of one slot count together
		}
		if line := paceLine(s, end, l.Rate, sum); e.slot < line {
			return fmt.Errorf("limit %s key %q: %d admitted by %v, ahead of the paced line, which reaches it at %v",
				l.Name, k, sum, time.UnixMicro(e.slot), time.UnixMicro(line))
		}
	}
	return nil
}

// Pause pauses key in tag until now + d, never shortening a pause.
func (m *Model) Pause(tag, key string, d time.Duration, now time.Time) {
	if d <= 0 {
		return
	}
	k := keyOf(tag, key)
	m.pause[k] = max(m.pause[k], micros(now)+d.Microseconds())
}
