package throttle_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// plansYAML puts acme on 15/min through the tenants map, every other
// business on 5/min; plain has no plans.
const plansYAML = `
tenants: {acme: enterprise}
providers:
  gh:
    hosts: [api.gh.test]
    on_limit: fail
    limits: [{name: core, limit: 5/min, scope: business}]
    plans:
      enterprise: {limits: {core: 15/min}, weight: 3}
      standard: {}
    default_plan: standard
  plain:
    hosts: [api.plain.test]
    on_limit: fail
    limits: [{name: core, limit: 5/min, scope: business}]
`

// admitted sends n requests of business to url and counts those sent; a
// refusal other than ErrLimited fails the test.
func (f *fixture) admitted(url, business string, n int) int {
	f.t.Helper()
	ctx := throttle.WithBusiness(context.Background(), business)
	sent := 0
	for i := 0; i < n; i++ {
		_, err := f.do(ctx, "GET", url)
		switch {
		case err == nil:
			sent++
		case !errors.Is(err, throttle.ErrLimited):
			f.t.Fatalf("%s for %s: %v", url, business, err)
		}
	}
	return sent
}

// planFunc is a WithPlans function over a map that counts its calls.
type planFunc struct {
	mu    sync.Mutex
	plans map[string]string
	calls map[string]int
}

func newPlanFunc(plans map[string]string) *planFunc {
	return &planFunc{plans: plans, calls: map[string]int{}}
}

func (p *planFunc) planOf(business string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[business]++
	return p.plans[business]
}

func (p *planFunc) set(business, plan string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plans[business] = plan
}

func (p *planFunc) called(business string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[business]
}

func TestPlansFromTheTenantsMap(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plansYAML)
	if got := f.admitted("https://api.gh.test/x", "acme", 20); got != 15 {
		t.Errorf("acme (enterprise) sent %d of 20, want 15", got)
	}
	if got := f.admitted("https://api.gh.test/x", "globex", 20); got != 5 {
		t.Errorf("globex (default plan) sent %d of 20, want 5", got)
	}
	if got := f.admitted("https://api.plain.test/x", "acme", 20); got != 5 {
		t.Errorf("acme on a provider without plans sent %d of 20, want 5", got)
	}
}

// TestPlansFromAFunc resolves plans through WithPlans, cached for the TTL
// on the transport's clock: a change is seen after it, and the tenant's
// state carries over (no key moved).
func TestPlansFromAFunc(t *testing.T) {
	t.Parallel()
	db := newPlanFunc(map[string]string{"globex": "enterprise"})
	f := newFixture(t, plansYAML, throttle.WithPlans(db.planOf), throttle.WithPlanCache(time.Minute, 100))
	const url = "https://api.gh.test/x"
	if got := f.admitted(url, "globex", 10); got != 10 {
		t.Errorf("globex (enterprise, from the func) sent %d of 10, want 10", got)
	}
	if n := db.called("globex"); n != 1 {
		t.Errorf("the func was asked %d times for globex within the TTL, want 1", n)
	}
	// "" from the func: the tenants map, then the default plan.
	if got := f.admitted(url, "acme", 20); got != 15 {
		t.Errorf("acme (enterprise, from the map) sent %d of 20, want 15", got)
	}
	if got := f.admitted(url, "initech", 20); got != 5 {
		t.Errorf("initech (default plan) sent %d of 20, want 5", got)
	}
	// A provider without plans never asks.
	f.admitted("https://api.plain.test/x", "hooli", 1)
	if n := db.called("hooli"); n != 0 {
		t.Errorf("the func was asked %d times for a provider without plans", n)
	}

	// The downgrade: still enterprise until the TTL runs out. 10 of 15
	// spent, and 30s give back 7.5 of them: 12 left.
	db.set("globex", "standard")
	f.clock.Advance(30 * time.Second)
	if got := f.admitted(url, "globex", 20); got != 12 {
		t.Errorf("globex within the TTL sent %d of 20, want 12 (still enterprise)", got)
	}
	// After the TTL the plan is standard, read against the same state:
	// the bucket, empty 30s ago, is half full again, which at 5/min is
	// 2.5 events.
	f.clock.Advance(30*time.Second + time.Millisecond)
	if got := f.admitted(url, "globex", 10); got != 2 {
		t.Errorf("globex on standard after the TTL sent %d of 10, want 2", got)
	}
	if n := db.called("globex"); n != 2 {
		t.Errorf("the func was asked %d times for globex across one expiry, want 2", n)
	}
}

func TestPlansUnknownPlanFailsClosed(t *testing.T) {
	t.Parallel()
	db := newPlanFunc(map[string]string{"acme": "platinum"})
	f := newFixture(t, plansYAML, throttle.WithPlans(db.planOf))
	ctx := throttle.WithBusiness(context.Background(), "acme")
	_, err := f.do(ctx, "GET", "https://api.gh.test/x")
	if !errors.Is(err, providers.ErrUnknownPlan) || errors.Is(err, throttle.ErrLimited) {
		t.Fatalf("err = %v, want providers.ErrUnknownPlan", err)
	}
	for _, want := range []string{"throttle: gh:", `"platinum"`, `"acme"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
	if n := f.mock.GetTotalCallCount(); n != 0 {
		t.Errorf("%d requests sent with an unknown plan", n)
	}
}

func TestPlansOptions(t *testing.T) {
	t.Parallel()
	for _, opt := range []throttle.Option{
		throttle.WithPlans(nil),
		throttle.WithPlanCache(0, 10),
		throttle.WithPlanCache(time.Second, 0),
		throttle.WithPlanCache(-time.Second, 10),
	} {
		if _, err := throttle.New(opt); err == nil {
			t.Errorf("New accepted a bad plans option")
		}
	}
	// A cache without a func does nothing.
	tr, err := throttle.New(throttle.WithPlanCache(time.Second, 10))
	if err != nil || throttle.PlanCacheLen(tr) != 0 {
		t.Errorf("WithPlanCache alone: %v", err)
	}
}

// TestPlansLookupOncePerBusiness sends many requests of a business at
// once while its first lookup is slow: the func is asked once, and none
// of them goes on before the answer.
func TestPlansLookupOncePerBusiness(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var calls atomic.Int32
	slow := func(string) string {
		calls.Add(1)
		<-release
		return "enterprise"
	}
	f := newFixture(t, plansYAML, throttle.WithPlans(slow))
	ctx := throttle.WithBusiness(context.Background(), "globex")
	var wg sync.WaitGroup
	var sent atomic.Int32
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.do(ctx, "GET", "https://api.gh.test/x"); err == nil {
				sent.Add(1)
			}
		}()
	}
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // the others queue behind the lookup
	if n := f.mock.GetTotalCallCount(); n != 0 {
		t.Errorf("%d requests went before their plan was known", n)
	}
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("the func was asked %d times, want 1", n)
	}
	if n := sent.Load(); n != 15 {
		t.Errorf("sent %d of 20 on enterprise (15/min), want 15", n)
	}
}

// TestPlansLookupPanics: a func that panics fails its own request (the
// panic is the caller's), and the requests waiting on it look again
// instead of hanging.
func TestPlansLookupPanics(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	f := newFixture(t, plansYAML, throttle.WithPlans(func(string) string {
		if calls.Add(1) == 1 {
			close(started)
			<-release
			panic("database gone")
		}
		return "enterprise"
	}))
	ctx := throttle.WithBusiness(context.Background(), "globex")
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		f.do(ctx, "GET", "https://api.gh.test/x")
	}()
	<-started
	waiter := make(chan error, 1)
	go func() {
		_, err := f.do(ctx, "GET", "https://api.gh.test/x")
		waiter <- err
	}()
	time.Sleep(10 * time.Millisecond) // the waiter queues behind the lookup
	close(release)
	if r := <-panicked; r == nil {
		t.Errorf("the panic was swallowed")
	}
	if err := <-waiter; err != nil {
		t.Errorf("the request waiting on a panicked lookup: %v", err)
	}
	if _, err := f.do(ctx, "GET", "https://api.gh.test/x"); err != nil {
		t.Errorf("after the panic: %v", err)
	}
}

// TestPlansCacheIsBounded floods the cache with more businesses than it
// holds.
func TestPlansCacheIsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plansYAML, throttle.WithPlans(func(string) string { return "" }), throttle.WithPlanCache(time.Hour, 64))
	for i := 0; i < 2000; i++ {
		f.do(throttle.WithBusiness(context.Background(), strings.Repeat("x", i%300)+string(rune('a'+i%26))), "GET", "https://api.gh.test/x")
	}
	if n := throttle.PlanCacheLen(f.rt); n > 64 || n == 0 {
		t.Errorf("the cache holds %d businesses, want 1 to 64", n)
	}
}

// TestPlansHotPathAllocs: with WithPlans, a request costs the allocations
// it costs without, to a provider with plans (a cached plan) or without.
func TestPlansHotPathAllocs(t *testing.T) {
	const yaml = `
providers:
  gh:
    hosts: [api.gh.test]
    limits: [{name: core, limit: 1000000/s burst 1000000000000, scope: business}]
    plans:
      enterprise: {limits: {core: 900000/s burst 1000000000000}}
  plain:
    hosts: [api.plain.test]
    limits: [{name: core, limit: 1000000/s burst 1000000000000, scope: business}]
`
	cfg, err := providers.Load("allocs.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	base := nopTransport{&http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}}
	allocs := func(url string, opts ...throttle.Option) float64 {
		rt, err := throttle.New(append(opts, throttle.WithRegistry(providers.NewRegistry(cfg)), throttle.WithBase(base))...)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(throttle.WithBusiness(context.Background(), "acme"), "GET", url, nil)
		rt.RoundTrip(req) // the plan's lookup, once
		return testing.AllocsPerRun(200, func() {
			if _, err := rt.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
		})
	}
	plans := throttle.WithPlans(func(string) string { return "enterprise" })
	want := allocs("https://api.plain.test/x")
	for _, c := range []struct {
		name string
		got  float64
	}{
		{"no plans, WithPlans", allocs("https://api.plain.test/x", plans)},
		{"plans, no WithPlans", allocs("https://api.gh.test/x")},
		{"plans, WithPlans", allocs("https://api.gh.test/x", plans)},
	} {
		if c.got != want {
			t.Errorf("%s: %v allocations per request, want %v as without plans", c.name, c.got, want)
		}
	}
}

// FuzzPlanOf sends hostile business values through the plan lookup: no
// panic, the func sees the value as given, and the cache stays bounded.
func FuzzPlanOf(f *testing.F) {
	for _, s := range []string{"acme", "", strings.Repeat("a", 65), "\x00\xff{}:#", "ACME", "#0123456789abcdef0123456789abcdef"} {
		f.Add(s, "enterprise")
	}
	f.Fuzz(func(t *testing.T, business, plan string) {
		seen := ""
		db := func(b string) string { seen = b; return plan }
		tr := newFixture(t, plansYAML, throttle.WithPlans(db), throttle.WithPlanCache(time.Minute, 4)).rt
		known := plan == "" || plan == "enterprise" || plan == "standard"
		for i := 0; i < 3; i++ {
			b := business + strings.Repeat("!", i)
			seen = ""
			req, _ := http.NewRequestWithContext(throttle.WithBusiness(context.Background(), b), "GET", "https://api.gh.test/x", nil)
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			if b == "" {
				if seen != "" || err != nil {
					t.Fatalf("no business: the func saw %q, err %v", seen, err)
				}
				continue
			}
			if seen != b {
				t.Fatalf("the func saw %q, want %q", seen, b)
			}
			if err != nil && !errors.Is(err, throttle.ErrLimited) && (known || !errors.Is(err, providers.ErrUnknownPlan)) {
				t.Fatalf("business %q, plan %q: %v", b, plan, err)
			}
			if !known && err == nil {
				t.Fatalf("plan %q accepted", plan)
			}
		}
		if n := throttle.PlanCacheLen(tr); n > 4 {
			t.Fatalf("the cache holds %d, want at most 4", n)
		}
	})
}

// TestPlansHashedBusinessesDoNotCollide: a long business is cached under
// its hash, and a business that is that hash, literally, is another
// business: it does not get the first one's plan.
func TestPlansHashedBusinessesDoNotCollide(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("enterprise-customer-", 5)
	db := newPlanFunc(map[string]string{long: "enterprise"})
	f := newFixture(t, plansYAML, throttle.WithPlans(db.planOf))
	if got := f.admitted("https://api.gh.test/x", long, 20); got != 15 {
		t.Errorf("the long business (enterprise) sent %d of 20, want 15", got)
	}
	hash := quota.SafePart(long)
	if got := f.admitted("https://api.gh.test/x", hash, 20); got != 5 {
		t.Errorf("a business named %s sent %d of 20, want 5 (the default plan)", hash, got)
	}
	if db.called(hash) != 1 || db.called(long) != 1 {
		t.Errorf("lookups: %d of the hash, %d of the long business; want 1 each", db.called(hash), db.called(long))
	}
}
