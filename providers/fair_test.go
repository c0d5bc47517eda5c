package providers

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// fairYAML has a fair limit per way of naming the tenant: ai's requests
// per minute and tokens per minute (a route's) are shared by business,
// with plans giving weights; zd's account-wide limit by the label team;
// plain has no fair limit.
const fairYAML = `
tenants:
  acme: enterprise
  initech: standard
providers:
  ai:
    hosts: [api.ai.test]
    limits:
      - {name: rpm, limit: 500/min, fair: tenant}
      - {name: daily, limit: 100000/day, scope: business}
    routes:
      - name: chat
        path: /chat
        limits: [{name: tpm, limit: 30000/min, fair: tenant}]
    plans:
      enterprise: {weight: 4, limits: {daily: 500000/day}}
      standard: {}
      heavy: {weight: 1000}
    default_plan: standard
  zd:
    hosts: [api.zd.test]
    priority: {classes: [interactive, batch], reserve: {interactive: 20%}}
    limits:
      - {name: account, limit: 700/min, fair: "label:team", reserve: 0%}
      - {name: hourly, quota: 10000, per: hour}
  plain:
    hosts: [api.plain.test]
    limits: [{name: rpm, limit: 60/min}]
`

func TestFairLoad(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, fairYAML)
	ai, _ := cfg.Provider("ai")
	rpm, tpm := &ai.Limits[0], &ai.Routes[0].Limits[0]
	if rpm.Fair == nil || rpm.Fair.String() != "tenant" || !rpm.Quota.Fair || tpm.Fair == nil || !tpm.Quota.Fair {
		t.Errorf("ai: rpm fair %v (quota %v), tpm fair %v", rpm.Fair, rpm.Quota.Fair, tpm.Fair)
	}
	if daily := &ai.Limits[1]; daily.Fair != nil || daily.Quota.Fair {
		t.Errorf("daily is not fair: %v", daily.Fair)
	}
	zd, _ := cfg.Provider("zd")
	if a := &zd.Limits[0]; a.Fair == nil || a.Fair.String() != "label:team" || !a.Quota.Fair || a.Quota.Reserve != nil {
		t.Errorf("zd account: fair %v, reserve %v", a.Fair, a.Quota.Reserve)
	}
	if h := zd.Limits[1].Quota; h.Reserve == nil {
		t.Errorf("zd hourly keeps the provider's reserve, got none")
	}
	if err := rpm.Quota.Validate(); err != nil {
		t.Errorf("the fair limit does not validate: %v", err)
	}
}

// TestFairResolve checks the Share a request of each kind gets: its
// tenant's key part and weight.
func TestFairResolve(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, fairYAML)
	planOf := func(b string) string {
		if b == "big" {
			return "heavy"
		}
		return ""
	}
	long := strings.Repeat("x", 200)
	for _, c := range []struct {
		name string
		url  string
		in   Input
		want quota.Share
	}{
		{"a business on the default plan", "https://api.ai.test/x", Input{Business: "globex"}, quota.Share{Key: "globex", Weight: 1}},
		{"a business on a weighted plan", "https://api.ai.test/x", Input{Business: "acme"}, quota.Share{Key: "acme", Weight: 4}},
		{"the plan from PlanOf", "https://api.ai.test/x", Input{Business: "big", PlanOf: planOf}, quota.Share{Key: "big", Weight: 1000}},
		{"a route's fair limit", "https://api.ai.test/chat", Input{Business: "acme"}, quota.Share{Key: "acme", Weight: 4}},
		{"no business: the tenant \"\"", "https://api.ai.test/x", Input{}, quota.Share{Weight: 1}},
		{"an unsafe business is hashed", "https://api.ai.test/x", Input{Business: "a b{c}"}, quota.Share{Key: quota.SafePart("a b{c}"), Weight: 1}},
		{"a long business is hashed", "https://api.ai.test/x", Input{Business: long}, quota.Share{Key: quota.SafePart(long), Weight: 1}},
		{"a label", "https://api.zd.test/x", Input{Business: "acme", Labels: map[string]string{"team": "billing"}}, quota.Share{Key: "billing", Weight: 1}},
		{"no label: the tenant \"\"", "https://api.zd.test/x", Input{Business: "acme", Labels: map[string]string{"other": "x"}}, quota.Share{Weight: 1}},
		{"no fair limit", "https://api.plain.test/x", Input{Business: "acme"}, quota.Share{}},
	} {
		res, ok, err := cfg.Resolve(httptest.NewRequest("GET", c.url, nil), c.in)
		if !ok || err != nil {
			t.Fatalf("%s: Resolve = %v, %v", c.name, ok, err)
		}
		if res.Request.Share != c.want {
			t.Errorf("%s: Share = %+v, want %+v", c.name, res.Request.Share, c.want)
		}
		if res.Request.Appointment {
			t.Errorf("%s: a resolution is never an appointment", c.name)
		}
		if err := res.Request.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestFairDecides runs resolved requests through the memory store: a
// tenant over its share is deferred to appointments in its lane, and
// another tenant's first request comes before the last of them, within
// the bound of package quota's "Fair share": the horizon H (one interval
// of the limit, 1s) and its own lane's interval (T*W/w = 2s).
func TestFairDecides(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, `
providers:
  v: {hosts: [api.v.test], limits: [{name: rpm, limit: 60/min burst 2, fair: tenant}]}
`)
	clock := quotatest.NewClock(time.Unix(1_700_000_000, 0))
	store := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
	reg := NewRegistry(cfg)
	maxWait := time.Minute
	decide := func(business string) *quota.Reservation {
		t.Helper()
		res, _, err := reg.Resolve(httptest.NewRequest("GET", "https://api.v.test/x", nil), Input{Business: business, MaxWait: &maxWait})
		if err != nil {
			t.Fatal(err)
		}
		rv, err := store.Reserve(context.Background(), &res.Request)
		if err != nil {
			t.Fatal(err)
		}
		return rv
	}
	var deferred int
	var last time.Duration // the heavy tenant's last appointment
	for i := 0; i < 6; i++ {
		switch rv := decide("heavy"); {
		case rv.Deferred:
			deferred++
			last = rv.RetryAfter
		case !rv.Allowed:
			t.Fatalf("heavy request %d refused: %+v", i, rv.Result)
		}
	}
	if deferred == 0 {
		t.Fatalf("6 requests of one tenant at a burst of 2: none deferred")
	}
	rv := decide("light")
	wait := rv.Wait
	if rv.Deferred {
		wait = rv.RetryAfter
	}
	if !rv.Allowed && !rv.Deferred || wait > 3*time.Second || wait >= last {
		t.Errorf("the light tenant's first request behind %d deferred ones (the last at %v): %+v, want a wait of at most 3s, before %v", deferred, last, rv.Result, last)
	}
}

func TestFairChanges(t *testing.T) {
	t.Parallel()
	old := mustLoad(t, `
providers:
  v: {hosts: [api.v.test], limits: [{name: a, limit: 60/min}, {name: b, limit: 60/min, fair: tenant}, {name: c, limit: 60/min, fair: tenant}]}
`)
	cur := mustLoad(t, `
providers:
  v: {hosts: [api.v.test], limits: [{name: a, limit: 60/min, fair: tenant}, {name: b, limit: 60/min}, {name: c, limit: 60/min, fair: tenant}]}
`)
	var got []string
	for _, c := range Changes(old, cur) {
		if c.Kind.Moves() {
			t.Errorf("%s moves state", c)
		}
		got = append(got, c.Limit+" "+c.Kind.String())
	}
	if strings.Join(got, ",") != "a fair_changed,b fair_changed" {
		t.Errorf("changes = %v, want a and b fair_changed", got)
	}
}

// TestFairResolveAllocs: naming the tenant costs a provider-wide stack
// no allocation (a safe business is its own key part), and a plan's
// weight none either.
func TestFairResolveAllocs(t *testing.T) {
	reg := NewRegistry(mustLoad(t, fairYAML))
	for _, c := range []struct {
		url string
		in  Input
		max float64
	}{
		{"https://api.zd.test/x", Input{Labels: map[string]string{"team": "billing"}}, 0},
		{"https://api.ai.test/chat", Input{Business: "acme"}, 2}, // daily is per business: its key
	} {
		req := newRequest(t, "GET", c.url)
		if got := testing.AllocsPerRun(100, func() { reg.Resolve(req, c.in) }); got > c.max {
			t.Errorf("%s: %v allocations, want at most %v", c.url, got, c.max)
		}
	}
}
