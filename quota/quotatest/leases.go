package quotatest

import (
	"context"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// testLeases steps a Concurrency limit of 2 leases with a 10s TTL through
// what a store must do with leases: take one per admitted request, deny a
// request when all are held (whatever its max wait, with the soonest
// expiry as its retry), give them back on Release and Cancel, keep them on
// Renew, and let them expire.
func testLeases(t *testing.T, newStore NewStore) {
	clock := NewClock(start)
	st := newStore(t, clock)
	ctx := context.Background()
	streams := concurrent("streams", 2, 10*time.Second)
	one := gcra("one", 1, time.Second, 1)
	leaseOnly := quota.Request{Tag: "leases", Items: []quota.Item{{Limit: streams, Key: "streams"}}, Cost: 5}
	both := quota.Request{Tag: "leases", Items: []quota.Item{{Limit: one, Key: "one"}, {Limit: streams, Key: "streams"}}}
	at := func(d time.Duration) { t.Helper(); clock.Set(start.Add(d)) }
	reserve := func(what string, req quota.Request, maxWait time.Duration, ok bool, wait time.Duration, decider int, st0 quota.Status) *quota.Reservation {
		t.Helper()
		req.MaxWait = maxWait
		res, err := st.Reserve(ctx, &req)
		if err != nil {
			t.Fatalf("%s: Reserve: %v", what, err)
		}
		got := res.Wait
		if !res.Allowed {
			got = res.RetryAfter
		}
		last := res.Limits[len(res.Limits)-1]
		if res.Allowed != ok || got != wait || res.Decider != decider || last != st0 {
			t.Fatalf("%s: got allowed=%v wait/retry=%v decider=%d leases %+v, want allowed=%v wait/retry=%v decider=%d leases %+v",
				what, res.Allowed, got, res.Decider, last, ok, wait, decider, st0)
		}
		if res.HoldsLeases() != ok {
			t.Fatalf("%s: HoldsLeases() = %v, want %v", what, res.HoldsLeases(), ok)
		}
		return res
	}
	do := func(what string, op func(context.Context) error) {
		t.Helper()
		if err := op(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	status := func(rem int64, reset time.Duration) quota.Status {
		return quota.Status{Remaining: rem, ResetAfter: reset}
	}

	r1 := reserve("first (a cost of 5 still takes one lease)", leaseOnly, 0, true, 0, noD, status(1, 10*time.Second))
	at(time.Second)
	r2 := reserve("second", leaseOnly, 0, true, 0, noD, status(0, 10*time.Second))
	reserve("third, both held", leaseOnly, forever, false, 9*time.Second, 0, status(0, 10*time.Second))
	do("Release of the first", r1.Release)
	do("second Release of the first", r1.Release)
	r4 := reserve("after a release", leaseOnly, 0, true, 0, noD, status(0, 10*time.Second))
	reserve("both held again", leaseOnly, 0, false, 10*time.Second, 0, status(0, 10*time.Second))

	at(6 * time.Second)
	do("Renew of the second", r2.Renew) // now ends at 16s; the fourth's at 11s
	at(11 * time.Second)
	r6 := reserve("the fourth expired", leaseOnly, 0, true, 0, noD, status(0, 10*time.Second))
	reserve("the renewed one and the new one held", leaseOnly, 0, false, 5*time.Second, 0, status(0, 10*time.Second))
	do("Release of an expired lease", r4.Release)
	do("Renew of a released lease", r1.Renew)
	reserve("nothing came back", leaseOnly, 0, false, 5*time.Second, 0, status(0, 10*time.Second))

	// A stack that waits for its GCRA slot holds its lease from the
	// decision to a TTL after the slot; Cancel gives it back.
	do("Release of the sixth", r6.Release)
	do("Release of the second", r2.Release)
	reserve("a slot of the GCRA limit", both, 0, true, 0, noD, status(1, 10*time.Second))
	w := reserve("a wait for the next one", both, 2*time.Second, true, time.Second, 0, status(0, 11*time.Second))
	reserve("full: the retry is the soonest expiry", both, forever, false, 10*time.Second, 1, status(0, 11*time.Second))
	do("Cancel of the waiter", w.Cancel)
	do("Release after Cancel", w.Release)
	reserve("the lease and the slot came back", both, 2*time.Second, true, time.Second, 0, status(0, 11*time.Second))
	// A full lease limit refuses after the other limits' wait if that is
	// later, and charges them nothing.
	reserve("full, and the GCRA limit wants 2s", both, forever, false, 10*time.Second, 1, status(0, 11*time.Second))
	at(21 * time.Second) // the first of the two expires; the other, slot 12s, holds
	reserve("one expired", both, 0, true, 0, noD, status(0, 10*time.Second))
}
