package redisstore

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// classedLimits are limits with priority classes and paced windows, small
// enough that a few decisions exhaust them.
func classedLimits() []*quota.Limit {
	lanes := gcra("lanes", 10, time.Second, 0)
	lanes.Reserve = []int64{2000, 3000} // lanes of 2, 3 and 5 per second
	odd := gcra("odd", 7, 10*time.Second, 4)
	odd.Reserve = []int64{3000}
	held := window("held", 12, quota.Hour, nil)
	held.Reserve, held.ActiveFor = []int64{2500, 2500}, 20*time.Second
	paced := window("paced", 40, quota.Hour, nil)
	paced.Pace, paced.PaceReserve, paced.Reserve = true, 2500, []int64{0, 0}
	daily := window("daily", 30, quota.Day, nil)
	daily.Pace = true
	roll := &quota.Limit{Name: "roll", Kind: quota.Rolling, Rate: 4, Period: 3 * time.Second, Reserve: []int64{2500}, ActiveFor: time.Second}
	streams := &quota.Limit{Name: "streams", Kind: quota.Concurrency, Rate: 3, Period: 5 * time.Second, Reserve: []int64{3400}, ActiveFor: 3 * time.Second}
	return []*quota.Limit{lanes, odd, held, paced, daily, roll, streams}
}

// classedStack draws one to three distinct limits of classedLimits, with
// a plain GCRA limit now and then.
func classedStack(rng *rand.Rand) []*quota.Limit {
	all := classedLimits()
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	lims := all[:1+rng.Intn(3)]
	if rng.Intn(3) == 0 {
		lims = append(lims, gcra("plain", 6, time.Second, 3))
	}
	return lims
}

// classesOf is the fewest classes of req's limits that have some (0:
// none).
func classesOf(req quota.Request) int {
	n := 0
	for _, it := range req.Items {
		if c := it.Limit.Classes(); c > 0 && (n == 0 || c < n) {
			n = c
		}
	}
	return n
}

// TestClassedPeekAgreesWithDecisions: for random stacks with priority
// classes and paced windows and random histories, an Inspect changes no
// key, and for each item and class Snapshot.Headroom is what decisions
// of that class find admissible at once: that many requests of cost 1
// for that item alone are admitted at the same instant, and the next is
// denied. For class 0 it is Remaining, except in a paced window (which
// releases less than remains).
func TestClassedPeekAgreesWithDecisions(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	ctx := context.Background()
	const seed = 20
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 60; round++ {
		clock := quotatest.NewClock(start.Add(time.Duration(rng.Intn(3600)) * time.Second))
		st := newStore(t, client, clock)
		req := stack("peek", classedStack(rng)...)
		classes := max(classesOf(req), 1)
		var history []string
		var held []*quota.Reservation
		for s := rng.Intn(16); s > 0; s-- {
			switch rng.Intn(6) {
			case 0:
				d := time.Duration(rng.Intn(3000)) * time.Millisecond
				clock.Advance(d)
				history = append(history, fmt.Sprintf("advance %v", d))
			case 1:
				if len(held) > 0 {
					r := held[rng.Intn(len(held))]
					if err := r.Cancel(ctx); err != nil {
						t.Fatal(err)
					}
					if err := r.Release(ctx); err != nil {
						t.Fatal(err)
					}
					history = append(history, "cancel and release")
				}
			default:
				r := req
				r.Class = rng.Intn(classes)
				wait := time.Duration(rng.Intn(2)) * time.Duration(rng.Intn(30)) * time.Second
				if r.Validate() != nil {
					continue
				}
				res := reserve(t, st, r, 1, wait)
				held = append(held, res)
				history = append(history, fmt.Sprintf("reserve class %d wait %v: %v", r.Class, wait, res.Allowed))
			}
		}
		where := func() string {
			return fmt.Sprintf("seed %d round %d, stack %s, after:\n\t%s", seed, round, describeStack(req), strings.Join(history, "\n\t"))
		}
		before := dumpKeys(t, client, st.Prefix())
		snap := mustInspect(t, st, req)
		if after := dumpKeys(t, client, st.Prefix()); fmt.Sprint(before) != fmt.Sprint(after) {
			t.Fatalf("%s\nthe peek changed the keys:\nbefore %v\nafter  %v", where(), before, after)
		}
		for i, it := range snap.Items {
			l := req.Items[i].Limit
			if (it.Lanes != nil) != (l.Kind == quota.GCRA && l.Reserve != nil) || (it.Held != nil) != (l.Kind != quota.GCRA && l.Reserve != nil) {
				t.Fatalf("%s\nitem %d (%s): lanes %v, held %v", where(), i, l.Name, it.Lanes, it.Held)
			}
			var sum int64
			for _, ln := range it.Lanes {
				sum += ln.Remaining
			}
			if it.Lanes != nil && sum != it.Remaining {
				t.Fatalf("%s\nitem %d (%s): lanes %v sum to %d, Remaining %d", where(), i, l.Name, it.Lanes, sum, it.Remaining)
			}
			for c := 0; c < max(l.Classes(), 1); c++ {
				room := snap.Headroom(i, l, c)
				if c == 0 && !l.Pace && room != it.Remaining {
					t.Fatalf("%s\nitem %d (%s): class 0's headroom %d, Remaining %d", where(), i, l.Name, room, it.Remaining)
				}
				restoreKeys(t, client, st.Prefix(), before)
				one := quota.Request{Tag: req.Tag, Items: req.Items[i : i+1], Class: c}
				var admitted int64
				for admitted <= room && reserve(t, st, one, 1, 0).Allowed {
					admitted++
				}
				if admitted != room {
					t.Fatalf("%s\nitem %d (%s) class %d: Headroom %d (%+v), decisions admit %d",
						where(), i, l.Name, c, room, it, admitted)
				}
			}
		}
	}
}

// TestClassesAgreeWithMemory: random histories of decisions of every
// class, cancels, settles, syncs, lease releases and clock steps on stacks
// with classes and paced windows give the same results in the Redis store
// as in the memory store, Sync included (which the differential test of
// package quotatest does not draw).
func TestClassesAgreeWithMemory(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	ctx := context.Background()
	for seed := int64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewSource(seed))
		clock := quotatest.NewClock(start.Add(time.Duration(rng.Intn(3600)) * time.Second))
		stores := []quota.Store{newStore(t, client, clock), quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})}
		req := stack("agree", classedStack(rng)...)
		req.Pauses = []string{"pause"}
		classes := max(classesOf(req), 1)
		var held [][]*quota.Reservation
		var history []string
		for step := 0; step < 150; step++ {
			where := func() string {
				return fmt.Sprintf("seed %d step %d, stack %s, after:\n\t%s", seed, step, describeStack(req), strings.Join(history, "\n\t"))
			}
			op := rng.Intn(10)
			switch {
			case op == 0:
				d := time.Duration(rng.Intn(2500)) * time.Millisecond
				clock.Advance(d)
				history = append(history, fmt.Sprintf("advance %v", d))
			case op == 1 && len(held) > 0:
				rs := held[rng.Intn(len(held))]
				for _, r := range rs {
					if err := r.Cancel(ctx); err != nil {
						t.Fatal(err)
					}
				}
				history = append(history, "cancel")
			case op == 2 && len(held) > 0:
				rs := held[rng.Intn(len(held))]
				actual := make([]int64, len(req.Items))
				for i := range actual {
					actual[i] = rng.Int63n(5) - 1
				}
				for _, r := range rs {
					if err := r.Settle(ctx, actual); err != nil {
						t.Fatal(err)
					}
				}
				history = append(history, fmt.Sprintf("settle %v", actual))
			case op == 3 && len(held) > 0:
				rs := held[rng.Intn(len(held))]
				var obs []quota.Observed
				for i := range req.Items {
					if rng.Intn(2) == 0 {
						obs = append(obs, quota.Observed{Item: i, Remaining: rng.Int63n(req.Items[i].Limit.Capacity() + 2)})
					}
				}
				for _, r := range rs {
					if err := r.Sync(ctx, obs); err != nil {
						t.Fatal(err)
					}
				}
				history = append(history, fmt.Sprintf("sync %+v", obs))
			case op == 4 && len(held) > 0:
				for _, r := range held[rng.Intn(len(held))] {
					if err := r.Release(ctx); err != nil {
						t.Fatal(err)
					}
				}
				history = append(history, "release")
			case op == 5:
				d := time.Duration(rng.Intn(1500)) * time.Millisecond
				for _, st := range stores {
					if err := st.Pause(ctx, req.Tag, "pause", d); err != nil {
						t.Fatal(err)
					}
				}
				history = append(history, fmt.Sprintf("pause %v", d))
			default:
				r := req
				r.Class, r.Cost = rng.Intn(classes), 1+rng.Int63n(2)
				r.MaxWait = time.Duration(rng.Intn(3)) * time.Duration(rng.Intn(20)) * time.Second
				if r.Validate() != nil {
					r.Cost = 1
				}
				var rs []*quota.Reservation
				for i, st := range stores {
					res, err := st.Reserve(ctx, &r)
					if err != nil {
						t.Fatalf("%s\nstore %d: %v", where(), i, err)
					}
					rs = append(rs, res)
				}
				if a, b := fmt.Sprintf("%+v", rs[0].Result), fmt.Sprintf("%+v", rs[1].Result); a != b {
					t.Fatalf("%s\nclass %d cost %d wait %v: Redis %s\nmemory %s", where(), r.Class, r.Cost, r.MaxWait, a, b)
				}
				history = append(history, fmt.Sprintf("reserve class %d cost %d wait %v: %+v", r.Class, r.Cost, r.MaxWait, rs[0].Result))
				if rs[0].Allowed {
					held = append(held, rs)
				}
			}
		}
	}
}

// TestClassedKeys: a decision of each class of a stack with classes
// writes only keys in the request's hash tag, each with a TTL no longer
// than its state needs (plus the test's slack): a lane at its tat, an
// activity record at ActiveFor; the bottom lane is the item key, and the
// bottom class writes no activity record. Inspect reads the lanes and
// the active classes, and Headroom what each class may take. Reset
// deletes them all.
func TestClassedKeys(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	lanes := gcra("lanes", 10, time.Second, 0)
	lanes.Reserve = []int64{2000, 3000}
	held := window("held", 12, quota.Hour, nil)
	held.Reserve, held.ActiveFor = []int64{2500, 2500}, 20*time.Second
	req := stack("k", lanes, held)
	// Each class takes the lowest lane it may while it has room: the
	// bottom class's 5, class 1's 3, and then class 0 its own.
	for _, c := range []int{2, 2, 2, 2, 2, 1, 1, 1, 0} {
		r := req
		r.Class = c
		if res := reserve(t, st, r, 1, 0); !res.Allowed {
			t.Fatalf("class %d denied: %+v", c, res.Result)
		}
	}
	slack := time.Duration(testSlack) * time.Millisecond
	keys := snapshot(t, client, st.Prefix())
	want := map[string]time.Duration{
		st.Key("k", "lanes"):            time.Second + slack,                    // the bottom lane: 5 of 5/s
		st.LaneKey("k", "lanes", 1):     time.Second + time.Millisecond + slack, // 3 of 3/s, intervals rounded up
		st.LaneKey("k", "lanes", 0):     500*time.Millisecond + slack,           // 1 of 2/s
		st.Key("k", "held"):             time.Hour + slack,
		st.seenKey(st.Key("k", "held")): 20*time.Second + slack,
	}
	for k, ks := range keys {
		most, ok := want[k]
		if !ok {
			t.Errorf("unexpected key %s: %+v", k, ks)
			continue
		}
		if ks.pttl <= 0 || ks.pttl > most {
			t.Errorf("%s: TTL %v, want within (0, %v]", k, ks.pttl, most)
		}
	}
	for k := range want {
		if _, ok := keys[k]; !ok {
			t.Errorf("key %s missing", k)
		}
	}
	if got, want := keys[st.seenKey(st.Key("k", "held"))].value, fmt.Sprintf("0=%d,1=%d", start.UnixMicro(), start.UnixMicro()); got != want {
		t.Errorf("activity record %q, want %q (the bottom class records none)", got, want)
	}
	snap := mustInspect(t, st, req)
	lanesGot, heldGot := snap.Items[0].Lanes, snap.Items[1].Held
	wantLanes := []quota.Status{{Remaining: 1, ResetAfter: 500 * time.Millisecond}, {Remaining: 0, ResetAfter: time.Second + 2*time.Microsecond}, {Remaining: 0, ResetAfter: time.Second}}
	if fmt.Sprint(lanesGot) != fmt.Sprint(wantLanes) || snap.Items[0].Remaining != 1 {
		t.Errorf("lanes %v (remaining %d), want %v (1)", lanesGot, snap.Items[0].Remaining, wantLanes)
	}
	if want := []time.Duration{20 * time.Second, 20 * time.Second}; fmt.Sprint(heldGot) != fmt.Sprint(want) {
		t.Errorf("held %v, want %v", heldGot, want)
	}
	// Headroom: class 0 has its own lane's 1; class 2 has none (no lane
	// above it is full). The window's 12 less the 9 counted, less for
	// class 2 the 3 and 3 the active classes above it hold.
	for c, want := range []int64{1, 0, 0} {
		if got := snap.Headroom(0, lanes, c); got != want {
			t.Errorf("lanes: class %d's headroom %d, want %d", c, got, want)
		}
	}
	for c, want := range []int64{3, 0, 0} {
		if got := snap.Headroom(1, held, c); got != want {
			t.Errorf("held: class %d's headroom %d, want %d", c, got, want)
		}
	}
	if err := st.Reset(context.Background(), "k", "lanes", "held"); err != nil {
		t.Fatal(err)
	}
	if left := snapshot(t, client, st.Prefix()); len(left) != 0 {
		t.Errorf("Reset left %v", left)
	}
}

// TestClassedCommands: what a decision of a stack with classes costs
// Redis: one MGET for every lane of a GCRA limit and one SET of the lane
// charged; one HMGET of the activity record for a class below the top
// and, for a class above the bottom, an HSET and a PEXPIRE of it.
func TestClassedCommands(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	st := newStore(t, srv.Client(t), nil)
	lanes := gcra("lanes", 1000, time.Second, 0)
	lanes.Reserve = []int64{2000, 3000}
	held := &quota.Limit{Name: "held", Kind: quota.Rolling, Rate: 1 << 30, Period: time.Hour, Reserve: []int64{2500, 2500}}
	req := stack("c", lanes)
	reserve(t, st, req, 1, 0) // loads the script
	stats := srv.Client(t)
	for _, tc := range []struct {
		name  string
		req   quota.Request
		class int
		want  map[string]int64
	}{
		{"lanes, class 0", stack("c", lanes), 0, map[string]int64{"evalsha": 1, "time": 1, "mget": 1, "set": 1}},
		{"lanes, class 2", stack("c", lanes), 2, map[string]int64{"evalsha": 1, "time": 1, "mget": 1, "set": 1}},
		{"held, class 0", stack("c", held), 0, map[string]int64{"evalsha": 1, "time": 1, "hmget": 1, "del": 1, "hincrby": 1, "hset": 2, "pexpire": 2}},
		{"held, class 2", stack("c", held), 2, map[string]int64{"evalsha": 1, "time": 1, "hmget": 2, "hincrby": 1, "hset": 1, "pexpire": 1}},
	} {
		r := tc.req
		r.Class = tc.class
		before := commandCalls(t, stats)
		if res := reserve(t, st, r, 1, 0); !res.Allowed {
			t.Fatalf("%s: denied", tc.name)
		}
		checkCalls(t, tc.name, callsSince(before, commandCalls(t, stats)), tc.want)
	}
}

// TestClassedOnCluster: a decision of every kind with classes runs on a
// Redis Cluster: its lanes and activity records are in its slot.
func TestClassedOnCluster(t *testing.T) {
	t.Parallel()
	client := redistest.StartCluster(t).Client(t)
	st := newStore(t, client, quotatest.NewClock(start))
	for i, l := range classedLimits() {
		req := stack(fmt.Sprintf("tenant:%d", i), l)
		for c := 0; c < max(l.Classes(), 1); c++ {
			r := req
			r.Class = c
			if res := reserve(t, st, r, 1, time.Hour); !res.Allowed {
				t.Fatalf("%s class %d: denied %+v", l.Name, c, res.Result)
			}
		}
		if _, err := st.Inspect(context.Background(), &req); err != nil {
			t.Fatalf("%s: Inspect: %v", l.Name, err)
		}
	}
}

// TestPaceTimeExact: a paced window's slot times are the same µs in the
// Redis store as in the memory store for rates up to 2^51, costs
// anywhere up to the rate, and windows of an hour, a day (a DST day of 23
// and 25 hours among them) and a month: both compute the pace time by the
// same float64 expression (Lua's doubles are Go's float64), and the lead,
// D/100, exactly.
func TestPaceTimeExact(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewSource(7))
	days := []time.Time{
		time.Date(2026, 3, 8, 0, 0, 0, 0, la),  // 23 hours
		time.Date(2026, 11, 1, 0, 0, 0, 0, la), // 25 hours
		time.Date(2026, 6, 17, 0, 0, 0, 0, la),
	}
	for i := 0; i < 300; i++ {
		day := days[rng.Intn(len(days))]
		l := window("paced", 1+rng.Int63n(1<<uint(1+rng.Intn(51))), []quota.Unit{quota.Hour, quota.Day, quota.Month}[rng.Intn(3)], la)
		l.Pace = true
		class := 0
		if rng.Intn(2) == 0 {
			l.Reserve, l.PaceReserve = []int64{0}, 1+rng.Int63n(9999)
			class = rng.Intn(2)
		}
		clock := quotatest.NewClock(day.Add(time.Duration(rng.Int63n(int64(23 * time.Hour)))))
		stores := []quota.Store{newStore(t, client, clock), quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})}
		req := stack("pace", l)
		req.Class, req.MaxWait = class, quota.LongestWait
		for j := 0; j < 2; j++ {
			req.Cost = 1 + rng.Int63n(l.Rate)
			var got [2]string
			for k, st := range stores {
				res, err := st.Reserve(ctx, &req)
				if err != nil {
					t.Fatal(err)
				}
				got[k] = fmt.Sprintf("%+v", res.Result)
			}
			if got[0] != got[1] {
				t.Fatalf("rate %d %v pace reserve %d at %v, class %d cost %d: Redis %s, memory %s",
					l.Rate, l.Calendar.Unit, l.PaceReserve, clock.Now(), class, req.Cost, got[0], got[1])
			}
		}
	}
}
