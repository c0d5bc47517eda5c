package quotatest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// templates are the limits random stacks are drawn from: bursts of 1 and
// more, intervals that do not divide evenly, and windows of every unit
// (in zones with and without daylight saving).
func templates() []*quota.Limit {
	return []*quota.Limit{
		gcra("peak", 10, time.Second, 0),
		gcra("one", 1, time.Second, 1),
		gcra("thirds", 3, 10*time.Second, 2),
		gcra("minute", 30, time.Minute, 5),
		window("hourly", 12, quota.Hour, 15*time.Minute, time.UTC),
		window("daily", 40, quota.Day, 0, la),
		window("monthly", 60, quota.Month, 9*time.Hour, la),
	}
}

// Differential draws random stacks and a random sequence of reserves,
// cancels, pauses and clock steps from seed, runs it on a fresh store from
// each factory and on the Model, and fails at the first decision on which
// any of them disagree.
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
	tags := []string{"p", "q"}
	for n := 0; n < steps; n++ {
		where := fmt.Sprintf("seed %d step %d at %v", seed, n, clock.Now())
		switch op := rng.IntN(20); {
		case op < 3:
			clock.Advance(time.Duration(rng.Int64N(int64(2 * time.Second))))
		case op == 3:
			clock.Advance(time.Duration(rng.Int64N(int64(3 * time.Hour))))
		case op == 4 && len(reservations) > 0:
			h := reservations[rng.IntN(len(reservations))]
			model.Cancel(h.model, clock.Now())
			for i, r := range h.store {
				if err := r.Cancel(ctx); err != nil {
					t.Fatalf("%s: store %d Cancel: %v", where, i, err)
				}
			}
		case op == 5:
			tag, d := tags[rng.IntN(2)], time.Duration(rng.Int64N(int64(3*time.Second)))
			model.Pause(tag, "pause", d, clock.Now())
			for i, st := range stores {
				if err := st.Pause(ctx, tag, "pause", d); err != nil {
					t.Fatalf("%s: store %d Pause: %v", where, i, err)
				}
			}
		default:
			req := quota.Request{Tag: tags[rng.IntN(2)], Pauses: []string{"pause"}}
			capacity := int64(1 << 30)
			for _, i := range rng.Perm(len(lims))[:1+rng.IntN(3)] {
				it := quota.Item{Limit: lims[i], Key: lims[i].Name}
				if rng.IntN(3) == 0 { // a cost of its own
					it.Cost = 1 + rng.Int64N(min(lims[i].Capacity(), 4))
				} else {
					capacity = min(capacity, lims[i].Capacity())
				}
				req.Items = append(req.Items, it)
			}
			req.Cost = 1 + rng.Int64N(min(capacity, 3))
			waits := []time.Duration{0, 0, 300 * time.Millisecond, 2 * time.Second, 2 * time.Hour}
			req.MaxWait = waits[rng.IntN(len(waits))]
			want := model.Reserve(req, clock.Now())
			h := held{model: &want}
			for i, st := range stores {
				got, err := st.Reserve(ctx, &req)
				if err != nil {
					t.Fatalf("%s: store %d Reserve: %v", where, i, err)
				}
				if msg := compare(got, &want); msg != "" {
					t.Fatalf("%s: store %d and the model disagree on %s: %s", where, i, describe(&req), msg)
				}
				h.store = append(h.store, got)
			}
			if want.Allowed && want.Wait > 0 {
				reservations = append(reservations, h)
			}
		}
	}
}

func compare(got *quota.Reservation, want *ModelReservation) string {
	if got.Allowed != want.Allowed {
		return fmt.Sprintf("allowed %v, model %v (model retry %v, store retry %v)", got.Allowed, want.Allowed, want.RetryAfter, got.RetryAfter)
	}
	if got.Wait != want.Wait {
		return fmt.Sprintf("wait %v, model %v", got.Wait, want.Wait)
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
	s := fmt.Sprintf("tag %s cost %d max wait %v [", req.Tag, req.Cost, req.MaxWait)
	for i, it := range req.Items {
		if i > 0 {
			s += " "
		}
		s += it.Limit.Name
	}
	return s + "]"
}
