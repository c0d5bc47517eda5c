package quotatest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// templates are the limits random stacks are drawn from: bursts of 1 and
// more, intervals that do not divide evenly, windows of every unit (in
// zones with and without daylight saving), rolling windows whose
// buckets do and do not divide the period evenly, and limits with
// priority classes (GCRA lanes, held windows, rolling windows and lease
// caps, paced windows with and without a pace reserve).
func templates() []*quota.Limit {
	lanes := gcra("lanes", 10, time.Second, 0)
	lanes.Reserve = []int64{2000, 3000} // lanes of 2, 3 and 5 per second
	odd := gcra("lanes-odd", 7, 10*time.Second, 4)
	odd.Reserve = []int64{3000} // 2 per 10s burst 1, 5 per 10s burst 3
	held := window("hourly-held", 12, quota.Hour, 0, time.UTC)
	held.Reserve, held.ActiveFor = []int64{2500, 2500}, 2*time.Second
	paced := window("hourly-paced", 12, quota.Hour, 15*time.Minute, time.UTC)
	paced.Pace, paced.PaceReserve, paced.Reserve = true, 2500, []int64{0, 0}
	daily := window("daily-paced", 40, quota.Day, 0, la)
	daily.Pace = true
	roll := rolling("rolling-held", 4, 3*time.Second)
	roll.Reserve, roll.ActiveFor = []int64{2500}, time.Second
	streams := concurrent("streams-held", 3, 5*time.Second)
	streams.Reserve, streams.ActiveFor = []int64{3400}, 3*time.Second
	shared := gcra("shared", 10, time.Second, 0)
	shared.Fair = true
	sharedOdd := gcra("shared-odd", 3, 10*time.Second, 2) // T 3.333334s, a span of 10s
	sharedOdd.Fair = true
	sharedOne := gcra("shared-one", 5, time.Second, 1) // a hold of 1 is the whole burst
	sharedOne.Fair = true
	return []*quota.Limit{
		gcra("peak", 10, time.Second, 0),
		gcra("one", 1, time.Second, 1),
		gcra("thirds", 3, 10*time.Second, 2),
		gcra("minute", 30, time.Minute, 5),
		window("hourly", 12, quota.Hour, 15*time.Minute, time.UTC),
		window("daily", 40, quota.Day, 0, la),
		window("monthly", 60, quota.Month, 9*time.Hour, la),
		rolling("rolling", 4, 3*time.Second+7*time.Microsecond),
		rolling("rolling-hour", 20, time.Hour),
		concurrent("streams", 3, 5*time.Second),
		lanes, odd, held, paced, daily, roll, streams,
		shared, sharedOdd, sharedOne,
	}
}

// tenants are the tenants random requests share Fair limits as: none,
// plain parts, a hashed one, and values a store must make safe.
var tenants = []string{"", "acme", "b-2", quota.SafePart("c d"), "c d", "{e}"}

// weights are the weights random requests give their tenant (0 is 1).
var weights = []int64{0, 1, 2, 7, quota.MaxWeight}

// Differential draws random stacks and a random sequence of reserves,
// cancels, lease releases and renewals, pauses and clock steps from seed, runs it on a fresh store from
// each factory and on the Model, and fails at the first decision on which
// any of them disagree, or as soon as what was admitted exceeds a limit
// (Model.Check). Among the steps are fan-outs (many waiters reserving the
// same stack at once) and cancels of random subsets of the waiters in
// random order, as an errgroup's waiters cancel when its context ends;
// stacks of limits of different rates and pauses give slots set by another
// limit than the one charged.
func Differential(t *testing.T, seed int64, steps int, newStores ...NewStore) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(seed), 0x7468726f74746c65))
	clock := NewClock(time.Date(2026, 2, 28, 23, 40, 0, 0, la))
	stores := make([]quota.Store, len(newStores))
	for i, f := range newStores {
		stores[i] = f(t, clock)
	}
	model := NewModel()
	lims := templates()
	ctx := context.Background()
	type held struct {
		model *ModelReservation
		store []*quota.Reservation
	}
	var reservations []held
	var leased []held   // admitted with a lease, not released yet
	var admitted []held // admitted, not settled yet
	// deferred are the requests deferred with an appointment, not back yet.
	var deferred []*ModelReservation
	tags := []string{"p", "q"}
	where := func(n int) string { return fmt.Sprintf("seed %d step %d at %v", seed, n, clock.Now()) }
	cancel := func(n int, h held) {
		if h.model.used != nil {
			return // settled: the request went (a response came), so nothing is cancelled
		}
		model.Cancel(h.model, clock.Now())
		for i, r := range h.store {
			if err := r.Cancel(ctx); err != nil {
				t.Fatalf("%s: store %d Cancel: %v", where(n), i, err)
			}
		}
	}
	reserve := func(n int, req quota.Request) {
		want := model.Reserve(req, clock.Now())
		h := held{model: want}
		for i, st := range stores {
			got, err := st.Reserve(ctx, &req)
			if err != nil {
				t.Fatalf("%s: store %d Reserve: %v", where(n), i, err)
			}
			if msg := compare(got, want); msg != "" {
				t.Fatalf("%s: store %d and the model disagree on %s: %s", where(n), i, describe(&req), msg)
			}
			h.store = append(h.store, got)
		}
		if want.Allowed && want.Wait > 0 {
			reservations = append(reservations, h)
		}
		if want.Allowed {
			admitted = append(admitted, h)
		}
		if want.Allowed && want.leases != nil && slices.ContainsFunc(want.leases, func(l *lease) bool { return l != nil }) {
			leased = append(leased, h)
		}
		if want.Deferred {
			deferred = append(deferred, want)
		}
	}
	lease := func(n int, renew bool) {
		if len(leased) == 0 {
			return
		}
		j := rng.IntN(len(leased))
		h := leased[j]
		if renew {
			model.Renew(h.model, clock.Now())
		} else {
			model.Release(h.model, clock.Now())
			leased = slices.Delete(leased, j, j+1)
		}
		for i, r := range h.store {
			op, name := r.Release, "Release"
			if renew {
				op, name = r.Renew, "Renew"
			}
			// A renewal of an expired lease says so; the model keeps it
			// expired too.
			if err := op(ctx); err != nil && !(renew && errors.Is(err, quota.ErrLeaseLost)) {
				t.Fatalf("%s: store %d %s: %v", where(n), i, name, err)
			}
		}
	}
	check := func(n int) {
		if err := model.Check(); err != nil {
			t.Fatalf("%s: over-admitted: %v", where(n), err)
		}
	}
	for n := 0; n < steps; n++ {
		switch op := rng.IntN(28); {
		case op >= 25 && len(admitted) > 0: // settle with random actual costs
			j := rng.IntN(len(admitted))
			h := admitted[j]
			if clock.Now().UnixMicro() < h.model.slot {
				break // a response comes only after the request went, at its slot
			}
			admitted = slices.Delete(admitted, j, j+1)
			actual := make([]int64, len(h.model.req.Items))
			for i := range actual {
				est := h.model.req.CostOf(i)
				switch rng.IntN(5) {
				case 0:
					actual[i] = -1
				case 1:
					actual[i] = est + 1 + rng.Int64N(3) // an excess
				case 2:
					// A large excess, its debt cut at the limit's reach,
					// or above the rate: implausible, not settled.
					r := h.model.req.Items[i].Limit.Rate
					actual[i] = est + r/2 + rng.Int64N(r+1)
				default:
					actual[i] = rng.Int64N(est + 1) // a refund, or none
				}
			}
			model.Settle(h.model, actual, clock.Now())
			for i, r := range h.store {
				if err := r.Settle(ctx, actual); err != nil {
					t.Fatalf("%s: store %d Settle: %v", where(n), i, err)
				}
			}
			check(n)
		case op == 22 || op == 23:
			lease(n, false)
			check(n)
		case op == 24:
			lease(n, true)
		case op < 3:
			clock.Advance(time.Duration(rng.Int64N(int64(2 * time.Second))))
		case op == 3:
			clock.Advance(time.Duration(rng.Int64N(int64(3 * time.Hour))))
		case op == 4 && len(reservations) > 0:
			cancel(n, reservations[rng.IntN(len(reservations))])
			check(n)
		case op == 5:
			tag, d := tags[rng.IntN(2)], time.Duration(rng.Int64N(int64(3*time.Second)))
			model.Pause(tag, "pause", d, clock.Now())
			for i, st := range stores {
				if err := st.Pause(ctx, tag, "pause", d); err != nil {
					t.Fatalf("%s: store %d Pause: %v", where(n), i, err)
				}
			}
		case op == 6: // a fan-out: waiters for the same stack at once
			req := randomRequest(rng, lims, tags)
			req.MaxWait = 10 * time.Second
			for k := 2 + rng.IntN(12); k > 0; k-- {
				reserve(n, req)
			}
		case op == 8 && len(deferred) > 0: // a deferred request comes back, mostly at its appointment
			j := rng.IntN(len(deferred))
			d := deferred[j]
			deferred = slices.Delete(deferred, j, j+1)
			if rng.IntN(4) > 0 {
				clock.Set(d.at.Add(d.RetryAfter))
			}
			req := d.req
			req.Appointment = true
			reserve(n, req)
		case op == 7: // a random subset of the waiters cancels, in random order
			for _, i := range rng.Perm(len(reservations)) {
				if rng.IntN(2) == 0 {
					continue
				}
				if rng.IntN(4) == 0 {
					clock.Advance(time.Duration(rng.Int64N(int64(100 * time.Millisecond))))
				}
				cancel(n, reservations[i])
			}
			check(n)
		default:
			req := randomRequest(rng, lims, tags)
			waits := []time.Duration{0, 0, 300 * time.Millisecond, 2 * time.Second, 2 * time.Hour}
			req.MaxWait = waits[rng.IntN(len(waits))]
			reserve(n, req)
		}
		if len(reservations) > 200 { // the oldest are mostly due; the rest just go
			reservations = append(reservations[:0], reservations[100:]...)
		}
		if len(leased) > 50 { // the oldest have mostly expired
			leased = append(leased[:0], leased[25:]...)
		}
		if len(admitted) > 100 {
			admitted = append(admitted[:0], admitted[50:]...)
		}
		if len(deferred) > 50 {
			deferred = append(deferred[:0], deferred[25:]...)
		}
	}
	check(steps)
}

// randomRequest draws a stack of one to three limits with random costs,
// naming the tag's pause.
func randomRequest(rng *rand.Rand, lims []*quota.Limit, tags []string) quota.Request {
	req := quota.Request{Tag: tags[rng.IntN(2)], Pauses: []string{"pause"}}
	capacity := int64(1 << 30)
	for _, i := range rng.Perm(len(lims))[:1+rng.IntN(3)] {
		it := quota.Item{Limit: lims[i], Key: lims[i].Name}
		if lims[i].Kind == quota.Concurrency { // one lease, whatever the cost
			req.Items = append(req.Items, it)
			continue
		}
		if rng.IntN(3) == 0 { // a cost of its own
			it.Cost = 1 + rng.Int64N(min(lims[i].Capacity(), 4))
		} else {
			capacity = min(capacity, lims[i].Capacity())
		}
		req.Items = append(req.Items, it)
	}
	req.Cost = 1 + rng.Int64N(min(capacity, 3))
	classes := 0 // the fewest classes of the limits that have some
	for _, it := range req.Items {
		if n := it.Limit.Classes(); n > 0 && (classes == 0 || n < classes) {
			classes = n
		}
	}
	if classes > 0 {
		req.Class = rng.IntN(classes)
	}
	if req.Validate() != nil { // a cost above every lane the class may use
		req.Cost = 1
		for i := range req.Items {
			req.Items[i].Cost = 0
		}
	}
	if req.HasFair() {
		// A few tenants, each mostly at one weight, so that weights
		// change now and then.
		j := rng.IntN(len(tenants))
		req.Share = quota.Share{Key: tenants[j], Weight: weights[j%len(weights)]}
		if rng.IntN(5) == 0 {
			req.Share.Weight = weights[rng.IntN(len(weights))]
		}
	}
	return req
}

func compare(got *quota.Reservation, want *ModelReservation) string {
	if got.Allowed != want.Allowed {
		return fmt.Sprintf("allowed %v, model %v (model retry %v, store retry %v)", got.Allowed, want.Allowed, want.RetryAfter, got.RetryAfter)
	}
	if got.Wait != want.Wait {
		return fmt.Sprintf("wait %v, model %v", got.Wait, want.Wait)
	}
	if got.Deferred != want.Deferred {
		return fmt.Sprintf("deferred %v, model %v (model retry %v, store retry %v)", got.Deferred, want.Deferred, want.RetryAfter, got.RetryAfter)
	}
	if !want.Beyond && got.RetryAfter != want.RetryAfter {
		return fmt.Sprintf("retry after %v, model %v", got.RetryAfter, want.RetryAfter)
	}
	for i := range want.Limits {
		if i >= len(got.Limits) || got.Limits[i] != want.Limits[i] {
			return fmt.Sprintf("limit statuses %+v, model %+v", got.Limits, want.Limits)
		}
	}
	return ""
}

func describe(req *quota.Request) string {
	s := fmt.Sprintf("tag %s class %d cost %d max wait %v [", req.Tag, req.Class, req.Cost, req.MaxWait)
	if req.HasFair() {
		s = fmt.Sprintf("tenant %q weight %d appointment %v %s", req.Share.Key, req.Share.Weight, req.Appointment, s)
	}
	for i, it := range req.Items {
		if i > 0 {
			s += " "
		}
		s += it.Limit.Name
	}
	return s + "]"
}
