package providers

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
	"github.com/fleetquota/throttle/quota/redisstore"
)

// planChangeYAML has one GCRA limit and one calendar window, each on two
// plans: 15,000 and 5,000.
const planChangeYAML = `
providers:
  hourly:
    hosts: [api.hourly.test]
    on_limit: fail
    limits: [{name: core, limit: 5000/h, scope: business}]
    plans:
      enterprise: {limits: {core: 15000/h}}
      standard: {}
    default_plan: standard
  daily:
    hosts: [api.daily.test]
    on_limit: fail
    limits: [{name: quota, limit: 5000/day, scope: business}]
    plans:
      enterprise: {limits: {quota: 15000/day}}
      standard: {}
    default_plan: standard
`

// TestPlanChangeMidWindow moves a tenant from 15,000 to 5,000 with 9,000
// spent, and back, on both stores, at one instant of a stepped clock: the
// key stays the tenant's, and the store decides its state at the new
// figures. A window counts events, so 9,000 of a 5,000 quota refuses
// until the window ends (the downgrade clamps). A GCRA limit's state is
// time booked ahead, which the new figures read as the same share of the
// bucket spent: 9,000 of 15,000/h is 36 minutes of the hour's tolerance,
// 60%, which at 5,000/h leaves 2,000 (docs/decisions.md, "Plans").
func TestPlanChangeMidWindow(t *testing.T) {
	// 10:00 UTC: the day's window has 14 hours left.
	start := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	stores := map[string]func(t *testing.T, clock quota.Clock) quota.Store{
		"memory": func(t *testing.T, clock quota.Clock) quota.Store {
			return quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
		},
		"redis": func(t *testing.T, clock quota.Clock) quota.Store {
			srv := redistest.Start(t)
			st, err := redisstore.New(srv.Client(t), redisstore.Options{Prefix: "plans:", Timeout: 5 * time.Second, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := quotatest.NewClock(start)
			store := open(t, clock)
			reg := NewRegistry(mustLoad(t, planChangeYAML))
			plan := "enterprise"
			reserve := func(host string, cost int64) *quota.Reservation {
				t.Helper()
				in := Input{Business: "acme", Cost: cost, PlanOf: func(string) string { return plan }}
				res, ok, err := reg.Resolve(httptest.NewRequest("GET", "https://"+host+"/x", nil), in)
				if !ok || err != nil {
					t.Fatalf("Resolve: %v, %v", ok, err)
				}
				if res.Plan == nil || res.Plan.Name != plan {
					t.Fatalf("plan %v, want %s", res.Plan, plan)
				}
				rv, err := store.Reserve(context.Background(), &res.Request)
				if err != nil {
					t.Fatalf("Reserve: %v", err)
				}
				return rv
			}
			for _, host := range []string{"api.hourly.test", "api.daily.test"} {
				if rv := reserve(host, 9000); !rv.Allowed || rv.Limits[0].Remaining != 6000 {
					t.Fatalf("%s: 9,000 on enterprise: allowed %v, remaining %d; want 6,000 left", host, rv.Allowed, rv.Limits[0].Remaining)
				}
			}

			plan = "standard" // the downgrade
			rv := reserve("api.daily.test", 1)
			if rv.Allowed || rv.Limits[0].Remaining != 0 || rv.RetryAfter != 14*time.Hour {
				t.Errorf("daily after the downgrade: allowed %v, remaining %d, retry after %v; want refused until the window ends in 14h",
					rv.Allowed, rv.Limits[0].Remaining, rv.RetryAfter)
			}
			if rv := reserve("api.hourly.test", 2000); !rv.Allowed || rv.Limits[0].Remaining != 0 {
				t.Errorf("hourly after the downgrade: 2,000 allowed %v, remaining %d; want allowed, 0 left", rv.Allowed, rv.Limits[0].Remaining)
			}
			// The bucket is full at the new rate: the next event waits one
			// interval of 5,000/h.
			if rv := reserve("api.hourly.test", 1); rv.Allowed || rv.RetryAfter != 720*time.Millisecond {
				t.Errorf("hourly, full at 5,000/h: allowed %v, retry after %v; want refused for 720ms", rv.Allowed, rv.RetryAfter)
			}

			plan = "enterprise" // and back: 9,000 of 15,000 counted
			if rv := reserve("api.daily.test", 6000); !rv.Allowed || rv.Limits[0].Remaining != 0 {
				t.Errorf("daily back on enterprise: 6,000 allowed %v, remaining %d; want allowed, 0 left", rv.Allowed, rv.Limits[0].Remaining)
			}
			// An hour booked at 5,000/h is the whole tolerance of 15,000/h.
			if rv := reserve("api.hourly.test", 1); rv.Allowed || rv.RetryAfter != 240*time.Millisecond {
				t.Errorf("hourly back on enterprise: allowed %v, retry after %v; want refused for one 240ms interval", rv.Allowed, rv.RetryAfter)
			}
			clock.Advance(time.Minute) // 250 intervals of 15,000/h
			if rv := reserve("api.hourly.test", 250); !rv.Allowed {
				t.Errorf("hourly a minute later: 250 refused, retry after %v", rv.RetryAfter)
			}
		})
	}
}
