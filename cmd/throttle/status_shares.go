package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/redisstore"
)

// This file is what status shows of a limit shared among others: each
// priority class's headroom in a limit with class reserves, and a fair
// limit's tenants (row.Classes, row.Fair; the table's notes).

// classView is what one priority class has of a limit with class
// reserves.
type classView struct {
	Class string `json:"class"`
	// Left is how many events of cost 1 a request of the class could
	// have admitted at once, one after another (redisstore's
	// Snapshot.Headroom): its own lane and those below it, and what a
	// full lane above lends; in a window, rolling or concurrency limit,
	// what the reserves of the active classes above it leave.
	Left int64 `json:"left"`
	// Holds and HeldMS are, for a class above the bottom in a window,
	// rolling or concurrency limit, what it keeps from the classes below
	// while it is active, and how much longer it is (until ActiveFor
	// after its last admitted request); absent while it is not.
	Holds  int64 `json:"holds,omitempty"`
	HeldMS int64 `json:"held_ms,omitempty"`
}

// classViews returns what each class of p has of item i of snap, whose
// limit is q: nil for a limit without class reserves.
func classViews(p *providers.Provider, snap redisstore.Snapshot, i int, q *quota.Limit) []classView {
	if q.Reserve == nil || i >= len(snap.Items) {
		return nil
	}
	it := &snap.Items[i]
	out := make([]classView, q.Classes())
	for k := range out {
		c := classView{Class: p.ClassName(k), Left: snap.Headroom(i, q, k)}
		if c.Class == "" {
			c.Class = fmt.Sprintf("class %d", k)
		}
		if k < len(it.Held) && it.Held[k] > 0 {
			c.Holds, c.HeldMS = q.Hold(k), ceilMS(it.Held[k])
		}
		out[k] = c
	}
	return out
}

// classNotes says what each class has left of a row's limit, e.g.
// "interactive 2,900 left, batch 11,000 left", and what the active
// classes hold, e.g. "interactive holds 3,000 (41s more)".
func classNotes(r row) []string {
	if len(r.Classes) == 0 {
		return nil
	}
	left := make([]string, len(r.Classes))
	var held []string
	for k, c := range r.Classes {
		left[k] = c.Class + " " + count(c.Left) + " left"
		if c.HeldMS > 0 {
			held = append(held, fmt.Sprintf("%s holds %s (%s more)", c.Class, count(c.Holds), humanDuration(time.Duration(c.HeldMS)*time.Millisecond)))
		}
	}
	return append([]string{strings.Join(left, ", ")}, held...)
}

// fairView is what status shows of a fair limit (the fair field): who
// shares it, and, when the store reports them, its active tenants and
// one tenant's lane (with --tenant).
type fairView struct {
	// By is the fair field: "tenant" or "label:<name>".
	By string `json:"by"`
	// Active and Weight are the tenants active on the limit now and the
	// sum of their weights (package quota's "Fair share"); absent when
	// the store does not report them.
	Active *int64 `json:"active,omitempty"`
	Weight *int64 `json:"weight,omitempty"`
	// Tenant is, with --tenant, that tenant's lane; absent otherwise, or
	// when the store does not report it.
	Tenant *laneView `json:"tenant,omitempty"`
}

// laneView is one tenant's lane of a fair limit.
type laneView struct {
	// Tenant is the tenant's key part (the business or label value, or
	// "#" and a hash).
	Tenant string `json:"tenant"`
	// Weight is its weight: its plan's, or 1.
	Weight int64 `json:"weight"`
	// NextMS is how long until its lane admits its next request (its
	// next appointment, were it deferred now): 0 while it is within its
	// share.
	NextMS int64 `json:"next_appointment_ms"`
}

// fairState is what the store reports of item i's fair share: the
// active tenants, their weights' sum and, for a request that names a
// tenant (quota.Request.Share), when that tenant's lane would give its
// next appointment. ok is false when the snapshot reports nothing.
func fairState(snap redisstore.Snapshot, i int) (active, weight int64, next time.Duration, ok bool) {
	if i < 0 || i >= len(snap.Items) || snap.Items[i].Fair == nil {
		return 0, 0, 0, false
	}
	f := snap.Items[i].Fair
	return f.Tenants, f.Weight, f.Appointment, true
}

// fairOf returns what status shows of item i of a group's snapshot,
// whose limit is lim: nil for a limit that is not fair.
func (g *group) fairOf(i int, lim *providers.Limit) *fairView {
	if lim.Fair == nil {
		return nil
	}
	fv := &fairView{By: lim.Fair.String()}
	active, weight, next, ok := fairState(g.snap, i)
	if !ok {
		return fv
	}
	fv.Active, fv.Weight = &active, &weight
	if sh := g.req.Share; sh.Key != "" {
		fv.Tenant = &laneView{Tenant: sh.Key, Weight: sh.Weighted(), NextMS: ceilMS(next)}
	}
	return fv
}

// fairNotes says who shares a row's fair limit and, when known, how many
// are active and one tenant's lane, e.g. "fair by tenant: 3 active,
// weight 7; acme (weight 4) next appointment in 1.2s".
func fairNotes(r row) []string {
	f := r.Fair
	if f == nil {
		return nil
	}
	s := "fair by " + f.By
	if f.Active != nil && f.Weight != nil {
		s += fmt.Sprintf(": %s active, weight %s", count(*f.Active), count(*f.Weight))
	}
	out := []string{s}
	if l := f.Tenant; l != nil {
		lane := fmt.Sprintf("%s (weight %d) within its share", l.Tenant, l.Weight)
		if l.NextMS > 0 {
			lane = fmt.Sprintf("%s (weight %d) next appointment in %s", l.Tenant, l.Weight, humanDuration(time.Duration(l.NextMS)*time.Millisecond))
		}
		out = append(out, lane)
	}
	return out
}

// fairShare is the Share the requests of the business whose key part is
// part have on p's fair limits shared by tenant, at plan pl's weight
// (nil: 1): status reads its lane with it (--tenant). The zero Share when
// p has none.
func fairShare(p *providers.Provider, part string, pl *providers.Plan) quota.Share {
	for _, l := range allLimits(p) {
		if f := l.lim.Fair; f != nil && f.Label == "" {
			sh := quota.Share{Key: part, Weight: 1}
			if pl != nil {
				sh.Weight = pl.Weight
			}
			return sh
		}
	}
	return quota.Share{}
}
