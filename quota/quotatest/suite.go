// Package quotatest holds what every quota.Store must pass: a conformance
// suite of time-stepped tables (Run), a differential test against a
// reference Model (Differential), and a Clock that moves only when told to.
//
// A store's own tests run both with a factory that makes a fresh store
// reading the clock it is given:
//
//	func newStore(t *testing.T, clock quota.Clock) quota.Store {
//		return mystore.New(mystore.Options{Clock: clock})
//	}
//
//	func TestConformance(t *testing.T) { quotatest.Run(t, newStore) }
//
//	func TestDifferential(t *testing.T) {
//		quotatest.Differential(t, 1, 2000, newStore)
//	}
//
// The Clock is also what tests of code that waits for a slot use:
// NewClock(start) gives a quota.Clock whose time moves only with Advance,
// so that a test of a wait never sleeps.
package quotatest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// NewStore returns a fresh, empty store that reads the given clock. The
// suite calls it once per case; the store is closed by the factory's own
// t.Cleanup if it needs closing.
type NewStore func(t *testing.T, clock quota.Clock) quota.Store

// la is the zone of the daylight-saving cases. 2026-03-08 is 23 hours
// long there, 2026-11-01 is 25.
var la = mustZone("America/Los_Angeles")

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(fmt.Sprintf("quotatest: time zone %s: %v", name, err))
	}
	return loc
}

// start is where most cases begin: on the hour, so hourly windows begin
// with the case.
var start = time.Date(2026, 3, 7, 12, 0, 0, 0, la)

func gcra(name string, rate int64, period time.Duration, burst int64) *quota.Limit {
	return &quota.Limit{Name: name, Kind: quota.GCRA, Rate: rate, Period: period, Burst: burst}
}

func concurrent(name string, rate int64, ttl time.Duration) *quota.Limit {
	return &quota.Limit{Name: name, Kind: quota.Concurrency, Rate: rate, Period: ttl}
}

func window(name string, rate int64, unit quota.Unit, reset time.Duration, loc *time.Location) *quota.Limit {
	return &quota.Limit{Name: name, Kind: quota.Window, Rate: rate,
		Calendar: quota.Calendar{Unit: unit, Reset: reset, Location: loc}}
}

func rolling(name string, rate int64, period time.Duration) *quota.Limit {
	return &quota.Limit{Name: name, Kind: quota.Rolling, Rate: rate, Period: period}
}

// A step is one operation of a case, after the clock moved by after.
// Exactly one of reserve (the default), pause and cancel happens.
type step struct {
	after   time.Duration
	cost    int64
	maxWait time.Duration
	pause   time.Duration // Pause the case's pause key for this long
	cancel  int           // Cancel the reservation of step number cancel (1-based)
	class   int           // the request's Class

	ok      bool
	wait    time.Duration // Wait when ok, RetryAfter when not
	decider int
	remain  []int64 // per limit; nil: not checked
}

type conformanceCase struct {
	name   string
	start  time.Time
	limits []*quota.Limit
	costs  []int64 // per limit (quota.Item.Cost); nil: the request's cost
	steps  []step
}

const noD, paused = quota.NoDecider, quota.PausedDecider

// forever is the longest max wait a caller can ask for; seventyYears is a
// period whose waits pile up past LongestWait in two steps.
const (
	forever      = time.Duration(1<<63 - 1)
	seventyYears = 70 * 365 * 24 * time.Hour
)

func cases() []conformanceCase {
	hour := quota.Hour
	return []conformanceCase{
		{name: "burst from idle, then one per interval", limits: []*quota.Limit{gcra("peak", 10, time.Second, 0)},
			steps: []step{
				{ok: true, decider: noD, remain: []int64{9}},
				{ok: true, decider: noD}, {ok: true, decider: noD}, {ok: true, decider: noD}, {ok: true, decider: noD},
				{ok: true, decider: noD}, {ok: true, decider: noD}, {ok: true, decider: noD}, {ok: true, decider: noD},
				{ok: true, decider: noD, remain: []int64{0}},
				{ok: false, wait: 100 * time.Millisecond, decider: 0, remain: []int64{0}},
				{after: 100 * time.Millisecond, ok: true, decider: noD, remain: []int64{0}},
				{after: 500 * time.Millisecond, ok: true, decider: noD, remain: []int64{4}},
			}},
		{name: "burst 1", limits: []*quota.Limit{gcra("one", 1, time.Second, 1)},
			steps: []step{
				{ok: true, decider: noD, remain: []int64{0}},
				{ok: false, wait: time.Second, decider: 0},
				{after: 500 * time.Millisecond, maxWait: time.Second, ok: true, wait: 500 * time.Millisecond, decider: 0, remain: []int64{0}},
				{maxWait: time.Second, ok: false, wait: 1500 * time.Millisecond, decider: 0},
			}},
		{name: "cost above 1 and max wait exactly the wait", limits: []*quota.Limit{gcra("peak", 10, time.Second, 0)},
			steps: []step{
				{cost: 4, ok: true, decider: noD, remain: []int64{6}},
				{cost: 4, ok: true, decider: noD, remain: []int64{2}},
				{cost: 4, ok: false, wait: 200 * time.Millisecond, decider: 0, remain: []int64{2}},
				{cost: 4, maxWait: 200*time.Millisecond - time.Microsecond, ok: false, wait: 200 * time.Millisecond, decider: 0},
				{cost: 4, maxWait: 200 * time.Millisecond, ok: true, wait: 200 * time.Millisecond, decider: 0, remain: []int64{0}},
			}},
		{name: "a max wait beyond LongestWait counts as LongestWait", limits: []*quota.Limit{gcra("long", 1, seventyYears, 1)},
			steps: []step{
				{maxWait: forever, ok: true, decider: noD, remain: []int64{0}},
				{maxWait: forever, ok: true, wait: seventyYears, decider: 0, remain: []int64{0}},
				// Unbounded, these would be admitted until a stored time
				// passed 2^53 µs and ResetAfter overflowed (the 5th).
				{maxWait: forever, ok: false, wait: 2 * seventyYears, decider: 0},
				{maxWait: forever, ok: false, wait: 2 * seventyYears, decider: 0},
				{maxWait: forever, ok: false, wait: 2 * seventyYears, decider: 0},
				{maxWait: quota.LongestWait, ok: false, wait: 2 * seventyYears, decider: 0},
			}},
		{name: "3 per 10s: the interval rounds up", limits: []*quota.Limit{gcra("slow", 3, 10*time.Second, 0)},
			steps: []step{
				{ok: true, decider: noD}, {ok: true, decider: noD}, {ok: true, decider: noD, remain: []int64{0}},
				// T = ceil(10s/3) = 3.333334s; the 4th is due at 3T - 3T + T.
				{ok: false, wait: 3333334 * time.Microsecond, decider: 0},
				{after: 3333333 * time.Microsecond, ok: false, wait: time.Microsecond, decider: 0},
				{after: time.Microsecond, ok: true, decider: noD, remain: []int64{0}},
			}},
		{name: "GCRA and window mixed; a denial charges nothing; a wait into the next window counts there",
			limits: []*quota.Limit{gcra("peak", 2, time.Second, 0), window("hourly", 3, hour, 0, time.UTC)},
			steps: []step{
				{ok: true, decider: noD, remain: []int64{1, 2}},
				{ok: true, decider: noD, remain: []int64{0, 1}},
				{ok: false, wait: 500 * time.Millisecond, decider: 0, remain: []int64{0, 1}},
				{after: time.Second, ok: true, decider: noD, remain: []int64{1, 0}},
				{after: time.Second, ok: false, wait: time.Hour - 2*time.Second, decider: 1, remain: []int64{2, 0}},
				{maxWait: time.Hour, ok: true, wait: time.Hour - 2*time.Second, decider: 1, remain: []int64{1, 2}},
				// the peak limit now reaches the window's start too; the first
				// limit in the stack to set the time is the decider
				{maxWait: time.Hour, ok: true, wait: time.Hour - 2*time.Second, decider: 0, remain: []int64{0, 1}},
				{maxWait: time.Hour, ok: true, wait: time.Hour - 2*time.Second + 500*time.Millisecond, decider: 0, remain: []int64{0, 0}},
			}},
		{name: "daily window on the 23-hour spring-forward day",
			start:  time.Date(2026, 3, 8, 0, 30, 0, 0, la),
			limits: []*quota.Limit{window("daily", 2, quota.Day, 0, la)},
			steps: []step{
				{ok: true, decider: noD, remain: []int64{1}},
				{ok: true, decider: noD, remain: []int64{0}},
				{ok: false, wait: 22*time.Hour + 30*time.Minute, decider: 0},
				{after: 22*time.Hour + 30*time.Minute - time.Microsecond, ok: false, wait: time.Microsecond, decider: 0},
				{after: time.Microsecond, ok: true, decider: noD, remain: []int64{1}},
			}},
		{name: "daily window on the 25-hour fall-back day",
			start:  time.Date(2026, 11, 1, 0, 30, 0, 0, la),
			limits: []*quota.Limit{window("daily", 1, quota.Day, 0, la)},
			steps: []step{
				{ok: true, decider: noD, remain: []int64{0}},
				{ok: false, wait: 24*time.Hour + 30*time.Minute, decider: 0},
			}},
		{name: "daily window resetting at 09:00 local across spring-forward",
			start:  time.Date(2026, 3, 8, 8, 0, 0, 0, la),
			limits: []*quota.Limit{window("daily", 1, quota.Day, 9*time.Hour, la)},
			steps: []step{
				{ok: true, decider: noD},
				{ok: false, wait: time.Hour, decider: 0},
			}},
		{name: "cancel with no later reservation gives the slot back", limits: []*quota.Limit{gcra("one", 1, time.Second, 1)},
			steps: []step{
				{ok: true, decider: noD},
				{maxWait: time.Second, ok: true, wait: time.Second, decider: 0},
				{cancel: 2},
				{maxWait: time.Second, ok: true, wait: time.Second, decider: 0},
			}},
		{name: "cancel with a later reservation gives nothing back", limits: []*quota.Limit{gcra("one", 1, time.Second, 1)},
			steps: []step{
				{ok: true, decider: noD},
				{maxWait: 2 * time.Second, ok: true, wait: time.Second, decider: 0},
				{maxWait: 2 * time.Second, ok: true, wait: 2 * time.Second, decider: 0},
				{cancel: 2},
				{maxWait: 3 * time.Second, ok: true, wait: 3 * time.Second, decider: 0},
			}},
		{name: "cancel with a later cheaper reservation gives nothing back until that one is cancelled too",
			limits: []*quota.Limit{gcra("peak", 10, time.Second, 0)},
			steps: []step{
				{cost: 10, ok: true, decider: noD},
				{cost: 5, maxWait: time.Second, ok: true, wait: 500 * time.Millisecond, decider: 0},
				{cost: 2, maxWait: time.Second, ok: true, wait: 700 * time.Millisecond, decider: 0},
				{cancel: 2},
				// a denial charges nothing: it shows the tat is still 1.7s
				{cost: 5, ok: false, wait: 1200 * time.Millisecond, decider: 0},
				{cancel: 3},
				{cost: 5, ok: false, wait: 500 * time.Millisecond, decider: 0},
			}},
		{name: "cancels in any order give every slot back", limits: []*quota.Limit{gcra("one", 1, time.Second, 1)},
			steps: []step{
				{ok: true, decider: noD},
				{maxWait: 5 * time.Second, ok: true, wait: time.Second, decider: 0},
				{maxWait: 5 * time.Second, ok: true, wait: 2 * time.Second, decider: 0},
				{maxWait: 5 * time.Second, ok: true, wait: 3 * time.Second, decider: 0},
				{cancel: 2},
				{cancel: 3},
				{cancel: 4},
				{maxWait: 5 * time.Second, ok: true, wait: time.Second, decider: 0},
			}},
		{name: "a live reservation after cancelled ones holds them until it is cancelled",
			limits: []*quota.Limit{gcra("one", 1, time.Second, 1)},
			steps: []step{
				{ok: true, decider: noD},
				{maxWait: 5 * time.Second, ok: true, wait: time.Second, decider: 0},
				{maxWait: 5 * time.Second, ok: true, wait: 2 * time.Second, decider: 0},
				{maxWait: 5 * time.Second, ok: true, wait: 3 * time.Second, decider: 0},
				{cancel: 2},
				{cancel: 4}, // back to the live reservation 3; 2 stays held
				{ok: false, wait: 3 * time.Second, decider: 0},
				{cancel: 3}, // 3 and the slot of 2 come back
				{ok: false, wait: time.Second, decider: 0},
			}},
		{name: "a cancel never gives back what a later reservation set by a pause needs",
			limits: []*quota.Limit{gcra("peak", 10, time.Second, 0)},
			steps: []step{
				// the tat goes to 1s, then to 2s
				{cost: 10, ok: true, decider: noD},
				{cost: 10, maxWait: 2 * time.Second, ok: true, wait: time.Second, decider: 0},
				{pause: 2300 * time.Millisecond},
				// the pause, not the limit, sets this slot: 2.3s; it drained
				// the bucket (tat 2.3s + 1s - 0.2s), so the tat is 3.3s
				{cost: 2, maxWait: 3 * time.Second, ok: true, wait: 2300 * time.Millisecond, decider: paused},
				// nothing may come back: the reservation of step 4 still goes at
				// 2.3s and needs the tat at 3.3s
				{cancel: 2},
				{after: 2300 * time.Millisecond, cost: 10, maxWait: time.Second, ok: true, wait: time.Second, decider: 0},
			}},
		{name: "cancel after the slot's time gives nothing back", limits: []*quota.Limit{gcra("one", 1, time.Second, 1)},
			steps: []step{
				{ok: true, decider: noD},
				{maxWait: time.Second, ok: true, wait: time.Second, decider: 0},
				{after: time.Second, cancel: 2},
				{ok: false, wait: time.Second, decider: 0},
			}},
		{name: "a second cancel gives nothing back", limits: []*quota.Limit{gcra("one", 1, time.Second, 1)},
			steps: []step{
				{ok: true, decider: noD},
				{maxWait: time.Second, ok: true, wait: time.Second, decider: 0},
				{cancel: 2},
				{cancel: 2},
				{maxWait: time.Second, ok: true, wait: time.Second, decider: 0},
				{ok: false, wait: 2 * time.Second, decider: 0},
			}},
		{name: "cancel gives a window's count back to the window it was charged to",
			limits: []*quota.Limit{window("hourly", 1, hour, 0, time.UTC)},
			steps: []step{
				{ok: true, decider: noD},
				{maxWait: 2 * time.Hour, ok: true, wait: time.Hour, decider: 0, remain: []int64{0}},
				{cancel: 2},
				{maxWait: 2 * time.Hour, ok: true, wait: time.Hour, decider: 0, remain: []int64{0}},
				{maxWait: 3 * time.Hour, ok: true, wait: 2 * time.Hour, decider: 0},
			}},
		{name: "pause holds every request back, and a shorter pause does not shorten it",
			limits: []*quota.Limit{gcra("peak", 10, time.Second, 0)},
			steps: []step{
				{pause: 5 * time.Second},
				{pause: time.Second},
				// drained: nothing left until the pause ends
				{ok: false, wait: 5 * time.Second, decider: paused, remain: []int64{0}},
				{maxWait: 5 * time.Second, ok: true, wait: 5 * time.Second, decider: paused, remain: []int64{0}},
				// the pause has ended; its drain holds the pace
				{after: 5 * time.Second, ok: false, wait: 100 * time.Millisecond, decider: 0},
			}},
		{name: "after a pause the requests it held go one per interval, not in a burst",
			limits: []*quota.Limit{gcra("peak", 10, time.Second, 0)},
			steps: []step{
				{pause: 2 * time.Second},
				// the first goes at the pause's end, the bucket has room for it alone
				{maxWait: 3 * time.Second, ok: true, wait: 2 * time.Second, decider: paused, remain: []int64{0}},
				{maxWait: 3 * time.Second, ok: true, wait: 2100 * time.Millisecond, decider: 0, remain: []int64{0}},
				{cost: 3, maxWait: 3 * time.Second, ok: true, wait: 2400 * time.Millisecond, decider: 0, remain: []int64{0}},
				// the pause is gone; the requests after its end keep the pace
				{after: 2400 * time.Millisecond, ok: false, wait: 100 * time.Millisecond, decider: 0},
				{after: 100 * time.Millisecond, ok: true, decider: noD, remain: []int64{0}},
				// long after, the bucket is full again
				{after: 10 * time.Second, ok: true, decider: noD, remain: []int64{9}},
			}},
		{name: "a pause drains a stack's every GCRA limit, with its own cost, and no window",
			limits: []*quota.Limit{gcra("requests", 10, time.Second, 0), gcra("tokens", 100, time.Second, 0), window("hourly", 100, hour, 0, time.UTC)},
			costs:  []int64{1, 40, 0},
			steps: []step{
				{pause: time.Second},
				{cost: 2, maxWait: 2 * time.Second, ok: true, wait: time.Second, decider: paused, remain: []int64{0, 0, 98}},
				// tokens: tat 2s, so 40 more at 1.4s; requests: tat 2s, one at 1.1s
				{cost: 2, maxWait: 2 * time.Second, ok: true, wait: 1400 * time.Millisecond, decider: 1, remain: []int64{3, 0, 96}},
			}},
		{name: "a pause drains at most PauseDrain of a bucket, after its end too",
			limits: []*quota.Limit{gcra("hourly", 3600, time.Hour, 0)},
			steps: []step{
				{pause: time.Second},
				// at the pause's end: a minute drained, one request charged
				{after: time.Second, ok: true, decider: noD, remain: []int64{3540}},
				{after: 30 * time.Second, ok: true, decider: noD, remain: []int64{3569}},
			}},
		{name: "a limit behind a pause decides when it is later", limits: []*quota.Limit{gcra("one", 1, 10*time.Second, 1)},
			steps: []step{
				{ok: true, decider: noD},
				{pause: 2 * time.Second},
				{ok: false, wait: 10 * time.Second, decider: 0},
			}},
		{name: "per-limit costs: a requests limit and a tokens limit in one decision",
			limits: []*quota.Limit{gcra("requests", 10, time.Second, 0), gcra("tokens", 100, time.Second, 0)},
			costs:  []int64{1, 40},
			steps: []step{
				{ok: true, decider: noD, remain: []int64{9, 60}},
				{ok: true, decider: noD, remain: []int64{8, 20}},
				{ok: false, wait: 200 * time.Millisecond, decider: 1, remain: []int64{8, 20}},
				{maxWait: 200 * time.Millisecond, ok: true, wait: 200 * time.Millisecond, decider: 1, remain: []int64{9, 0}},
				{cancel: 4},
				{maxWait: 200 * time.Millisecond, ok: true, wait: 200 * time.Millisecond, decider: 1, remain: []int64{9, 0}},
			}},
		{name: "a stack of pauses alone is decided by them",
			steps: []step{
				{ok: true, decider: noD},
				{pause: 5 * time.Second},
				{ok: false, wait: 5 * time.Second, decider: paused},
				{maxWait: 5 * time.Second, ok: true, wait: 5 * time.Second, decider: paused},
				{after: 5 * time.Second, ok: true, decider: noD},
			}},
		{name: "rolling window: the rate in any trailing period, given back bucket by bucket",
			// buckets of 100ms; each is counted until its end plus 10s
			limits: []*quota.Limit{rolling("roll", 3, 10*time.Second)},
			steps: []step{
				{ok: true, decider: noD, remain: []int64{2}},
				{after: 2 * time.Second, ok: true, decider: noD, remain: []int64{1}},
				{after: 2 * time.Second, ok: true, decider: noD, remain: []int64{0}},
				{ok: false, wait: 6100 * time.Millisecond, decider: 0, remain: []int64{0}},
				{after: 6100*time.Millisecond - time.Microsecond, ok: false, wait: time.Microsecond, decider: 0},
				{after: time.Microsecond, ok: true, decider: noD, remain: []int64{0}},
				// a wait charges the bucket of its slot, ahead of now
				{maxWait: 3 * time.Second, ok: true, wait: 2 * time.Second, decider: 0, remain: []int64{0}},
				{maxWait: 3 * time.Second, ok: false, wait: 4 * time.Second, decider: 0, remain: []int64{0}},
				// 22.2s is when every bucket has expired, past 10.1s ahead:
				// denied however long the caller waits
				{cost: 3, maxWait: time.Minute, ok: false, wait: 12100 * time.Millisecond, decider: 0},
			}},
		{name: "rolling window: a cost counts in full, and cancel gives it back to its bucket",
			limits: []*quota.Limit{rolling("roll", 10, time.Minute)},
			steps: []step{
				{cost: 6, ok: true, decider: noD, remain: []int64{4}},
				{after: 30 * time.Second, cost: 4, ok: true, decider: noD, remain: []int64{0}},
				{cost: 5, maxWait: time.Minute, ok: true, wait: 30600 * time.Millisecond, decider: 0, remain: []int64{1}},
				{cancel: 3},
				{cost: 6, maxWait: time.Minute, ok: true, wait: 30600 * time.Millisecond, decider: 0, remain: []int64{0}},
				{maxWait: time.Minute, ok: false, wait: time.Minute + 600*time.Millisecond, decider: 0},
			}},
		{name: "rolling window: nothing beyond one period and one bucket",
			limits: []*quota.Limit{gcra("one", 1, 30*time.Second, 1), rolling("roll", 1, 10*time.Second)},
			steps: []step{
				{ok: true, decider: noD},
				// the GCRA limit sets 30s, past what the rolling window sees
				{maxWait: time.Minute, ok: false, wait: 30 * time.Second, decider: 0},
				{after: 20 * time.Second, maxWait: time.Minute, ok: true, wait: 10 * time.Second, decider: 0, remain: []int64{0, 0}},
			}},
		{name: "nothing beyond three windows", limits: []*quota.Limit{window("hourly", 1, hour, 0, time.UTC)},
			steps: []step{
				{ok: true, decider: noD},
				{maxWait: 9 * time.Hour, ok: true, wait: time.Hour, decider: 0},
				{maxWait: 9 * time.Hour, ok: true, wait: 2 * time.Hour, decider: 0},
				{maxWait: 9 * time.Hour, ok: false, wait: 3 * time.Hour, decider: 0},
			}},
	}
}

// Run runs the conformance suite against the stores newStore makes.
func Run(t *testing.T, newStore NewStore) {
	t.Run("Decisions", func(t *testing.T) {
		for _, tc := range cases() {
			t.Run(tc.name, func(t *testing.T) { runCase(t, newStore, tc) })
		}
	})
	t.Run("Classes", func(t *testing.T) {
		for _, tc := range classCases() {
			t.Run(tc.name, func(t *testing.T) { runCase(t, newStore, tc) })
		}
		t.Run("a higher class waits no longer for a deep lower queue", func(t *testing.T) { testClassWait(t, newStore) })
		t.Run("a full lane is borrowed: the whole rate is used", func(t *testing.T) { testClassBorrow(t, newStore) })
		t.Run("sync drains the lowest lane first", func(t *testing.T) { testClassSync(t, newStore) })
	})
	t.Run("Fair share", func(t *testing.T) { runFair(t, newStore) })
	t.Run("Pacing", func(t *testing.T) {
		t.Run("spring-forward day", func(t *testing.T) { testPacedDay(t, newStore, time.Date(2026, 3, 8, 0, 0, 0, 0, la), 23*time.Hour) })
		t.Run("fall-back day", func(t *testing.T) { testPacedDay(t, newStore, time.Date(2026, 11, 1, 0, 0, 0, 0, la), 25*time.Hour) })
		t.Run("pace reserve", func(t *testing.T) { testPaceReserve(t, newStore) })
	})
	t.Run("Invalid", func(t *testing.T) { testInvalid(t, newStore) })
	t.Run("Separate keys and tags", func(t *testing.T) { testSeparate(t, newStore) })
	t.Run("Over pause", func(t *testing.T) { testOverPause(t, newStore) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, newStore) })
	t.Run("Lease notify", func(t *testing.T) { testLeaseNotify(t, newStore) })
	t.Run("Settle", func(t *testing.T) { testSettle(t, newStore) })
	t.Run("Settle bounded", func(t *testing.T) { testSettleBounded(t, newStore) })
	t.Run("Cancelled together", func(t *testing.T) {
		testCancelledTogether(t, newStore, 100, 10*time.Second, time.Second)
		testCancelledTogether(t, newStore, 300, time.Minute, 2*time.Second)
	})
	t.Run("Sync", func(t *testing.T) { testSync(t, newStore) })
	t.Run("Sync rolling", func(t *testing.T) { testSyncRolling(t, newStore) })
	t.Run("Learn", func(t *testing.T) { testLearn(t, newStore) })
	t.Run("Rolling exact", func(t *testing.T) { testRollingExact(t, newStore) })
	t.Run("Rolling utilisation", func(t *testing.T) { testRollingUtilisation(t, newStore) })
	t.Run("Differential", func(t *testing.T) {
		for seed := int64(1); seed <= 4; seed++ {
			Differential(t, seed, 300, newStore)
		}
	})
}

func runCase(t *testing.T, newStore NewStore, tc conformanceCase) {
	t.Helper()
	begin := tc.start
	if begin.IsZero() {
		begin = start
	}
	clock := NewClock(begin)
	st := newStore(t, clock)
	ctx := context.Background()
	req := quota.Request{Tag: "conformance", Pauses: []string{"pause"}}
	for i, l := range tc.limits {
		it := quota.Item{Limit: l, Key: quota.KeyOf(l.Name, "")}
		if tc.costs != nil {
			it.Cost = tc.costs[i]
		}
		req.Items = append(req.Items, it)
	}
	reservations := map[int]*quota.Reservation{}
	for n, s := range tc.steps {
		clock.Advance(s.after)
		where := fmt.Sprintf("step %d (at +%v)", n+1, clock.Now().Sub(begin))
		switch {
		case s.pause > 0:
			if err := st.Pause(ctx, req.Tag, "pause", s.pause); err != nil {
				t.Fatalf("%s: Pause: %v", where, err)
			}
			continue
		case s.cancel > 0:
			if err := reservations[s.cancel].Cancel(ctx); err != nil {
				t.Fatalf("%s: Cancel: %v", where, err)
			}
			continue
		}
		r := req
		r.Cost, r.MaxWait, r.Class = s.cost, s.maxWait, s.class
		res, err := st.Reserve(ctx, &r)
		if err != nil {
			t.Fatalf("%s: Reserve: %v", where, err)
		}
		reservations[n+1] = res
		got := res.Wait
		if !res.Allowed {
			got = res.RetryAfter
		}
		if res.Allowed != s.ok || got != s.wait || res.Decider != s.decider {
			t.Errorf("%s: got allowed=%v wait/retry=%v decider=%d, want allowed=%v wait/retry=%v decider=%d",
				where, res.Allowed, got, res.Decider, s.ok, s.wait, s.decider)
		}
		if len(res.Limits) != len(req.Items) {
			t.Fatalf("%s: got %d limit statuses, want %d", where, len(res.Limits), len(req.Items))
		}
		if res.Wait < 0 || res.RetryAfter < 0 {
			t.Errorf("%s: negative wait %v or retry after %v", where, res.Wait, res.RetryAfter)
		}
		for i, st := range res.Limits {
			if st.ResetAfter < 0 || st.Remaining < 0 {
				t.Errorf("%s: limit %q: negative status %+v", where, tc.limits[i].Name, st)
			}
		}
		for i, want := range s.remain {
			if res.Limits[i].Remaining != want {
				t.Errorf("%s: limit %q remaining = %d, want %d", where, tc.limits[i].Name, res.Limits[i].Remaining, want)
			}
		}
	}
}

func testInvalid(t *testing.T, newStore NewStore) {
	st := newStore(t, NewClock(start))
	ctx := context.Background()
	ok := gcra("peak", 10, time.Second, 0)
	bad := []struct {
		name string
		req  quota.Request
	}{
		{"empty stack", quota.Request{Tag: "x"}},
		{"empty tag", quota.Request{Items: []quota.Item{{Limit: ok, Key: "peak"}}}},
		{"zero rate", quota.Request{Tag: "x", Items: []quota.Item{{Limit: gcra("zero", 0, time.Second, 0), Key: "zero"}}}},
		{"negative burst", quota.Request{Tag: "x", Items: []quota.Item{{Limit: gcra("neg", 1, time.Second, -1), Key: "neg"}}}},
		{"period below 1µs", quota.Request{Tag: "x", Items: []quota.Item{{Limit: gcra("fast", 1, time.Nanosecond, 0), Key: "fast"}}}},
		{"cost above burst", quota.Request{Tag: "x", Cost: 11, Items: []quota.Item{{Limit: ok, Key: "peak"}}}},
		{"cost above window quota", quota.Request{Tag: "x", Cost: 3, Items: []quota.Item{{Limit: window("daily", 2, quota.Day, 0, nil), Key: "daily"}}}},
		{"window without unit", quota.Request{Tag: "x", Items: []quota.Item{{Limit: &quota.Limit{Name: "w", Kind: quota.Window, Rate: 1}, Key: "w"}}}},
		{"unknown kind", quota.Request{Tag: "x", Items: []quota.Item{{Limit: &quota.Limit{Name: "k", Rate: 1}, Key: "k"}}}},
		{"nil limit", quota.Request{Tag: "x", Items: []quota.Item{{Key: "k"}}}},
		{"empty key", quota.Request{Tag: "x", Items: []quota.Item{{Limit: ok}}}},
		{"negative cost", quota.Request{Tag: "x", Cost: -1, Items: []quota.Item{{Limit: ok, Key: "peak"}}}},
		{"negative item cost", quota.Request{Tag: "x", Items: []quota.Item{{Limit: ok, Key: "peak", Cost: -1}}}},
		{"item cost above burst", quota.Request{Tag: "x", Items: []quota.Item{{Limit: ok, Key: "peak", Cost: 11}}}},
	}
	for _, b := range bad {
		res, err := st.Reserve(ctx, &b.req)
		if !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("%s: got (%v, %v), want an error wrapping quota.ErrInvalid", b.name, res, err)
		}
	}
}

// testSeparate checks that keys and tags do not share state.
func testSeparate(t *testing.T, newStore NewStore) {
	st := newStore(t, NewClock(start))
	ctx := context.Background()
	one := gcra("one", 1, time.Hour, 1)
	for _, tag := range []string{"a", "b", "{a}", "a:b", "a\nb"} {
		for _, key := range []string{quota.KeyOf("one", ""), quota.KeyOf("one", "x"), quota.KeyOf("one", "y")} {
			req := quota.Request{Tag: tag, Items: []quota.Item{{Limit: one, Key: key}}}
			res, err := st.Reserve(ctx, &req)
			if err != nil || !res.Allowed {
				t.Fatalf("tag %q key %q: first request got (%+v, %v), want allowed: state leaked between keys", tag, key, res, err)
			}
		}
	}
}

// testOverPause: a request's Over pause, in another tag, holds it back as
// its own pauses do, in the same decision: until it ends, and a wait past
// it is granted; a request in that tag is held by it too, and one of
// another tag without it is not. Resume is not part of quota.Store.
func testOverPause(t *testing.T, newStore NewStore) {
	clock := NewClock(start)
	st := newStore(t, clock)
	ctx := context.Background()
	peak := gcra("peak", 10, time.Second, 10)
	over := quota.PauseKey{Tag: "provider", Key: "pause"}
	tenant := quota.Request{Tag: "provider:acme", Pauses: []string{"pause:acme"}, Over: over,
		Items: []quota.Item{{Limit: peak, Key: quota.KeyOf("peak", "acme")}}}
	untenanted := quota.Request{Tag: "provider", Pauses: []string{"pause"}, Items: []quota.Item{{Limit: peak, Key: "peak"}}}
	alone := quota.Request{Tag: "other", Pauses: []string{"pause"}, Items: []quota.Item{{Limit: peak, Key: "peak"}}}
	if err := st.Pause(ctx, over.Tag, over.Key, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		req     quota.Request
		maxWait time.Duration
		ok      bool
		wait    time.Duration
	}{
		{"tenant, no wait", tenant, 0, false, 10 * time.Second},
		{"tenant, waits it out", tenant, 20 * time.Second, true, 10 * time.Second},
		{"the provider's own", untenanted, 0, false, 10 * time.Second},
		{"another tag", alone, 0, true, 0},
	} {
		r := c.req
		r.MaxWait = c.maxWait
		res, err := st.Reserve(ctx, &r)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := res.Wait
		if !res.Allowed {
			got = res.RetryAfter
		}
		if res.Allowed != c.ok || got != c.wait {
			t.Errorf("%s: allowed %v wait/retry %v, want %v %v", c.name, res.Allowed, got, c.ok, c.wait)
		}
		if c.wait > 0 && res.Decider != quota.PausedDecider {
			t.Errorf("%s: decider %d, want the pause (%d)", c.name, res.Decider, quota.PausedDecider)
		}
	}
	clock.Advance(11 * time.Second) // past the pause and the slot granted
	r := tenant
	if res, err := st.Reserve(ctx, &r); err != nil || !res.Allowed {
		t.Errorf("after the pause: (%+v, %v), want admitted", res.Result, err)
	}
	bad := tenant
	bad.Over.Key = ""
	if _, err := st.Reserve(ctx, &bad); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("an Over pause without a key: %v, want ErrInvalid", err)
	}
}

// testCancelledTogether: n waiters on 10/s burst 1 reserve at once with max
// wait maxWait; over the next span (on the clock), every one of them
// cancels, in random order, as an errgroup's waiters do when its context
// ends. The ones whose slot had come went; every other slot must come back,
// so that a fresh request right after the last one that went is admitted at
// once.
func testCancelledTogether(t *testing.T, newStore NewStore, n int, maxWait, span time.Duration) {
	clock := NewClock(start)
	st := newStore(t, clock)
	ctx := context.Background()
	req := quota.Request{Tag: "together", Items: []quota.Item{{Limit: gcra("slow", 10, time.Second, 1), Key: "slow"}}, MaxWait: maxWait}
	waiters := make([]*quota.Reservation, n)
	reserve := func() quota.Result {
		t.Helper()
		r := req
		res, err := st.Reserve(ctx, &r)
		if err != nil {
			t.Fatalf("%d waiters: Reserve: %v", n, err)
		}
		return res.Result
	}
	for i := range waiters {
		r := req
		res, err := st.Reserve(ctx, &r)
		if err != nil || !res.Allowed || res.Wait != time.Duration(i)*100*time.Millisecond {
			t.Fatalf("%d waiters: waiter %d got (%+v, %v), want admitted with a wait of %v", n, i, res, err, time.Duration(i)*100*time.Millisecond)
		}
		waiters[i] = res
	}
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	var lastSent time.Duration // the slot of the latest waiter that went
	for k, i := range rng.Perm(n) {
		clock.Set(start.Add(span * time.Duration(k+1) / time.Duration(n)))
		if waiters[i].Wait <= clock.Now().Sub(start) {
			lastSent = max(lastSent, waiters[i].Wait)
		}
		if err := waiters[i].Cancel(ctx); err != nil {
			t.Fatalf("%d waiters: Cancel of waiter %d: %v", n, i, err)
		}
	}
	clock.Set(start.Add(lastSent + 100*time.Millisecond))
	if res := reserve(); !res.Allowed || res.Wait != 0 {
		t.Fatalf("%d waiters cancelled in random order: a fresh request 100ms after the last slot used got %+v, want admitted at once: cancelled slots stayed reserved",
			n, res)
	}
	if res := reserve(); !res.Allowed || res.Wait != 100*time.Millisecond {
		t.Fatalf("%d waiters: the request after it got %+v, want a wait of 100ms", n, res)
	}
}

// testRollingExact: random arrivals of random costs on a stepped clock,
// some waiting (into buckets ahead of now), some behind a GCRA limit that
// sets their slot, some cancelled before their slot, against one rolling
// window. The log of what went, checked by the exact rule, never holds
// more than the rate in any trailing period.
func testRollingExact(t *testing.T, newStore NewStore) {
	clock := NewClock(start)
	st := newStore(t, clock)
	ctx := context.Background()
	roll := rolling("exact", 50, time.Minute)
	peak := gcra("peak", 2, time.Second, 5)
	rng := rand.New(rand.NewPCG(11, 3))
	type sent struct {
		slot, cost int64
		res        *quota.Reservation
		cancelled  bool
	}
	var log []*sent
	waits := []time.Duration{0, 0, 5 * time.Second, 70 * time.Second}
	for n := 0; n < 1500; n++ {
		clock.Advance(time.Duration(rng.Int64N(int64(4 * time.Second))))
		if rng.IntN(10) == 0 && len(log) > 0 {
			s := log[rng.IntN(len(log))]
			if !s.cancelled && clock.Now().UnixMicro() < s.slot {
				s.cancelled = true
				if err := s.res.Cancel(ctx); err != nil {
					t.Fatalf("step %d: Cancel: %v", n, err)
				}
			}
			continue
		}
		req := quota.Request{Tag: "exact", Items: []quota.Item{{Limit: roll, Key: "exact"}},
			Cost: 1 + rng.Int64N(3), MaxWait: waits[rng.IntN(len(waits))]}
		if rng.IntN(3) == 0 {
			req.Items = append(req.Items, quota.Item{Limit: peak, Key: "peak", Cost: 1})
		}
		res, err := st.Reserve(ctx, &req)
		if err != nil {
			t.Fatalf("step %d: Reserve: %v", n, err)
		}
		if res.Allowed {
			log = append(log, &sent{slot: clock.Now().Add(res.Wait).UnixMicro(), cost: req.Cost, res: res})
		}
	}
	var went []*sent
	for _, s := range log {
		if !s.cancelled {
			went = append(went, s)
		}
	}
	if len(went) < 500 {
		t.Fatalf("only %d of 1500 arrivals went: the test exercises too little", len(went))
	}
	slices.SortFunc(went, func(a, b *sent) int { return cmp.Compare(a.slot, b.slot) })
	p := roll.Period.Microseconds()
	var sum int64
	first := 0
	for _, s := range went {
		sum += s.cost
		for went[first].slot <= s.slot-p {
			sum -= went[first].cost
			first++
		}
		if sum > roll.Rate {
			t.Fatalf("%d went in the minute up to %v, above the rate %d", sum, time.UnixMicro(s.slot).Sub(start), roll.Rate)
		}
	}
}

// testRollingUtilisation: a steady demand above a rolling window (one
// request every 250ms, failing fast: 240 a minute for 200) is admitted at
// no less than Rate*(1 - 1/RollingBuckets) per period, over twenty
// periods. (A bursty demand loses less: a burst's bucket is held at most
// one width of time past its period.)
func testRollingUtilisation(t *testing.T, newStore NewStore) {
	clock := NewClock(start)
	st := newStore(t, clock)
	ctx := context.Background()
	roll := rolling("steady", 200, time.Minute)
	const periods = 20
	var admitted int64
	for at := time.Duration(0); at < periods*roll.Period; at += 250 * time.Millisecond {
		clock.Set(start.Add(at))
		req := quota.Request{Tag: "steady", Items: []quota.Item{{Limit: roll, Key: "steady"}}}
		res, err := st.Reserve(ctx, &req)
		if err != nil {
			t.Fatalf("at %v: Reserve: %v", at, err)
		}
		if res.Allowed {
			admitted++
		}
	}
	if least := periods * roll.Rate * (quota.RollingBuckets - 1) / quota.RollingBuckets; admitted < least {
		t.Fatalf("admitted %d in %d periods of %d, want at least %d", admitted, periods, roll.Rate, least)
	}
	if admitted > periods*roll.Rate {
		t.Fatalf("admitted %d in %d periods of %d: more than the rate", admitted, periods, roll.Rate)
	}
}
