package quotatest

import (
	"cmp"
	"slices"

	"github.com/fleetquota/throttle/quota"
)

// This file is the model's fair share (package quota's doc, "Fair
// share"), straight from the rules: the active set is a map of tenants,
// sorted when a decision needs its oldest, and W is summed from it each
// time; each tenant's lane is a GCRA key of the model's own, a list of
// charges like any other.

// tenantSeen is one tenant of a Fair key's active set.
type tenantSeen struct{ seen, weight int64 }

// fairView is what a decision sees of one Fair item.
type fairView struct {
	T, dvt  int64 // K's interval; the tolerance the request runs at: DVT, less the hold over its share
	whole   int64 // the tolerance of an appointment: of the second search
	hz      int64 // now + H
	a       int64 // the appointment: when the lane admits the cost, at least now (now with Appointment)
	Ti, bi  int64 // the lane (quota.FairLane)
	in      bool  // in-share
	room    bool  // over its share, others active, and its lane could book it within the span: admitted, it charges the lane
	key     string
	laneKey string
	part    string
	w, span int64
	// second is set for the second search: K at its whole tolerance,
	// no horizon; own for the third: at dvt, no horizon.
	second, own bool
}

// laneCharge is a reservation's charge of a tenant's lane.
type laneCharge struct {
	c      *charge
	key    string
	Ti, bi int64
}

// view is the Fair view of item i of the decision under way, or nil.
func (m *Model) view(i int) *fairView {
	if i < len(m.views) {
		return m.views[i]
	}
	return nil
}

// fairStack reports whether the decision under way has a Fair item.
func (m *Model) fairStack() bool {
	return slices.ContainsFunc(m.views, func(v *fairView) bool { return v != nil })
}

// admits is whether K admits at t with its tat as the decision sees it.
func (v *fairView) admits(t, tat, cost int64) bool {
	switch {
	case v.second:
		return t >= tat+cost*v.T-v.whole
	case v.own:
		return t >= tat+cost*v.T-v.dvt
	}
	return t <= v.hz && t >= tat+cost*v.T-v.dvt
}

// fairLaneKey is the model's key of tenant part's lane of Fair key k.
func fairLaneKey(k, part string) string { return k + "\x00fair\x00" + part }

// activeW is the W a decision at now of tenant part with weight w sees on
// Fair key k, by the rules: with no member live the set is empty; else
// its stale members oldest in (seen, part), at most quota.FairExpire,
// leave; then part joins or is refreshed. With write, the set becomes
// that.
func (m *Model) activeW(k, part string, w, now, span int64, write bool) int64 {
	set := m.fair[k]
	live := false
	for _, t := range set {
		live = live || t.seen+span > now
	}
	if !live {
		if write {
			m.fair[k] = map[string]*tenantSeen{part: {seen: now, weight: w}}
		}
		return w
	}
	parts := make([]string, 0, len(set))
	for p := range set {
		parts = append(parts, p)
	}
	slices.SortFunc(parts, func(a, b string) int { return cmp.Or(cmp.Compare(set[a].seen, set[b].seen), cmp.Compare(a, b)) })
	left := map[string]bool{}
	for _, p := range parts[:min(len(parts), quota.FairExpire)] {
		if set[p].seen+span <= now {
			left[p] = true
		}
	}
	W := w
	for p, t := range set {
		if !left[p] && p != part {
			W += t.weight
		}
	}
	if write {
		for p := range left {
			delete(set, p)
		}
		set[part] = &tenantSeen{seen: now, weight: w}
	}
	return W
}

// fairViews returns the views of req's Fair items at now (nil for the
// other items, and nil when there are none).
func (m *Model) fairViews(req *quota.Request, now int64) []*fairView {
	var views []*fairView
	for i, it := range req.Items {
		l := it.Limit
		if !l.Fair {
			continue
		}
		if views == nil {
			views = make([]*fairView, len(req.Items))
		}
		k := keyOf(req.Tag, it.Key)
		cost := req.CostOf(i)
		v := &fairView{T: l.Interval(), key: k, part: quota.FairPart(req.Share.Key),
			w: req.Share.Weighted(), span: l.FairSpan().Microseconds()}
		v.hz = now + v.T
		v.laneKey = fairLaneKey(k, v.part)
		W := m.activeW(k, v.part, v.w, now, v.span, false)
		v.Ti, v.bi = quota.FairLane(v.T, l.Capacity(), W, v.w)
		due := max(m.tat(v.laneKey), now) + cost*v.Ti - v.bi*v.Ti
		v.in = !req.Appointment && due <= v.hz
		// What is left of the burst once the hold is kept (once for an
		// appointment, FairOverHold over its share), but never less than the
		// cost: so it can still go, at now, when K is full.
		B, h := l.Capacity(), quota.FairHold(l.Capacity())
		v.whole = max(B-h, cost) * v.T
		switch {
		case v.in:
			v.dvt = l.Tolerance()
		case req.Appointment:
			v.dvt, v.hz = v.whole, now
		default:
			// Over its share: FairOverHold while its lane could still book
			// it an appointment within its max wait (and then its lane pays
			// for what it takes), else FairIdleHold; alone, FairOverHold.
			v.room = W > v.w && due <= now+v.span
			leave := quota.FairOverHold(B)
			if !v.room && W > v.w {
				leave = quota.FairIdleHold(B, cost)
			}
			v.dvt, v.hz = max(B-leave, cost)*v.T, now
		}
		v.a = now
		if !req.Appointment {
			v.a = max(now, due)
		}
		views[i] = v
	}
	return views
}

// lane returns the charges of a Fair view's lane, idle ones dropped.
func (m *Model) lane(v *fairView, now int64) *charges {
	cs := m.gcra[v.laneKey]
	if cs == nil {
		cs = &charges{}
		m.gcra[v.laneKey] = cs
	}
	if cs.tat() <= now {
		*cs = (*cs)[:0]
	}
	return cs
}

// fairDefer books a deferred decision's appointments (each Fair item's
// lane charged at its appointment, unless the request has one already)
// and records its tenant in each active set.
func (m *Model) fairDefer(req *quota.Request, now int64) {
	for i, v := range m.views {
		if v == nil {
			continue
		}
		if !req.Appointment {
			cs := m.lane(v, now)
			*cs = append(*cs, &charge{slot: v.a, occupy: req.CostOf(i) * v.Ti})
		}
		m.activeW(v.key, v.part, v.w, now, v.span, true)
	}
}

// fairCharge books what an admitted decision at slot takes of its Fair
// items' lanes (in-share without Appointment, or over its share with
// room in its lane: a charge at slot) and
// records its tenant in each active set. It returns the lane charges per
// item, nil without Fair items.
func (m *Model) fairCharge(req *quota.Request, now, slot int64) []*laneCharge {
	if !m.fairStack() {
		return nil
	}
	lanes := make([]*laneCharge, len(req.Items))
	for i, v := range m.views {
		if v == nil {
			continue
		}
		if v.in && !req.Appointment || v.room {
			cs := m.lane(v, now)
			lanes[i] = &laneCharge{c: &charge{slot: slot, occupy: req.CostOf(i) * v.Ti}, key: v.laneKey, Ti: v.Ti, bi: v.bi}
			*cs = append(*cs, lanes[i].c)
		}
		m.activeW(v.key, v.part, v.w, now, v.span, true)
	}
	return lanes
}

// fairLane is the lane charge of r's item i, or nil.
func (r *ModelReservation) fairLane(i int) *laneCharge {
	if i < len(r.fairLanes) {
		return r.fairLanes[i]
	}
	return nil
}

// trim takes the cancelled charges off the end of cs: a cancelled
// charge comes back once every charge after it has.
func (cs *charges) trim() {
	for len(*cs) > 0 && (*cs)[len(*cs)-1].cancelled {
		*cs = (*cs)[:len(*cs)-1]
	}
}

// settle books delta more or less than charge c cost, at interval T, as
// the design says: an excess is a charge at now, cut where it would take
// the tat past now + reach; a refund only when c is the last charge.
func (cs *charges) settle(c *charge, delta, T, reach, now int64) {
	switch {
	case delta > 0:
		from := max(cs.tat(), now)
		if occupy := min(delta*T, now+reach-from); occupy > 0 {
			*cs = append(*cs, &charge{slot: now, occupy: occupy})
		}
	case len(*cs) > 0 && (*cs)[len(*cs)-1] == c:
		c.occupy += delta * T
	}
}
