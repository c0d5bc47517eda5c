package quotatest

import (
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// testLearn checks learning (package quota's doc, "Learning"): a limit
// with Learn set runs at the limit a Sync stated, fleet-wide (in the
// store), within its floor and ceiling; a stated limit moves it either
// way, unless it comes from a response older than the one that set it;
// a limit that does not learn ignores stated limits.
func testLearn(t *testing.T, newStore NewStore) {
	learning := func() *quota.Limit {
		l := gcra("core", 10, time.Second, 10)
		l.Learn, l.Ceiling = true, 40
		return l
	}
	stated := func(n int64) quota.Observed { return quota.Observed{Limit: n, LimitOnly: true} }
	// idle lets the bucket refill whatever the rate, and reports what a
	// fresh decision (of cost 1, charged) runs the limit at.
	idle := func(s *syncCase) int64 {
		s.clock.Advance(time.Hour)
		return s.reserve().Limits[0].Rate
	}
	t.Run("floor until stated", func(t *testing.T) {
		s := newSyncCase(t, newStore, learning())
		if rate := s.reserve().Limits[0].Rate; rate != 10 {
			t.Errorf("Status.Rate of a limit that learned nothing = %d, want the floor 10", rate)
		}
		if got := s.admitted(); got != 9 {
			t.Errorf("%d more admitted at once, want the 9 left of the floor's burst", got)
		}
	})
	for _, tc := range []struct {
		name    string
		stated  int64
		rate    int64
		atOnce  int
		comment string
	}{
		{"learns", 30, 30, 29, "rate and burst scaled by 30/10"},
		{"ceiling", 1000, 40, 39, "capped at the ceiling 40"},
		{"floor", 3, 10, 9, "never below the configured 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSyncCase(t, newStore, learning())
			s.sync(s.reserve(), stated(tc.stated))
			if rate := idle(s); rate != tc.rate {
				t.Errorf("stated %d: runs at %d, want %d (%s)", tc.stated, rate, tc.rate, tc.comment)
			}
			if got := s.admitted(); got != tc.atOnce {
				t.Errorf("stated %d: %d admitted at once from idle, want %d more (%s)", tc.stated, got, tc.atOnce, tc.comment)
			}
		})
	}
	t.Run("default ceiling", func(t *testing.T) {
		// No Ceiling: one response stating an absurd limit lifts the
		// limit to DefaultLearnCeiling times its floor, not to 1 event
		// per µs.
		l := gcra("core", 10, time.Second, 10)
		l.Learn = true
		s := newSyncCase(t, newStore, l)
		s.sync(s.reserve(), stated(1_000_000_000_000))
		if rate := idle(s); rate != 10*quota.DefaultLearnCeiling {
			t.Errorf("stated 10^12 without a ceiling: runs at %d, want %d", rate, 10*quota.DefaultLearnCeiling)
		}
		if got, want := s.admitted(), 10*quota.DefaultLearnCeiling-1; got != want {
			t.Errorf("stated 10^12 without a ceiling: %d more admitted at once from idle, want %d", got, want)
		}
	})
	t.Run("follows down", func(t *testing.T) {
		s := newSyncCase(t, newStore, learning())
		s.sync(s.reserve(), stated(30))
		idle(s)
		s.sync(s.reserve(), stated(20)) // a plan downgrade
		if rate := idle(s); rate != 20 {
			t.Errorf("after 30 then 20 stated: runs at %d, want 20", rate)
		}
	})
	for _, tc := range []struct {
		name         string
		high         int // admitted at once at the learned 40/s
		atOnce, span int // then, after 10 is stated: admitted at once, and in the next 2 s
		comment      string
	}{
		// 15 at 25 ms booked 375 ms ahead: at 100 ms they are 1.5 s, more
		// than the 1 s burst, so none at once; the next goes at 0.6 s.
		// Counted at 10/s burst 10, 2 s allow 30: 15 went, 15 are left.
		{"falls back", 15, 0, 15, "the 15 count at 10/s"},
		// 40 at 25 ms are 4 s at 100 ms, capped at the period and the
		// burst (2 s): the next goes at 1.1 s, then one per 100 ms.
		{"falls back capped", 40, 0, 10, "the 40 count as 2 s at 10/s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// What was admitted at a learned figure counts at the lower one
			// the vendor restates, not at the emission interval it was
			// charged with (docs/decisions.md, "Learning the vendor's
			// limit").
			s := newSyncCase(t, newStore, learning())
			s.sync(s.reserve(), stated(40))
			s.clock.Advance(time.Hour)
			a := s.reserve()
			for i := 1; i < tc.high; i++ {
				s.reserve()
			}
			s.sync(a, stated(10))
			if got := s.admitted(); got != tc.atOnce {
				t.Errorf("%d admitted at 40/s, then 10 stated: %d more admitted at once, want %d (%s)", tc.high, got, tc.atOnce, tc.comment)
			}
			span := 0
			for i := 0; i < 20; i++ {
				s.clock.Advance(100 * time.Millisecond)
				span += s.admitted()
			}
			if span != tc.span {
				t.Errorf("%d admitted at 40/s, then 10 stated: %d admitted in the next 2 s, want %d (%s)", tc.high, span, tc.span, tc.comment)
			}
		})
	}
	t.Run("rise keeps the state", func(t *testing.T) {
		// A higher figure leaves the booked time as it is: what was
		// admitted at the floor counts for more at the higher rate, never
		// for less (a store never loosens on a vendor's word about the
		// past).
		s := newSyncCase(t, newStore, learning())
		a := s.reserve()
		for i := 1; i < 10; i++ {
			s.reserve()
		}
		s.sync(a, stated(40))
		if got := s.admitted(); got != 0 {
			t.Errorf("the floor's 10 admitted, then 40 stated: %d more admitted at once, want 0", got)
		}
	})
	t.Run("stale response", func(t *testing.T) {
		s := newSyncCase(t, newStore, learning())
		older := s.reserve()
		s.clock.Advance(time.Second)
		newer := s.reserve()
		s.sync(newer, stated(30))
		s.sync(older, stated(20)) // sent before newer: says less
		if rate := idle(s); rate != 30 {
			t.Errorf("a stale response after a newer one: runs at %d, want 30, the newer figure", rate)
		}
	})
	t.Run("with remaining", func(t *testing.T) {
		// A response states both: the figure is learned, and the
		// reservation's state drains at the rate it was decided at.
		s := newSyncCase(t, newStore, learning())
		a := s.reserve()
		s.sync(a, quota.Observed{Limit: 30, Remaining: 2})
		if got := s.admitted(); got != 2 {
			t.Errorf("after a sync to 2 remaining: %d admitted at once, want 2", got)
		}
	})
	t.Run("not learning", func(t *testing.T) {
		s := newSyncCase(t, newStore, gcra("core", 10, time.Second, 10))
		s.sync(s.reserve(), stated(30))
		if rate := idle(s); rate != 0 {
			t.Errorf("Status.Rate of a limit that does not learn = %d, want 0", rate)
		}
		if got := s.admitted(); got != 9 {
			t.Errorf("a limit that does not learn, stated 30: %d more admitted at once, want 9", got)
		}
	})
}
