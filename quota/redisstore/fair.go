package redisstore

import (
	"fmt"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// This file is the Go side of fair share (package quota's doc, "Fair
// share"; reserve.lua, "Fair share"): what a decision of a Fair limit
// sends beyond a GCRA limit's, what its reply adds, and what a booking
// keeps of the tenant's lane for Cancel and Settle. A stack without a
// Fair item takes none of these paths: its keys, arguments, reply and
// booking are those it had before fair share existed.

const (
	// fairArgc is how many more ARGV entries a Fair item takes than a
	// GCRA item: its burst, span, the tenant's part and weight, and
	// whether the request comes back at an appointment.
	fairArgc = 5
	// fairEntries is how many entries a Fair item appends to a
	// decision's reply: its lane's mark and prev (0 when the decision did
	// not charge it), interval and burst.
	fairEntries = 4
	// fairPeekEntries is how many more a peek appends: the active set's
	// members and weight, how far the lane is booked, and when it would
	// give an appointment.
	fairPeekEntries = 4
)

// share is what a request's Fair items send beyond a GCRA item's: its
// tenant's part (quota.FairPart), weight, and whether it comes back at an
// appointment. The zero value for a stack without a Fair item.
type share struct {
	part   string
	weight int64
	appt   bool
}

// shareOf returns the share of req, whose extra keys x counts.
func shareOf(req *quota.Request, x extra) share {
	if x.fair == 0 {
		return share{}
	}
	return share{part: x.part, weight: req.Share.Weighted(), appt: req.Appointment}
}

// fairArgs appends to args the item of a Fair limit whose static
// arguments are st, for cost and the tenant sh: "F", cost, T, DVT, B,
// span (µs), part, weight, appointment (1 or 0) (reserve.lua, "ARGV").
func fairArgs(args []any, st *limitArgs, cost int64, sh share) []any {
	appt := 0
	if sh.appt {
		appt = 1
	}
	return append(args, "F", cost, st.boxed[0], st.boxed[1], st.fair[0], st.fair[1], sh.part, sh.weight, appt)
}

// fairLane is a Fair item's tenant's lane as a decision replied it: the
// tat it set and the stored tat it replaced (both 0 when it did not
// charge the lane), and the lane's interval (µs) and burst.
type fairLane struct {
	mark, prev, T, burst int64
}

// parseFair parses the entries a decision's reply appends for nf Fair
// items (fairEntries each), of a decision allowed or not.
func parseFair(vals []int64, nf int, allowed bool) ([]fairLane, error) {
	lanes := make([]fairLane, nf)
	for j := range lanes {
		v := vals[fairEntries*j : fairEntries*(j+1)]
		for k, x := range v {
			if x < 0 {
				return nil, fmt.Errorf("%w: Fair item %d: entry %d is %d, want an integer >= 0", errReply, j, k, x)
			}
		}
		ln := fairLane{mark: v[0], prev: v[1], T: v[2], burst: v[3]}
		if ln.T < 1 || ln.burst < 1 || (ln.mark > 0 && (!allowed || ln.prev >= ln.mark)) {
			return nil, fmt.Errorf("%w: Fair item %d: lane %+v of a decision allowed %v", errReply, j, ln, allowed)
		}
		lanes[j] = ln
	}
	return lanes, nil
}

// fairCharged returns how many tenants' lanes the decision charged.
func (d *decision) fairCharged() int {
	n := 0
	for _, ln := range d.fair {
		if ln.mark > 0 {
			n++
		}
	}
	return n
}

// bookFair keeps, when the decision charged it, the lane of tenant part
// of item i, a Fair item of limit l, as the booking's lane k (fairLanes):
// a GCRA item of the lane's interval and tolerance as decided, whose
// debt reaches the limit's Period and the lane's tolerance past now
// (package quota's doc, "Fair share"), and whose end is i, the item whose
// cost it settles by. It returns how many lanes it kept (0 or 1).
func (b *booking) bookFair(k, i int, l *quota.Limit, ln fairLane, part string) int {
	if ln.mark == 0 {
		return 0
	}
	dvt := ln.burst * ln.T
	b.fairLanes()[k] = bookedItem{kind: quota.GCRA, cost: b.items[i].cost, mark: ln.mark, prev: ln.prev,
		T: ln.T, dvt: dvt, rate: l.Rate, reach: l.Period.Microseconds() + dvt, end: int64(i),
		learned: b.s.fairLaneKey(b.keys[i], part)}
	return 1
}

// fairLanes returns the tenants' lanes the reservation charged, kept past
// the end of b.items (bookFair).
func (b *booking) fairLanes() []bookedItem { return b.items[len(b.items):cap(b.items)] }

// settleLanes appends to keys and args after.lua's "settle" entries of
// the tenants' lanes the reservation charged, each by the cost of its
// item as quota's settle of a lane does: at the lane's interval, a debt
// reaching the lane's reach, a refund while its tat is still the mark.
func (b *booking) settleLanes(keys []string, args []any, actual []int64) ([]string, []any) {
	for _, ln := range b.fairLanes() {
		a := actual[ln.end]
		if a < 0 || a == ln.cost || quota.Implausible(a, ln.rate) {
			continue
		}
		delta := min(a-ln.cost, quota.MaxExact/ln.T)
		args = append(args, "settle", "g", ln.mark, delta, ln.T, ln.reach)
		keys = append(keys, ln.learned)
	}
	return keys, args
}

// FairState is the state of a Fair limit (quota.Limit.Fair) as a
// decision of the inspected request's tenant (its quota.Share) at Now
// would find it (package quota's doc, "Fair share").
type FairState struct {
	// Tenants is how many tenants the limit's active set holds, and
	// Weight the sum of their weights, before the inspected tenant
	// joins or is refreshed: the tenants decided on within the limit's
	// FairSpan, and any stale ones a decision has yet to drop (each drops
	// at most quota.FairExpire, the oldest first). Zero when no tenant is
	// active.
	Tenants, Weight int64
	// Interval and Burst are the tenant's lane (quota.FairLane) at the
	// active weights with its own in them, as added or replacing what
	// the set records for it: its fair rate is one event per Interval.
	Interval time.Duration
	Burst    int64
	// Booked is how far past Now the tenant's lane is booked: the
	// requests it admitted within its share and the appointments it
	// gave; zero when the lane is idle.
	Booked time.Duration
	// Appointment is how long from Now until the lane would give a
	// request of cost 1 of the tenant its appointment: zero when it
	// admits one at once. Within the limit's interval, such a request is
	// within its share; past it, the tenant is over its share and its
	// request would be deferred to then, or go only with what the others
	// leave.
	Appointment time.Duration
}

// parseFairPeek sets the Fair of items, req's, from vals, the entries a
// peek appends for its Fair items (fairEntries and fairPeekEntries each).
func parseFairPeek(req *quota.Request, items []ItemState, vals []int64) error {
	e := 0
	for i := range req.Items {
		if !req.Items[i].Limit.Fair {
			continue
		}
		v := vals[e : e+fairEntries+fairPeekEntries]
		for k, x := range v {
			if x < 0 {
				return fmt.Errorf("%w: peek reply: Fair entry %d is %d, want an integer >= 0", errReply, e+k, x)
			}
		}
		e += len(v)
		if v[0] != 0 || v[2] < 1 || v[3] < 1 {
			return fmt.Errorf("%w: peek reply: item %d: Fair lane %v", errReply, i, v[:fairEntries])
		}
		items[i].Fair = &FairState{Tenants: v[4], Weight: v[5], Interval: quota.Micros(v[2]), Burst: v[3],
			Booked: quota.Micros(v[6]), Appointment: quota.Micros(v[7])}
	}
	return nil
}
