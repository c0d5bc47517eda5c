package quotatest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// This file is the conformance of fair share (package quota's doc, "Fair
// share"): simulated tenants on a stepped clock, each request handled as
// a caller does: admitted, it goes at its slot; deferred, it comes back
// after RetryAfter with Appointment set; denied, it comes back after
// RetryAfter as a new request.

// fairLimit is a Fair GCRA limit of rate per period with burst.
func fairLimit(name string, rate int64, period time.Duration, burst int64) *quota.Limit {
	l := gcra(name, rate, period, burst)
	l.Fair = true
	return l
}

// simTenant is one tenant of a simulation.
type simTenant struct {
	key string
	// weight returns the tenant's weight at a time of the run (nil: 1).
	weight func(at time.Duration) int64
	// workers is how many requests a saturating tenant keeps
	// outstanding: each, once it went, sends the next at once. every is
	// instead the interval of an open-loop tenant's requests. from and
	// until bound when it sends (until 0: to the end).
	workers     int
	every       time.Duration
	from, until time.Duration
	maxWait     time.Duration

	slots []time.Duration // when each admitted request went
	waits []time.Duration // how long each admitted request took from its first decision to its slot
}

// simReq is one request of a simulation on its way.
type simReq struct {
	tenant  int
	arrived time.Duration // its first decision
	appt    bool
}

// simEvent is a decision due at a time of the run.
type simEvent struct {
	at  time.Duration
	seq int
	req simReq
}

// fairSim runs tenants against one store on a stepped clock.
type fairSim struct {
	t       *testing.T
	st      quota.Store
	clock   *Clock
	begin   time.Time
	items   []quota.Item // the stack every request names
	tenants []*simTenant
	events  []simEvent
	seq     int
	// all is every admitted slot and cost of the first item, for the
	// check that K never admits beyond its limit.
	all []event
}

func newFairSim(t *testing.T, newStore NewStore, items []quota.Item, tenants ...*simTenant) *fairSim {
	clock := NewClock(start)
	s := &fairSim{t: t, st: newStore(t, clock), clock: clock, begin: start, items: items, tenants: tenants}
	for i, tn := range tenants {
		for w := 0; w < max(tn.workers, 1); w++ {
			s.push(tn.from, simReq{tenant: i, arrived: tn.from})
		}
	}
	return s
}

func (s *fairSim) push(at time.Duration, r simReq) {
	s.seq++
	s.events = append(s.events, simEvent{at: at, seq: s.seq, req: r})
}

// run decides every request due before end, in time order (in the order
// they were queued at one time).
func (s *fairSim) run(end time.Duration) {
	s.t.Helper()
	ctx := context.Background()
	for len(s.events) > 0 {
		j := 0
		for k, e := range s.events {
			if e.at < s.events[j].at || e.at == s.events[j].at && e.seq < s.events[j].seq {
				j = k
			}
		}
		e := s.events[j]
		if e.at >= end {
			return
		}
		s.events = slices.Delete(s.events, j, j+1)
		tn := s.tenants[e.req.tenant]
		if tn.until > 0 && e.at >= tn.until {
			continue
		}
		s.clock.Set(s.begin.Add(e.at))
		w := int64(1)
		if tn.weight != nil {
			w = tn.weight(e.at)
		}
		req := quota.Request{Tag: "fair", Items: s.items, Share: quota.Share{Key: tn.key, Weight: w},
			Appointment: e.req.appt, MaxWait: tn.maxWait}
		res, err := s.st.Reserve(ctx, &req)
		if err != nil {
			s.t.Fatalf("at %v, tenant %q: %v", e.at, tn.key, err)
		}
		switch {
		case res.Allowed:
			slot := e.at + res.Wait
			tn.slots = append(tn.slots, slot)
			tn.waits = append(tn.waits, slot-e.req.arrived)
			s.all = append(s.all, event{slot: slot.Microseconds(), cost: 1})
			if tn.workers > 0 { // the worker's next request, once this one went
				s.push(slot, simReq{tenant: e.req.tenant, arrived: slot})
			}
		case res.Deferred:
			if res.RetryAfter <= 0 || res.RetryAfter > tn.maxWait {
				s.t.Fatalf("at %v, tenant %q: deferred with a retry after %v, max wait %v", e.at, tn.key, res.RetryAfter, tn.maxWait)
			}
			s.push(e.at+res.RetryAfter, simReq{tenant: e.req.tenant, arrived: e.req.arrived, appt: true})
		default:
			s.push(e.at+max(res.RetryAfter, time.Microsecond), simReq{tenant: e.req.tenant, arrived: e.req.arrived})
		}
		if tn.every > 0 && !e.req.appt && e.req.arrived == e.at {
			s.push(e.at+tn.every, simReq{tenant: e.req.tenant, arrived: e.at + tn.every})
		}
	}
}

// count returns how many of the tenant's requests went in [from, to).
func (tn *simTenant) count(from, to time.Duration) int {
	n := 0
	for _, s := range tn.slots {
		if s >= from && s < to {
			n++
		}
	}
	return n
}

// checkLimit fails the test when what went exceeds the limit l of the
// stack's first item: in any span of slots, Burst + Rate*span/Period (the
// GCRA bound with the interval rounded up is tighter still).
func (s *fairSim) checkLimit(l *quota.Limit) {
	s.t.Helper()
	ev := slices.Clone(s.all)
	slices.SortStableFunc(ev, func(a, b event) int { return cmp.Compare(a.slot, b.slot) })
	T, dvt := l.Interval(), l.Tolerance()
	var sum int64
	least := int64(1 << 62)
	for _, e := range ev {
		least = min(least, T*sum-e.slot)
		sum += e.cost
		if over := T*sum - e.slot - least; over > dvt {
			s.t.Fatalf("the fair limit admitted %dµs beyond its GCRA bound by %v", over-dvt, time.Duration(e.slot)*time.Microsecond)
		}
	}
}

// testFairLone: a lone tenant saturating a fair limit with waiters gets
// the whole limit: its deferrals come back and are admitted at the full
// rate, as many as the same limit admits without Fair.
func testFairLone(t *testing.T, newStore NewStore) {
	run := func(fair bool) *fairSim {
		l := gcra("shared", 10, time.Second, 0)
		l.Fair = fair
		tn := &simTenant{key: "acme", workers: 30, maxWait: 10 * time.Second}
		s := newFairSim(t, newStore, []quota.Item{{Limit: l, Key: "shared"}}, tn)
		s.run(30 * time.Second)
		s.checkLimit(l)
		return s
	}
	plain, fair := run(false), run(true)
	want, got := plain.tenants[0].count(0, 30*time.Second), fair.tenants[0].count(0, 30*time.Second)
	// Its waiters come back at their appointments, which leave the fair
	// hold (one event of the burst of 10) to tenants within their share:
	// that one is never taken while the waiters keep coming, and every
	// slot after it is used.
	if want != 309 || got != want-1 {
		t.Errorf("a lone tenant went %d times in 30s on a fair 10/s limit, %d without Fair; want 308 and 309 (10, then one per 100ms)", got, want)
	}
	if want, got := plain.tenants[0].count(5*time.Second, 30*time.Second), fair.tenants[0].count(5*time.Second, 30*time.Second); got != want {
		t.Errorf("a lone tenant went %d times from 5s to 30s on a fair 10/s limit, %d without Fair: not at the full rate", got, want)
	}
}

// testFairShares: tenants saturating a fair limit together go in
// proportion to their weights, within a few slots over a long run, and
// the limit is used whole.
func testFairShares(t *testing.T, newStore NewStore) {
	for _, tc := range []struct {
		weights []int64
		waiters bool // workers wait (MaxWait 30s), else they fail fast
	}{
		{[]int64{1, 1}, true},
		{[]int64{1, 3}, true},
		{[]int64{1, 2, 4}, true},
		{[]int64{1, 1}, false},
		{[]int64{1, 3}, false},
	} {
		name := fmt.Sprintf("weights %v, waiters %v", tc.weights, tc.waiters)
		l := fairLimit("shared", 10, time.Second, 0)
		var tenants []*simTenant
		var sum int64
		for i, w := range tc.weights {
			w := w
			tn := &simTenant{key: fmt.Sprintf("t%d", i), weight: func(time.Duration) int64 { return w }, workers: 20}
			if tc.waiters {
				tn.maxWait = 30 * time.Second
			}
			tenants = append(tenants, tn)
			sum += w
		}
		s := newFairSim(t, newStore, []quota.Item{{Limit: l, Key: "shared"}}, tenants...)
		const from, to = 5 * time.Second, 65 * time.Second
		s.run(to)
		s.checkLimit(l)
		total := 0
		var counts []int
		for i, tn := range tenants {
			got := tn.count(from, to)
			counts = append(counts, got)
			total += got
			want := 600 * tc.weights[i] / sum
			if d := int64(got) - want; d < -3 || d > 3 {
				t.Errorf("%s: tenant %d went %d times in 60s, want %d (its weight's share of 600) within 3", name, i, got, want)
			}
		}
		if total < 597 {
			t.Errorf("%s: %d went in 60s of a 10/s limit, want at least 597", name, total)
		}
		t.Logf("%s: %v went in 60s", name, counts)
	}
}

// testFairArrival: while one tenant saturates a fair limit with a deep
// queue of waiters (appointments booked far ahead in its lane, at the
// whole limit's rate while it was alone), a tenant arriving within its
// share waits at most H + its lane interval: its first request, and each
// of a trickle below its share. A third tenant, saturating too but
// failing fast (it retries when told), still gets its share.
func testFairArrival(t *testing.T, newStore NewStore) {
	l := fairLimit("shared", 10, time.Second, 0)
	heavy := &simTenant{key: "heavy", workers: 300, maxWait: time.Minute}
	fast := &simTenant{key: "fast", workers: 5, from: 10 * time.Second, until: 40 * time.Second}
	light := &simTenant{key: "light", every: 400 * time.Millisecond, from: 10 * time.Second, until: 40 * time.Second, maxWait: time.Minute}
	s := newFairSim(t, newStore, []quota.Item{{Limit: l, Key: "shared"}}, heavy, fast, light)
	s.run(45 * time.Second)
	s.checkLimit(l)
	// W = 3: the light tenant's lane interval is 3T = 300ms; H = T.
	bound := 100*time.Millisecond + 300*time.Millisecond
	if len(light.waits) < 74 {
		t.Fatalf("the light tenant went %d times in 30s at one per 400ms, want 75", len(light.waits))
	}
	for i, w := range light.waits {
		if w > bound {
			t.Errorf("the light tenant's request %d waited %v behind a saturating tenant, want at most %v", i, w, bound)
		}
	}
	if got := fast.count(10*time.Second, 40*time.Second); got < 97 {
		t.Errorf("the tenant failing fast went %d times in 30s, want its share, 100, within 3", got)
	}
	t.Logf("the light tenant waited at most %v for each of %d requests; the tenant failing fast went %d times in 30s",
		slices.Max(light.waits), len(light.waits), fast.count(10*time.Second, 40*time.Second))
	// Without Fair, its first request queues behind the heavy tenant's
	// 300 waiters: 30 seconds.
	plain := gcra("shared", 10, time.Second, 0)
	heavy2 := &simTenant{key: "heavy", workers: 300, maxWait: time.Minute}
	light2 := &simTenant{key: "light", every: time.Hour, from: 10 * time.Second, maxWait: time.Minute}
	p := newFairSim(t, newStore, []quota.Item{{Limit: plain, Key: "shared"}}, heavy2, light2)
	p.run(45 * time.Second)
	if len(light2.waits) != 1 || light2.waits[0] < 20*time.Second {
		t.Errorf("without Fair the light tenant's first request waited %v, want about 30s (the test shows nothing)", light2.waits)
	}
}

// testFairWeightChange: two tenants saturate at weights 1 and 1; at 30s
// the first one's plan changes to weight 3: from then on the shares are
// 3:1.
func testFairWeightChange(t *testing.T, newStore NewStore) {
	l := fairLimit("shared", 10, time.Second, 0)
	a := &simTenant{key: "a", workers: 20, maxWait: 30 * time.Second, weight: func(at time.Duration) int64 {
		if at < 30*time.Second {
			return 1
		}
		return 3
	}}
	b := &simTenant{key: "b", workers: 20, maxWait: 30 * time.Second}
	s := newFairSim(t, newStore, []quota.Item{{Limit: l, Key: "shared"}}, a, b)
	s.run(90 * time.Second)
	s.checkLimit(l)
	if ga, gb := a.count(5*time.Second, 25*time.Second), b.count(5*time.Second, 25*time.Second); ga < 97 || gb < 97 {
		t.Errorf("at weights 1 and 1: %d and %d went in 20s, want 100 each within 3", ga, gb)
	}
	// The waiters booked before the change keep their appointments (up
	// to 30s ahead); past them, 3:1.
	ga, gb := a.count(65*time.Second, 85*time.Second), b.count(65*time.Second, 85*time.Second)
	if ga < 147 || gb < 47 || gb > 53 {
		t.Errorf("at weights 3 and 1: %d and %d went in 20s, want 150 and 50 within 3", ga, gb)
	}
	t.Logf("after the change to 3:1, %d and %d went in 20s", ga, gb)
}

// testFairExpiry: a tenant active on a fair limit counts in W until
// FairSpan after its last decision; then W falls back, and a lone
// tenant's lane is the whole limit again: its deferrals are booked one
// interval apart, not two.
func testFairExpiry(t *testing.T, newStore NewStore) {
	clock := NewClock(start)
	st := newStore(t, clock)
	l := fairLimit("shared", 10, time.Second, 1) // T 100ms, burst 1
	reserve := func(tenant string) quota.Result {
		t.Helper()
		req := quota.Request{Tag: "fair", Items: []quota.Item{{Limit: l, Key: "shared"}}, Share: quota.Share{Key: tenant}, MaxWait: time.Hour}
		res, err := st.Reserve(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		return res.Result
	}
	// spacing returns the gap between the appointments of the first two
	// deferrals of a's requests sent at once.
	spacing := func() time.Duration {
		t.Helper()
		r1 := reserve("a")
		for i := 0; !r1.Deferred; i++ {
			if i == 3 {
				t.Fatalf("a's requests are not deferred: %+v", r1)
			}
			r1 = reserve("a")
		}
		r2 := reserve("a")
		if !r2.Deferred {
			t.Fatalf("a's request after a deferral was not deferred: %+v", r2)
		}
		return r2.RetryAfter - r1.RetryAfter
	}
	reserve("b") // b is active: W = 2
	if got := spacing(); got != 200*time.Millisecond {
		t.Errorf("with b active, a's appointments are %v apart, want 200ms (2T)", got)
	}
	clock.Advance(l.FairSpan() - time.Microsecond) // b last seen at the start
	if got := spacing(); got != 200*time.Millisecond {
		t.Errorf("just before b expires, a's appointments are %v apart, want 200ms", got)
	}
	clock.Advance(time.Microsecond) // b is stale: W = 1
	if got := spacing(); got != 100*time.Millisecond {
		t.Errorf("once b has expired, a's appointments are %v apart, want 100ms (T)", got)
	}
}

// testFairExpiryOrder: the active set's expiry rule, against the model:
// 24 tenants (some seen at the same µs) go stale while one stays live;
// each decision drops at most quota.FairExpire of them, oldest first by
// (seen, part); once every member is stale the set is forgotten whole.
// W shows in the appointments of deferrals, which every store must give
// to the µs.
func testFairExpiryOrder(t *testing.T, newStore NewStore) {
	clock := NewClock(start)
	st := newStore(t, clock)
	model := NewModel()
	l := fairLimit("shared", 1000, time.Second, 1) // T 1ms, burst 1; a span of 1s
	step := 0
	reserve := func(tenant string, w int64, appt bool) {
		t.Helper()
		step++
		req := quota.Request{Tag: "fair", Items: []quota.Item{{Limit: l, Key: "shared"}},
			Share: quota.Share{Key: tenant, Weight: w}, Appointment: appt, MaxWait: time.Hour}
		want := model.Reserve(req, clock.Now())
		got, err := st.Reserve(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		if msg := compare(got, want); msg != "" {
			t.Fatalf("step %d (tenant %q at +%v): the store and the model disagree: %s", step, tenant, clock.Now().Sub(start), msg)
		}
	}
	for i := range 24 {
		if i%3 == 0 {
			clock.Advance(time.Microsecond) // three tenants a µs
		}
		reserve(fmt.Sprintf("t%02d", 23-i), int64(1+i%5), false)
	}
	clock.Set(start.Add(600 * time.Millisecond))
	reserve("live", 9, false)
	clock.Set(start.Add(1100 * time.Millisecond)) // the 24 are stale, live is not
	for range 4 {
		reserve("a", 2, false) // 16 leave, then the other 8, then none
		reserve("a", 2, false)
		reserve("live", 9, true)
	}
	clock.Set(start.Add(1700 * time.Millisecond)) // every member stale: forgotten
	reserve("b", 3, false)
	reserve("b", 3, false)
	reserve("a", 1, false)
	reserve("a", 1, false)
}

// testFairOverShare: the standing of a request over its share, step by
// step against the model: three tenants (weights 1, 2, 1) on a limit of
// 20/s burst 20 ask in a fixed pattern, failing fast, waiting 300ms or
// 2s, and coming back with appointments, while the clock moves a few ms
// at a time, so that every tenant is by turns within its share, over it
// with room in its lane (admitted, its lane charged) and over it with
// its lane booked FairSpan ahead (leaving quota.FairIdleHold of the
// burst). Every decision must be the model's to the µs; a lane charged
// or not shows in the tenant's later decisions.
func testFairOverShare(t *testing.T, newStore NewStore) {
	clock := NewClock(start)
	st := newStore(t, clock)
	model := NewModel()
	l := fairLimit("shared", 20, time.Second, 20) // T 50ms
	tenants := []quota.Share{{Key: "a"}, {Key: "b", Weight: 2}, {Key: "c"}}
	waits := []time.Duration{0, 300 * time.Millisecond, 2 * time.Second, 0, 2 * time.Second}
	steps := []time.Duration{0, 7 * time.Millisecond, 0, 13 * time.Millisecond, 3 * time.Millisecond, 0, 29 * time.Millisecond}
	allowed, deferred := 0, 0
	for i := range 1500 {
		clock.Advance(steps[i%len(steps)])
		if i%500 == 499 {
			clock.Advance(1200 * time.Millisecond) // quiet: the lanes drain, some tenants go stale
		}
		sh := tenants[(i*7/5)%len(tenants)]
		if i%300 >= 200 && sh.Key == "c" {
			sh = tenants[0] // c quiet for a while: a and b share by 1:2
		}
		req := quota.Request{Tag: "fair", Items: []quota.Item{{Limit: l, Key: "shared"}}, Share: sh,
			MaxWait: waits[(i/3)%len(waits)], Appointment: i%11 == 5}
		want := model.Reserve(req, clock.Now())
		got, err := st.Reserve(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		if msg := compare(got, want); msg != "" {
			t.Fatalf("step %d (tenant %q, max wait %v, appointment %v, at +%v): the store and the model disagree: %s",
				i, sh.Key, req.MaxWait, req.Appointment, clock.Now().Sub(start), msg)
		}
		if got.Allowed {
			allowed++
		}
		if got.Deferred {
			deferred++
		}
	}
	if allowed < 100 || deferred < 100 {
		t.Errorf("%d admitted and %d deferred of 1500: the pattern no longer exercises both", allowed, deferred)
	}
}

// testFairMixed: one decision over a fair item and a classed item: both
// admit at once; when the classed item's time is past the fair item's
// horizon the request is deferred to that time (nothing charged in either
// limit), and comes back with its appointment to be admitted.
func testFairMixed(t *testing.T, newStore NewStore) {
	clock := NewClock(start)
	st := newStore(t, clock)
	shared := fairLimit("shared", 100, time.Second, 0) // T 10ms
	ln := lanes()                                      // class 1: 8/s burst 8 in the bottom lane, T 125ms
	items := []quota.Item{{Limit: shared, Key: "shared"}, {Limit: ln, Key: "lanes"}}
	reserve := func(class int, appt bool) quota.Result {
		t.Helper()
		req := quota.Request{Tag: "mixed", Items: items, Class: class, Share: quota.Share{Key: "acme"}, Appointment: appt, MaxWait: time.Second}
		res, err := st.Reserve(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		return res.Result
	}
	for i := range 9 { // the bottom lane's 8 and one borrowed from lane 0
		if res := reserve(1, false); !res.Allowed || res.Wait != 0 {
			t.Fatalf("request %d: %+v, want admitted at once", i, res)
		}
	}
	res := reserve(1, false)
	if !res.Deferred || res.RetryAfter != 125*time.Millisecond || res.Decider != 1 {
		t.Fatalf("past the bottom lane: %+v, want deferred 125ms by the classed limit (item 1)", res)
	}
	if got := res.Limits[0].Remaining; got != 91 {
		t.Errorf("the deferral left the fair limit %d, want 91: it charges nothing there", got)
	}
	if res := reserve(0, false); !res.Allowed || res.Wait != 0 {
		t.Errorf("class 0 after the deferral: %+v, want admitted at once (lane 0's last one): the deferral charged no lane", res)
	}
	clock.Advance(125 * time.Millisecond)
	if res := reserve(1, true); !res.Allowed || res.Wait != 0 {
		t.Errorf("back at its appointment: %+v, want admitted at once", res)
	}
}

// testFairInvalid: a Fair limit that is not a plain GCRA limit, and a
// weight out of range, are refused with ErrInvalid.
func testFairInvalid(t *testing.T, newStore NewStore) {
	st := newStore(t, NewClock(start))
	w := window("daily", 10, quota.Day, 0, time.UTC)
	w.Fair = true
	ok := fairLimit("shared", 10, time.Second, 0)
	for _, req := range []quota.Request{
		{Tag: "x", Items: []quota.Item{{Limit: w, Key: "daily"}}},
		{Tag: "x", Items: []quota.Item{{Limit: ok, Key: "shared"}}, Share: quota.Share{Key: "a", Weight: quota.MaxWeight + 1}},
		{Tag: "x", Items: []quota.Item{{Limit: ok, Key: "shared"}}, Share: quota.Share{Key: "a", Weight: -1}},
	} {
		if res, err := st.Reserve(context.Background(), &req); !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("%s: got (%v, %v), want an error wrapping quota.ErrInvalid", describe(&req), res, err)
		}
	}
}

// runFair runs the fair-share conformance.
func runFair(t *testing.T, newStore NewStore) {
	t.Run("a lone tenant gets the whole limit", func(t *testing.T) { testFairLone(t, newStore) })
	t.Run("saturating tenants share by weight", func(t *testing.T) { testFairShares(t, newStore) })
	t.Run("a tenant arriving waits at most H and its lane interval", func(t *testing.T) { testFairArrival(t, newStore) })
	t.Run("a weight change takes effect", func(t *testing.T) { testFairWeightChange(t, newStore) })
	t.Run("W falls back as tenants expire", func(t *testing.T) { testFairExpiry(t, newStore) })
	t.Run("the active set expires by its rule", func(t *testing.T) { testFairExpiryOrder(t, newStore) })
	t.Run("a fair item and a classed item decide together", func(t *testing.T) { testFairMixed(t, newStore) })
	t.Run("a request over its share, by the model", func(t *testing.T) { testFairOverShare(t, newStore) })
	t.Run("invalid", func(t *testing.T) { testFairInvalid(t, newStore) })
}
