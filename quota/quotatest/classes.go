package quotatest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// This file is the conformance of priority classes and pacing (package
// quota's doc, "Priority classes" and "Pacing").

// classed returns l with reserves (basis points) for the classes above
// the bottom.
func classed(l *quota.Limit, reserve ...int64) *quota.Limit {
	l.Reserve = reserve
	return l
}

// lanes is a GCRA limit of 10/s with 20% kept for class 0: lane 0 runs
// at 2/s with a burst of 2 (T 500ms), the bottom lane at 8/s with a
// burst of 8 (T 125ms); the whole limit's interval is 100ms.
func lanes() *quota.Limit { return classed(gcra("lanes", 10, time.Second, 0), 2000) }

func classCases() []conformanceCase {
	held := func(l *quota.Limit) *quota.Limit { return classed(l, 3000) } // a hold of 3 of 10
	leases := classed(concurrent("streams", 3, time.Hour), 3400)          // a hold of 1 of 3
	leases.ActiveFor = 10 * time.Second
	return []conformanceCase{
		{name: "a window's reserve is held against a lower class while the class above is active, then released",
			limits: []*quota.Limit{held(window("hourly", 10, quota.Hour, 0, time.UTC))},
			steps: []step{
				{class: 0, ok: true, decider: noD, remain: []int64{9}},
				// count + 1 + the hold of 3 <= 10: six more for class 1
				{class: 1, ok: true, decider: noD}, {class: 1, ok: true, decider: noD}, {class: 1, ok: true, decider: noD},
				{class: 1, ok: true, decider: noD}, {class: 1, ok: true, decider: noD},
				{class: 1, ok: true, decider: noD, remain: []int64{3}},
				{class: 1, ok: false, wait: time.Hour, decider: 0, remain: []int64{3}},
				// class 0 is active for ActiveFor (a minute) after its
				// last admitted request
				{after: time.Minute - time.Microsecond, class: 1, ok: false, wait: time.Hour - time.Minute + time.Microsecond, decider: 0},
				{after: time.Microsecond, class: 1, ok: true, decider: noD, remain: []int64{2}},
				{class: 0, ok: true, decider: noD, remain: []int64{1}},
				{class: 1, ok: false, wait: time.Hour - time.Minute, decider: 0},
				{class: 0, ok: true, decider: noD, remain: []int64{0}},
				{class: 0, ok: false, wait: time.Hour - time.Minute, decider: 0},
			}},
		{name: "a rolling window's reserve is held against a lower class",
			limits: []*quota.Limit{held(rolling("rolling", 10, time.Hour))},
			steps: []step{
				{class: 0, ok: true, decider: noD},
				{class: 1, ok: true, decider: noD}, {class: 1, ok: true, decider: noD}, {class: 1, ok: true, decider: noD},
				{class: 1, ok: true, decider: noD}, {class: 1, ok: true, decider: noD}, {class: 1, ok: true, decider: noD},
				// all seven sit in the bucket of the start (36s wide),
				// counted until a period after its end
				{class: 1, ok: false, wait: time.Hour + 36*time.Second, decider: 0},
				{class: 0, ok: true, decider: noD, remain: []int64{2}},
				{after: time.Minute, class: 1, ok: true, decider: noD, remain: []int64{1}},
			}},
		{name: "a lease cap keeps leases for the class above while it is active",
			limits: []*quota.Limit{leases},
			steps: []step{
				{class: 0, ok: true, decider: noD, remain: []int64{2}},
				{class: 1, ok: true, decider: noD, remain: []int64{1}},
				// live 2 + 1 + the hold of 1 > 3: denied, whatever the wait,
				// until the soonest lease expires
				{class: 1, maxWait: 2 * time.Hour, ok: false, wait: time.Hour, decider: 0},
				{class: 0, ok: true, decider: noD, remain: []int64{0}},
			}},
		{name: "GCRA lanes: a lower class takes its lane, then borrows a full lane above, one at a time",
			limits: []*quota.Limit{lanes()},
			steps: []step{
				{class: 1, ok: true, decider: noD, remain: []int64{9}},
				{class: 1, ok: true, decider: noD}, {class: 1, ok: true, decider: noD}, {class: 1, ok: true, decider: noD},
				{class: 1, ok: true, decider: noD}, {class: 1, ok: true, decider: noD}, {class: 1, ok: true, decider: noD},
				{class: 1, ok: true, decider: noD, remain: []int64{2}},
				// the bottom lane is spent; lane 0 is full, so one is borrowed
				{class: 1, ok: true, decider: noD, remain: []int64{1}},
				// lane 0 is no longer full: the bottom lane's next slot
				{class: 1, ok: false, wait: 125 * time.Millisecond, decider: 0, remain: []int64{1}},
				// class 0 still has its lane's last one at once
				{class: 0, ok: true, decider: noD, remain: []int64{0}},
				// and may use the lanes below its own: the bottom lane is sooner
				{class: 0, ok: false, wait: 125 * time.Millisecond, decider: 0},
				{class: 1, maxWait: time.Second, ok: true, wait: 125 * time.Millisecond, decider: 0},
				{class: 1, maxWait: time.Second, ok: true, wait: 250 * time.Millisecond, decider: 0},
				// class 0 takes the sooner lane: the bottom's 375ms, not its own 500ms
				{class: 0, maxWait: time.Second, ok: true, wait: 375 * time.Millisecond, decider: 0},
				{class: 0, maxWait: time.Second, ok: true, wait: 500 * time.Millisecond, decider: 0},
				{after: time.Second, class: 1, ok: true, decider: noD},
			}},
		{name: "a request charges the lowest lane that admits it, so class 0 keeps its own lane for when the others are spent",
			limits: []*quota.Limit{lanes()},
			steps: []step{
				{class: 0, ok: true, decider: noD, remain: []int64{9}},
				{class: 0, ok: true, decider: noD}, {class: 0, ok: true, decider: noD, remain: []int64{7}},
				{class: 1, ok: true, decider: noD}, {class: 1, ok: true, decider: noD}, {class: 1, ok: true, decider: noD},
				{class: 1, ok: true, decider: noD}, {class: 1, ok: true, decider: noD, remain: []int64{2}},
				{class: 1, ok: true, decider: noD, remain: []int64{1}}, // lane 0 lent, once
				{class: 1, ok: false, wait: 125 * time.Millisecond, decider: 0},
				{class: 0, ok: true, decider: noD, remain: []int64{0}},
			}},
		{name: "a pause holds every class",
			limits: []*quota.Limit{lanes(), held(window("hourly", 10, quota.Hour, 0, time.UTC))},
			steps: []step{
				{class: 1, ok: true, decider: noD},
				{pause: 5 * time.Second},
				{class: 0, ok: false, wait: 5 * time.Second, decider: paused},
				{class: 1, ok: false, wait: 5 * time.Second, decider: paused},
				{class: 0, maxWait: 5 * time.Second, ok: true, wait: 5 * time.Second, decider: paused},
				// The pause drained every lane by its own bucket (package doc
				// "After a pause"): class 0 took the bottom lane's room at the
				// pause's end, and lane 0, drained to one below full, is not
				// lent.
				{after: 5 * time.Second, class: 1, maxWait: time.Second, ok: true, wait: 125 * time.Millisecond, decider: 0},
			}},
	}
}

// testClassWait: batch (class 1) fills the bottom lane 30 seconds ahead
// with waiters; an interactive request (class 0) is still admitted at
// once, and an interactive trickle within its lane's rate (2/s) keeps
// going at once, while the batch waiters keep their slots. On the same
// limit without classes, the interactive request queues behind the
// batch: 30 seconds.
func testClassWait(t *testing.T, newStore NewStore) {
	for _, withClasses := range []bool{true, false} {
		clock := NewClock(start)
		st := newStore(t, clock)
		ctx := context.Background()
		l := lanes()
		if !withClasses {
			l.Reserve = nil
		}
		req := func(class int, maxWait time.Duration) *quota.Reservation {
			t.Helper()
			r := quota.Request{Tag: "wait", Items: []quota.Item{{Limit: l, Key: "lanes"}}, Class: class, MaxWait: maxWait}
			res, err := st.Reserve(ctx, &r)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		batch := 0
		for ; ; batch++ {
			if res := req(1, 30*time.Second); !res.Allowed {
				break
			}
		}
		interactive := req(0, time.Minute)
		if !withClasses {
			// 10 at once, then one per 100ms up to 30s: 310 in all; the
			// interactive request is the next.
			if batch != 310 || !interactive.Allowed || interactive.Wait != 30*time.Second+100*time.Millisecond {
				t.Errorf("without classes: %d batch waiters, then interactive %+v; want 310 and a wait of 30.1s", batch, interactive.Result)
			}
			continue
		}
		// 8 at once and one borrowed from lane 0, then the bottom lane's
		// one per 125ms up to 30s: 9 + 240.
		if batch != 249 {
			t.Errorf("with classes: %d batch waiters booked 30s ahead, want 249", batch)
		}
		if !interactive.Allowed || interactive.Wait != 0 {
			t.Fatalf("with classes: an interactive request behind 30s of batch waiters got %+v, want admitted at once", interactive.Result)
		}
		// The trickle: one every 500ms, lane 0's rate.
		for i := 1; i <= 20; i++ {
			clock.Advance(500 * time.Millisecond)
			if res := req(0, time.Minute); !res.Allowed || res.Wait > 100*time.Millisecond {
				t.Fatalf("with classes: interactive request %d of a trickle at its lane's rate got %+v, want admitted within one interval (100ms)", i, res.Result)
			}
		}
		// The batch waiters' slots stand: the next batch request still
		// queues behind them, 30s after the start.
		if res := req(1, time.Minute); !res.Allowed || res.Wait != start.Add(30*time.Second+125*time.Millisecond).Sub(clock.Now()) {
			t.Errorf("with classes: the next batch request got %+v, want its slot 30.125s after the start", res.Result)
		}
	}
}

// testClassBorrow: with class 0 idle, a lower class asking faster than
// the limit (every 10ms), failing fast, is admitted at about the whole
// limit's rate: its own lane's, and lane 0's refill, borrowed whenever
// the lane is full. Over 10 seconds the limit without classes admits 109
// (10 at once, then one per 100ms); with classes class 1 gets 107: the
// bottom lane's 8 and one per 125ms (87), and lane 0's 20, borrowed at 0,
// 510ms, 1010ms and so on. Of the two it misses, one stays in lane 0 for
// class 0 (it is borrowed only when full, and takes one), and one is
// 10ms of lane 0's refill that overflowed while the lane sat full at
// 500ms, where the arrival went to the bottom lane.
func testClassBorrow(t *testing.T, newStore NewStore) {
	admitted := func(withClasses bool) int {
		clock := NewClock(start)
		st := newStore(t, clock)
		l := lanes()
		if !withClasses {
			l.Reserve = nil
		}
		n := 0
		for at := time.Duration(0); at < 10*time.Second; at += 10 * time.Millisecond {
			clock.Set(start.Add(at))
			r := quota.Request{Tag: "borrow", Items: []quota.Item{{Limit: l, Key: "lanes"}}, Class: 1}
			res, err := st.Reserve(context.Background(), &r)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				n++
			}
		}
		return n
	}
	if plain := admitted(false); plain != 109 {
		t.Errorf("without classes: %d admitted in 10s, want 109", plain)
	}
	if lanes := admitted(true); lanes != 107 {
		t.Errorf("with class 0 idle, class 1 got %d in 10s, want 107", lanes)
	}
}

// testClassSync: the vendor says X remain of the whole limit; the lowest
// lanes are drained first, lane k to X less the bursts of the lanes above
// it (taken to be full); the lane the reservation charged by its mark,
// every other lane with all that is booked in it kept on top.
func testClassSync(t *testing.T, newStore NewStore) {
	for _, tc := range []struct {
		name                 string
		remaining            int64
		batchFirst           int  // batch requests admitted before the one synced
		interactive          bool // the one synced is class 0's
		interactiveAfter     bool // class 0 takes one after the synced one
		wantBatch, wantInter int
	}{
		{name: "the bottom lane keeps 5-2 = 3, and borrows one of lane 0's 2", remaining: 5, wantBatch: 4, wantInter: 1},
		{name: "the bottom lane keeps nothing, lane 0 one: no longer full, so not lent", remaining: 1, wantBatch: 0, wantInter: 1},
		{name: "every lane drained", remaining: 0, wantBatch: 0, wantInter: 0},
		{name: "class 0's reservation charged the bottom lane (the lowest that admits), and it is synced like batch's",
			remaining: 5, interactive: true, wantBatch: 4, wantInter: 1},
		{name: "class 0's reservation charged lane 0 (the bottom lane spent): lane 0 keeps its last one",
			remaining: 1, batchFirst: 8, interactive: true, wantBatch: 0, wantInter: 1},
		{name: "class 0's reservation charged lane 0: a sync to 0 drains it",
			remaining: 0, batchFirst: 8, interactive: true, wantBatch: 0, wantInter: 0},
		{name: "a lane the reservation did not charge keeps what was booked in it after the response: lane 0's one counts on top of the vendor's 1",
			remaining: 1, interactiveAfter: true, wantBatch: 0, wantInter: 0},
	} {
		s := newSyncCase(t, newStore, lanes())
		s.req.Class = 1
		for range tc.batchFirst {
			s.reserve()
		}
		if tc.interactive {
			s.req.Class = 0
		}
		r := s.reserve()
		if tc.interactiveAfter {
			s.req.Class = 1
			for range 7 { // the rest of the bottom lane
				s.reserve()
			}
			s.req.Class = 0
			s.reserve() // lane 0's first
		}
		s.sync(r, quota.Observed{Remaining: tc.remaining})
		s.req.Class = 1
		gotBatch := s.admitted()
		s.req.Class = 0
		gotInter := s.admitted()
		if gotBatch != tc.wantBatch || gotInter != tc.wantInter {
			t.Errorf("%s: sync to %d: %d batch then %d interactive admitted at once, want %d and %d",
				tc.name, tc.remaining, gotBatch, gotInter, tc.wantBatch, tc.wantInter)
		}
	}
}

// testPacedDay: a paced daily window of 100 on a day of length day (a
// daylight-saving day, 23 or 25 hours) starting at dayStart: the x-th
// request goes no sooner than the line dayStart - F + x*day/100 (F =
// day/100), so the last of the 100 goes at the window's real end less F,
// and the next goes at the next window's start.
func testPacedDay(t *testing.T, newStore NewStore, dayStart time.Time, day time.Duration) {
	clock := NewClock(dayStart)
	st := newStore(t, clock)
	l := window("daily", 100, quota.Day, 0, la)
	l.Pace = true
	end := dayStart.Add(day)
	if _, e := l.Calendar.Bounds(dayStart); !e.Equal(end) {
		t.Fatalf("the day starting %v ends %v, not %v later", dayStart, e, day)
	}
	lead := day / 100
	for x := 1; x <= 101; x++ {
		r := quota.Request{Tag: "paced", Items: []quota.Item{{Limit: l, Key: "daily"}}, MaxWait: 26 * time.Hour}
		res, err := st.Reserve(context.Background(), &r)
		if err != nil {
			t.Fatal(err)
		}
		want := dayStart.Add(-lead + time.Duration(x)*day/100) // day/100 is a whole µs here
		if x == 101 {
			want = end // the next day: its first one is due at its start
		}
		if got := clock.Now().Add(res.Wait); !res.Allowed || !got.Equal(want) {
			t.Fatalf("request %d: %+v, slot %v; want admitted at %v", x, res.Result, got, want)
		}
		if x == 100 && !want.Equal(end.Add(-lead)) {
			t.Fatalf("the 100th slot %v is not the window's end %v less its lead %v", want, end, lead)
		}
	}
}

// testPaceReserve: a paced daily window of 10 keeping 20% for class 0:
// until the last lead F of the window, the classes below follow the line
// of 8 a day and may not pass 8; class 0 follows the line of 10 a day;
// from e - F every class may take what is left.
func testPaceReserve(t *testing.T, newStore NewStore) {
	dayStart := time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC)
	clock := NewClock(dayStart)
	st := newStore(t, clock)
	l := window("daily", 10, quota.Day, 0, time.UTC)
	l.Pace, l.PaceReserve, l.Reserve = true, 2000, []int64{0}
	const day = 24 * time.Hour
	lead := day / 100
	end := dayStart.Add(day)
	line := func(from time.Time, rate, x int64) time.Time {
		return from.Add(-lead + time.Duration(math.Ceil(float64(x)*(float64(day.Microseconds())/float64(rate))))*time.Microsecond)
	}
	step := 0
	reserve := func(class int, ok bool, retry time.Time) {
		t.Helper()
		step++
		r := quota.Request{Tag: "paced", Items: []quota.Item{{Limit: l, Key: "daily"}}, Class: class}
		res, err := st.Reserve(context.Background(), &r)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed != ok || (!ok && res.RetryAfter != retry.Sub(clock.Now())) || (ok && res.Wait != 0) {
			t.Fatalf("request %d (class %d at +%v): %+v; want allowed %v, or a retry at +%v",
				step, class, clock.Now().Sub(dayStart), res.Result, ok, retry.Sub(dayStart))
		}
	}
	clock.Set(dayStart.Add(12 * time.Hour))
	for range 4 { // the line of 8 is at 4.08 at noon
		reserve(1, true, time.Time{})
	}
	reserve(1, false, line(dayStart, 8, 5))
	reserve(0, true, time.Time{}) // the line of 10 is at 5.1
	reserve(0, false, line(dayStart, 10, 6))
	clock.Set(end.Add(-lead - time.Microsecond))
	reserve(1, true, time.Time{}) // 6
	reserve(1, true, time.Time{}) // 7
	reserve(1, false, end.Add(-lead))
	reserve(0, true, time.Time{}) // 8: the line of 10 passed it long ago
	clock.Set(end.Add(-lead))
	reserve(1, true, time.Time{}) // the reserve released: 9
	reserve(1, true, time.Time{}) // 10
	reserve(1, false, line(end, 8, 1))
	reserve(0, false, line(end, 10, 1))
}
