package quotatest

import (
	"slices"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// Model is a reference implementation of the decision, written straight
// from the design and deliberately unlike the stores: instead of a
// fixpoint it lists every time at which the answer can change (now, the
// pause's end, each GCRA limit's earliest time, each window boundary) and
// takes the first at which every limit admits. It keeps no TTLs and is not
// safe for concurrent use. Differential compares stores against it.
type Model struct {
	tat   map[string]int64
	count map[string]map[int64]int64
	pause map[string]int64
}

// NewModel returns an empty Model.
func NewModel() *Model {
	return &Model{tat: map[string]int64{}, count: map[string]map[int64]int64{}, pause: map[string]int64{}}
}

// ModelReservation is what the Model decided, with what Cancel needs.
type ModelReservation struct {
	quota.Result
	// Beyond is true when the first admitting time lies past the three
	// windows a store looks at: the stores deny such a request with a
	// RetryAfter that is only a lower bound, so it is not compared.
	Beyond bool
	slot   int64
	marks  []int64
	req    quota.Request
}

func keyOf(tag, key string) string { return tag + "\x00" + key }

func micros(t time.Time) int64 { return t.UnixMicro() }

func bounds(cal quota.Calendar, t int64) (int64, int64) {
	s, e := cal.Bounds(time.UnixMicro(t))
	return micros(s), micros(e)
}

// admits reports whether item i admits its cost at t.
func (m *Model) admits(req *quota.Request, i int, t, now int64) bool {
	it := req.Items[i]
	cost := req.CostOf(i)
	k := keyOf(req.Tag, it.Key)
	if it.Limit.Kind == quota.GCRA {
		tat := max(m.tat[k], now)
		return t >= tat+cost*it.Limit.Interval()-it.Limit.Tolerance()
	}
	start, _ := bounds(it.Limit.Calendar, t)
	return m.count[k][start]+cost <= it.Limit.Rate
}

// Reserve decides req at now.
func (m *Model) Reserve(req quota.Request, now time.Time) ModelReservation {
	n := micros(now)
	var paused int64
	for _, p := range req.Pauses {
		paused = max(paused, m.pause[keyOf(req.Tag, p)])
	}
	start := max(n, paused)
	candidates := []int64{start}
	horizon := int64(1<<62 - 1)
	for i, it := range req.Items {
		k := keyOf(req.Tag, it.Key)
		if it.Limit.Kind == quota.GCRA {
			tat := max(m.tat[k], n)
			candidates = append(candidates, tat+req.CostOf(i)*it.Limit.Interval()-it.Limit.Tolerance())
			continue
		}
		_, e := bounds(it.Limit.Calendar, n)
		for w := 0; w < 3; w++ {
			candidates = append(candidates, e)
			if w == 2 {
				horizon = min(horizon, e)
			}
			_, e = bounds(it.Limit.Calendar, e)
		}
	}
	slices.Sort(candidates)
	slot := int64(-1)
	for _, c := range candidates {
		if c < start {
			continue
		}
		ok := true
		for i := range req.Items {
			if !m.admits(&req, i, c, n) {
				ok = false
				break
			}
		}
		if ok {
			slot = c
			break
		}
	}
	r := ModelReservation{req: req}
	r.Limits = make([]quota.Status, len(req.Items))
	r.Beyond = slot < 0 || slot >= horizon
	r.Allowed = !r.Beyond && slot-n <= req.MaxWait.Microseconds()
	if !r.Allowed {
		if slot >= 0 {
			r.RetryAfter = time.Duration(slot-n) * time.Microsecond
		}
		for i := range req.Items {
			r.Limits[i] = m.status(&req, i, n, n)
		}
		return r
	}
	r.slot = slot
	r.Wait = time.Duration(slot-n) * time.Microsecond
	r.marks = make([]int64, len(req.Items))
	for i, it := range req.Items {
		k := keyOf(req.Tag, it.Key)
		cost := req.CostOf(i)
		if it.Limit.Kind == quota.GCRA {
			m.tat[k] = max(m.tat[k], n, slot) + cost*it.Limit.Interval()
			r.marks[i] = m.tat[k]
			continue
		}
		s, _ := bounds(it.Limit.Calendar, slot)
		if m.count[k] == nil {
			m.count[k] = map[int64]int64{}
		}
		m.count[k][s] += cost
		r.marks[i] = s
	}
	for i := range req.Items {
		r.Limits[i] = m.status(&req, i, n, slot)
	}
	return r
}

// status is the design's Remaining and ResetAfter of item i at time at.
func (m *Model) status(req *quota.Request, i int, now, at int64) quota.Status {
	it := req.Items[i]
	k := keyOf(req.Tag, it.Key)
	var rem, reset int64
	if it.Limit.Kind == quota.GCRA {
		tat := max(m.tat[k], now)
		T := it.Limit.Interval()
		d := it.Limit.Tolerance() - (tat - at)
		if d >= 0 {
			rem = d / T
		}
		reset = tat - now
	} else {
		s, e := bounds(it.Limit.Calendar, at)
		rem = it.Limit.Rate - m.count[k][s]
		reset = e - now
	}
	return quota.Status{Remaining: max(rem, 0), ResetAfter: time.Duration(max(reset, 0)) * time.Microsecond}
}

// Cancel gives back what the design says a cancel at now gives back.
func (m *Model) Cancel(r *ModelReservation, now time.Time) {
	n := micros(now)
	if !r.Allowed || r.marks == nil || n >= r.slot {
		return
	}
	for i, it := range r.req.Items {
		k := keyOf(r.req.Tag, it.Key)
		cost := r.req.CostOf(i)
		if it.Limit.Kind == quota.GCRA {
			own := cost * it.Limit.Interval()
			later := min(max(m.tat[k]-r.marks[i], 0), own)
			m.tat[k] -= own - later
			continue
		}
		if _, e := bounds(it.Limit.Calendar, r.marks[i]); n < e {
			m.count[k][r.marks[i]] = max(m.count[k][r.marks[i]]-cost, 0)
		}
	}
	r.marks = nil
}

// Pause pauses key in tag until now + d, never shortening a pause.
func (m *Model) Pause(tag, key string, d time.Duration, now time.Time) {
	if d <= 0 {
		return
	}
	k := keyOf(tag, key)
	m.pause[k] = max(m.pause[k], micros(now)+d.Microseconds())
}
