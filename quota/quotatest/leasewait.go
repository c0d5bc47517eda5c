package quotatest

import (
	"context"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// wakeWithin bounds, in real time, how long a waiter may take to be woken
// by a release it must see. The leases of testLeaseNotify have a TTL of
// ten minutes on a clock that never moves: no expiry can wake anyone, so
// only the store's notification makes a wake arrive at all.
const wakeWithin = 10 * time.Second

// testLeaseNotify checks what a quota.LeaseNotifier promises (a store
// that is none has nothing to check here): a release of a lease still
// held wakes the first waiter of this process queued on the key, one per
// release, in arrival order; a Cancel that gives a lease back wakes one
// too; a released lease that had expired, and a release on another key,
// wake nobody; a waiter that leaves without using its wake hands it to
// the next; a woken waiter that Rearms keeps its place.
func testLeaseNotify(t *testing.T, newStore NewStore) {
	clock := NewClock(start)
	st := newStore(t, clock)
	n, ok := st.(quota.LeaseNotifier)
	if !ok {
		return
	}
	ctx := context.Background()
	streams := concurrent("streams", 1, 10*time.Minute)
	other := concurrent("other", 1, 10*time.Minute)
	one := gcra("one", 1, time.Second, 1)
	take := func(what string, items ...quota.Item) *quota.Reservation {
		t.Helper()
		r, err := st.Reserve(ctx, &quota.Request{Tag: "notify", Items: items, MaxWait: time.Second})
		if err != nil || !r.Allowed {
			t.Fatalf("%s: %+v, %v: want a lease", what, r, err)
		}
		return r
	}
	watch := func(key string) *quota.LeaseWaiter {
		t.Helper()
		w, err := n.WatchLeases(ctx, "notify", key)
		if err != nil {
			t.Fatalf("WatchLeases: %v", err)
		}
		return w
	}
	do := func(what string, op func(context.Context) error) {
		t.Helper()
		if err := op(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	woken := func(what string, w *quota.LeaseWaiter) {
		t.Helper()
		select {
		case <-w.C():
		case <-time.After(wakeWithin):
			t.Fatalf("%s: not woken within %v (the lease TTL is 10m on a stopped clock: only a notification wakes it)", what, wakeWithin)
		}
	}
	// asleep checks that w holds no wake; call it once a later wake (from
	// a later release) has arrived, which a store delivers in order.
	asleep := func(what string, w *quota.LeaseWaiter) {
		t.Helper()
		select {
		case <-w.C():
			t.Fatalf("%s: woken, want asleep", what)
		default:
		}
	}
	lease := quota.Item{Limit: streams, Key: "streams"}
	sentinel := quota.Item{Limit: other, Key: "other"}

	held := take("the lease", lease)
	a, b := watch("streams"), watch("streams")
	s := watch("other")
	do("release", held.Release)
	woken("the first waiter, after a release", a)
	held = take("the sentinel's lease", sentinel)
	do("release on another key", held.Release)
	woken("the other key's waiter", s)
	asleep("the second waiter after one release", b)

	// A woken waiter that found the lease taken again keeps its place.
	held = take("the lease again", lease)
	if !a.Rearm() {
		t.Fatalf("Rearm after a wake: false, want true")
	}
	if a.Rearm() {
		t.Fatalf("a second Rearm: true, want false (no wake since)")
	}
	do("release", held.Release)
	woken("the first waiter again (it kept its place)", a)
	s.Rearm()
	held = take("the sentinel's lease", sentinel)
	do("release on another key", held.Release)
	woken("the other key's waiter", s)
	asleep("the second waiter", b)

	// The first waiter leaves without deciding on its wake: the second
	// gets it.
	a.Done(false)
	woken("the second waiter, handed the first's wake", b)

	// A Cancel gives a waiting reservation's lease back, and wakes.
	b.Rearm()
	take("a slot of the GCRA limit", quota.Item{Limit: one, Key: "one"})
	w := take("a wait for the next slot, with the lease", quota.Item{Limit: one, Key: "one"}, lease)
	if w.Wait <= 0 {
		t.Fatalf("want a reservation that waits, got wait %v", w.Wait)
	}
	do("Cancel of the waiting reservation", w.Cancel)
	woken("a waiter, after a Cancel gave the lease back", b)

	// An expired lease's release wakes nobody: its waiters were due at the
	// expiry already.
	b.Rearm()
	held = take("the lease", lease)
	clock.Advance(11 * time.Minute)
	do("release of the expired lease", held.Release)
	s.Rearm()
	held = take("the sentinel's lease", sentinel)
	do("release on another key", held.Release)
	woken("the other key's waiter", s)
	asleep("the waiter after the release of an expired lease", b)
	b.Done(false)
	s.Done(false)
}
