package quotatest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// testSync checks Reservation.Sync (package quota's doc, "Sync") on each
// kind of limit: it drains, it keeps the reservations made after the one
// it syncs, it never loosens, and odd input changes nothing or drains,
// never panics.
func testSync(t *testing.T, newStore NewStore) {
	kinds := []*quota.Limit{
		gcra("peak", 10, time.Second, 10),
		window("hourly", 10, quota.Hour, 0, nil),
	}
	for _, l := range kinds {
		t.Run(l.Kind.String(), func(t *testing.T) {
			t.Run("drains", func(t *testing.T) {
				s := newSyncCase(t, newStore, l)
				a := s.reserve()
				if a.Limits[0].Remaining != 9 {
					t.Fatalf("remaining after the first request = %d, want 9", a.Limits[0].Remaining)
				}
				// Another client spent 6: the vendor says 3 remain.
				s.sync(a, quota.Observed{Remaining: 3})
				if got := s.admitted(); got != 3 {
					t.Errorf("after a sync to 3 remaining: %d more admitted at once, want 3", got)
				}
			})
			t.Run("keeps newer reservations", func(t *testing.T) {
				s := newSyncCase(t, newStore, l)
				a := s.reserve()
				s.reserve()
				s.reserve()
				// The response to a, sent before the two later requests
				// reached the vendor, says 5 remain: they are still to
				// be counted, so 3 more may go, not 5.
				s.sync(a, quota.Observed{Remaining: 5})
				if got := s.admitted(); got != 3 {
					t.Errorf("a stale sync to 5 remaining after 2 newer reservations: %d more admitted at once, want 3", got)
				}
			})
			t.Run("never loosens", func(t *testing.T) {
				s := newSyncCase(t, newStore, l)
				a := s.reserve()
				for i := 0; i < 7; i++ {
					s.reserve()
				}
				s.sync(a, quota.Observed{Remaining: 9}, quota.Observed{Remaining: 1000})
				if got := s.admitted(); got != 2 {
					t.Errorf("after a sync above the state: %d more admitted at once, want the 2 left", got)
				}
			})
			t.Run("odd input", func(t *testing.T) {
				s := newSyncCase(t, newStore, l)
				a := s.reserve()
				for _, bad := range []int{-1, 1, 1 << 30} {
					if err := a.Sync(s.ctx, []quota.Observed{{Item: bad}}); !errors.Is(err, quota.ErrInvalid) {
						t.Errorf("Sync of item %d of a stack of 1: %v, want an error wrapping quota.ErrInvalid", bad, err)
					}
				}
				if err := a.Sync(s.ctx, nil); err != nil {
					t.Errorf("Sync with no observations: %v", err)
				}
				s.req.Cost = 10
				denied, err := s.st.Reserve(s.ctx, &s.req)
				if err != nil || denied.Allowed {
					t.Fatalf("a request of cost 10 after one of 1: (%+v, %v), want denied", denied, err)
				}
				s.req.Cost = 1
				s.sync(denied, quota.Observed{Remaining: 0}) // a denial charged nothing: no-op
				if got := s.admitted(); got != 9 {
					t.Fatalf("after invalid syncs: %d admitted at once, want 9 (nothing changed)", got)
				}
				// A negative figure is zero.
				s2 := newSyncCase(t, newStore, l)
				b := s2.reserve()
				s2.sync(b, quota.Observed{Remaining: -5})
				if got := s2.admitted(); got != 0 {
					t.Errorf("after a sync to -5: %d admitted at once, want 0", got)
				}
			})
			t.Run("later", func(t *testing.T) {
				// A response read after the limit went idle (GCRA) or
				// after its window ended: a GCRA sync still drains,
				// from now; a window's applies to the window charged,
				// which has ended, so nothing changes.
				s := newSyncCase(t, newStore, l)
				a := s.reserve()
				s.clock.Advance(time.Hour)
				s.sync(a, quota.Observed{Remaining: 4})
				want := 4
				if l.Kind == quota.Window {
					want = 10
				}
				if got := s.admitted(); got != want {
					t.Errorf("after a sync to 4 an hour later: %d admitted at once, want %d", got, want)
				}
			})
		})
	}
}

// testSyncRolling: a rolling window is not synced; a Sync of one changes
// nothing and costs no error.
func testSyncRolling(t *testing.T, newStore NewStore) {
	s := newSyncCase(t, newStore, &quota.Limit{Name: "trailing", Kind: quota.Rolling, Rate: 10, Period: time.Hour})
	a := s.reserve()
	s.sync(a, quota.Observed{Remaining: 0})
	if got := s.admitted(); got != 9 {
		t.Errorf("after a sync of a rolling window to 0: %d admitted at once, want the 9 left", got)
	}
}

// syncCase is one store and a one-limit request for testSync.
type syncCase struct {
	t     *testing.T
	ctx   context.Context
	clock *Clock
	st    quota.Store
	req   quota.Request
}

func newSyncCase(t *testing.T, newStore NewStore, l *quota.Limit) *syncCase {
	clock := NewClock(start)
	s := &syncCase{t: t, ctx: context.Background(), clock: clock, st: newStore(t, clock)}
	s.req = quota.Request{Tag: "sync", Items: []quota.Item{{Limit: l, Key: quota.KeyOf(l.Name, "")}}}
	return s
}

// reserve makes one admitted reservation of cost 1.
func (s *syncCase) reserve() *quota.Reservation {
	s.t.Helper()
	r, err := s.st.Reserve(s.ctx, &s.req)
	if err != nil || !r.Allowed || r.Wait != 0 {
		s.t.Fatalf("Reserve: (%+v, %v), want admitted at once", r, err)
	}
	return r
}

// sync syncs item 0 of r with each figure in turn.
func (s *syncCase) sync(r *quota.Reservation, obs ...quota.Observed) {
	s.t.Helper()
	if err := r.Sync(s.ctx, obs); err != nil {
		s.t.Fatalf("Sync(%+v): %v", obs, err)
	}
}

// admitted counts the requests of cost 1 admitted at once, now, until
// the first refusal (at most 100).
func (s *syncCase) admitted() int {
	s.t.Helper()
	for n := 0; n < 100; n++ {
		r, err := s.st.Reserve(s.ctx, &s.req)
		if err != nil {
			s.t.Fatalf("Reserve: %v", err)
		}
		if !r.Allowed {
			return n
		}
	}
	return 100
}
