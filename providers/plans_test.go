package providers

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// plansYAML is the example: acme on 15,000/h, the rest on 5,000/h,
// with a daily window, a provider-wide limit and a route's limit beside.
const plansYAML = `
tenants:
  acme: enterprise
  initech: free
providers:
  gh:
    hosts: [api.gh.test]
    headroom: 90%
    keys: per_provider
    limits:
      - {name: global, limit: 1000/s}
      - {name: core, limit: 5000/h, scope: business}
      - {name: daily, limit: 50000/day resets 09:00 America/New_York, scope: business}
    routes:
      - name: search
        path: /search
        limits: [{name: search, limit: 30/min, scope: business}]
    plans:
      enterprise:
        weight: 3
        limits:
          core: 15000/h burst 1500
          daily: 150000/day
          search: {rate: 90, period: 1m}
      standard: {}
    default_plan: standard
  ai:
    hosts: [api.ai.test]
    limits: [{name: tpm, limit: 1000/min, scope: business}]
    plans:
      free: {limits: {tpm: 100/min}}
  plain:
    hosts: [api.plain.test]
    limits: [{name: rpm, limit: 60/min, scope: business}]
`

func TestPlansLoad(t *testing.T) {
	cfg := mustLoad(t, plansYAML)
	gh, _ := cfg.Provider("gh")
	if got := len(gh.Plans()); got != 2 {
		t.Fatalf("gh has %d plans, want 2", got)
	}
	ent, ok := gh.Plan("enterprise")
	if !ok || ent.Weight != 3 || len(ent.Limits) != 3 {
		t.Fatalf("enterprise = %+v, %v", ent, ok)
	}
	core := ent.Override(&gh.Limits[1])
	// 15000/h burst 1500 at 90%: 13500/h burst 1350; the published figure
	// is the plan's as written.
	if q := core.Quota; q.Kind != quota.GCRA || q.Rate != 13500 || q.Burst != 1350 || q.Period != time.Hour {
		t.Errorf("enterprise core = %+v", q)
	}
	if p := core.Published; p.Rate != 15000 || p.Burst != 1500 {
		t.Errorf("enterprise core published = %+v", p)
	}
	if core.Scope.Kind != ScopeBusiness || core.Quota.Name != "core" {
		t.Errorf("the plan's limit keeps the name and scope: %+v %v", core.Quota.Name, core.Scope)
	}
	// The window keeps its reset and zone: the plan did not restate them.
	daily := ent.Override(&gh.Limits[2]).Quota
	if daily.Rate != 135000 || daily.Calendar.Reset != 9*time.Hour || zoneName(daily.Calendar) != "America/New_York" || daily.Calendar.Unit != quota.Day {
		t.Errorf("enterprise daily = %+v", daily)
	}
	search := ent.Override(&gh.Routes[0].Limits[0]).Quota
	if search.Rate != 81 || search.Period != time.Minute {
		t.Errorf("enterprise search = %+v", search)
	}
	// Limits a plan does not change, and a nil plan, leave the limit as
	// written.
	if got := ent.Override(&gh.Limits[0]); got != &gh.Limits[0] {
		t.Errorf("Override(global) = %p, want the provider's %p", got, &gh.Limits[0])
	}
	if got := (*Plan)(nil).Override(&gh.Limits[1]); got != &gh.Limits[1] {
		t.Errorf("nil plan changed a limit")
	}
	if def := gh.DefaultPlan(); def == nil || def.Name != "standard" || def.Weight != 1 || len(def.Limits) != 0 {
		t.Errorf("default plan = %+v", def)
	}
	ai, _ := cfg.Provider("ai")
	if ai.DefaultPlan() != nil {
		t.Errorf("ai has no default_plan, got %v", ai.DefaultPlan())
	}
	plain, _ := cfg.Provider("plain")
	if plain.Plans() != nil || plain.DefaultPlan() != nil {
		t.Errorf("plain has no plans")
	}
	if got := cfg.Tenants(); len(got) != 2 || got["acme"] != "enterprise" || got["initech"] != "free" {
		t.Errorf("Tenants() = %v", got)
	}
	if got := strings.Join(cfg.PlanNames(), ","); got != "enterprise,free,standard" {
		t.Errorf("PlanNames() = %s", got)
	}
}

func TestPlanFor(t *testing.T) {
	cfg := mustLoad(t, plansYAML)
	gh, _ := cfg.Provider("gh")
	ai, _ := cfg.Provider("ai")
	plain, _ := cfg.Provider("plain")
	db := map[string]string{"acme": "standard", "hooli": "enterprise", "wonka": "gold", "umbrella": "free"}
	lookup := func(b string) string { return db[b] }
	for _, c := range []struct {
		p        *Provider
		business string
		planOf   func(string) string
		want     string // "" = the limits as written
		src      PlanSource
		unknown  bool
	}{
		{gh, "acme", nil, "enterprise", PlanFromTenants, false},
		{gh, "globex", nil, "standard", PlanDefault, false},
		{gh, "", nil, "standard", PlanDefault, false},
		{gh, "acme", lookup, "standard", PlanFromFunc, false},    // the func wins
		{gh, "hooli", lookup, "enterprise", PlanFromFunc, false}, // not in the map
		{gh, "initech", lookup, "standard", PlanDefault, false},  // the func does not know; the map's plan is ai's
		{gh, "umbrella", lookup, "standard", PlanDefault, false}, // another provider's plan
		{gh, "wonka", lookup, "standard", PlanFromFunc, true},    // nobody's plan
		{ai, "initech", nil, "free", PlanFromTenants, false},
		{ai, "acme", nil, "", PlanDefault, false}, // gh's plan; ai has no default
		{ai, "wonka", lookup, "", PlanFromFunc, true},
		{plain, "wonka", lookup, "", PlanNone, false}, // no plans: never asked
	} {
		pl, src, err := cfg.PlanFor(c.p, c.business, c.planOf)
		got := ""
		if pl != nil {
			got = pl.Name
		}
		if got != c.want || src != c.src || errors.Is(err, ErrUnknownPlan) != c.unknown {
			t.Errorf("PlanFor(%s, %q) = %q, %v, %v; want %q, %v, unknown %v", c.p.Name, c.business, got, src, err, c.want, c.src, c.unknown)
		}
	}
	_, _, err := cfg.PlanFor(gh, "wonka", lookup)
	for _, want := range []string{`unknown plan "gold"`, `business "wonka"`, "provider gh", "enterprise, free, standard"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	// The func is asked only for a provider with plans and a business.
	asked := 0
	count := func(string) string { asked++; return "" }
	for _, c := range []struct {
		p *Provider
		b string
	}{{plain, "acme"}, {gh, ""}} {
		if _, _, err := cfg.PlanFor(c.p, c.b, count); err != nil {
			t.Fatal(err)
		}
	}
	if asked != 0 {
		t.Errorf("PlanOf was asked %d times, want 0", asked)
	}
}

// TestResolvePlans checks that a plan changes a request's figures and
// nothing else: the keys, the tag and the pauses are the tenant's, on any
// plan.
func TestResolvePlans(t *testing.T) {
	cfg := mustLoad(t, plansYAML)
	reg := NewRegistry(cfg)
	plan := map[string]string{}
	in := Input{Business: "acme", PlanOf: func(b string) string { return plan[b] }}
	resolve := func(url string) Resolution {
		t.Helper()
		res, ok, err := reg.Resolve(httptest.NewRequest("GET", url, nil), in)
		if !ok || err != nil {
			t.Fatalf("Resolve(%s) = %v, %v", url, ok, err)
		}
		return res
	}
	ent := resolve("https://api.gh.test/search") // acme: enterprise, from the tenants map
	plan["acme"] = "standard"
	std := resolve("https://api.gh.test/search")
	if ent.Plan == nil || ent.Plan.Name != "enterprise" || std.Plan == nil || std.Plan.Name != "standard" {
		t.Fatalf("plans %v, %v", ent.Plan, std.Plan)
	}
	if ent.Request.Tag != std.Request.Tag || len(ent.Request.Items) != len(std.Request.Items) ||
		strings.Join(ent.Request.Pauses, ",") != strings.Join(std.Request.Pauses, ",") {
		t.Fatalf("a plan change moved the request: %+v, %+v", ent.Request, std.Request)
	}
	want := map[string][2]int64{"global": {900, 900}, "core": {13500, 4500}, "daily": {135000, 45000}, "search": {81, 27}}
	for i, it := range ent.Request.Items {
		if it.Key != std.Request.Items[i].Key {
			t.Errorf("item %d: key %q on enterprise, %q on standard", i, it.Key, std.Request.Items[i].Key)
		}
		w := want[it.Limit.Name]
		if it.Limit.Rate != w[0] || std.Request.Items[i].Limit.Rate != w[1] {
			t.Errorf("%s: rate %d on enterprise, %d on standard; want %v", it.Limit.Name, it.Limit.Rate, std.Request.Items[i].Limit.Rate, w)
		}
	}
	// The same plan resolves to the same *quota.Limit every time: the
	// Redis store caches its arguments by pointer.
	if again := resolve("https://api.gh.test/search"); again.Request.Items[1].Limit != std.Request.Items[1].Limit {
		t.Errorf("a plan's limit is built per request")
	}
	// An unknown plan refuses the request, naming the provider.
	plan["acme"] = "gold"
	_, ok, err := reg.Resolve(httptest.NewRequest("GET", "https://api.gh.test/x", nil), in)
	if !ok || !errors.Is(err, ErrUnknownPlan) {
		t.Errorf("Resolve with an unknown plan = %v, %v; want ErrUnknownPlan", ok, err)
	}
	// A provider without plans never asks.
	in.PlanOf = func(string) string { t.Error("PlanOf called for a provider without plans"); return "" }
	if _, _, err := reg.Resolve(httptest.NewRequest("GET", "https://api.plain.test/x", nil), in); err != nil {
		t.Error(err)
	}
}

// TestResolvePlansAllocs keeps a plan's cost off the hot path: resolving
// a request costs the same allocations with plans as without.
func TestResolvePlansAllocs(t *testing.T) {
	with := NewRegistry(mustLoad(t, plansYAML))
	req := httptest.NewRequest("GET", "https://api.gh.test/x", nil)
	in := Input{Business: "acme", PlanOf: func(string) string { return "enterprise" }}
	allocs := func(reg *Registry, in Input) float64 {
		return testing.AllocsPerRun(200, func() {
			if _, _, err := reg.Resolve(req, in); err != nil {
				t.Fatal(err)
			}
		})
	}
	plain := NewRegistry(mustLoad(t, `
providers:
  gh:
    hosts: [api.gh.test]
    headroom: 90%
    limits:
      - {name: global, limit: 1000/s}
      - {name: core, limit: 5000/h, scope: business}
      - {name: daily, limit: 50000/day resets 09:00 America/New_York, scope: business}
`))
	base := allocs(plain, Input{Business: "acme"})
	if got := allocs(plain, in); got != base {
		t.Errorf("a PlanOf costs a provider without plans %v allocations, want %v", got, base)
	}
	if got := allocs(with, in); got != base {
		t.Errorf("a provider with plans costs %v allocations per resolution, want %v as without", got, base)
	}
}

// FuzzResolvePlan resolves hostile business values and plan names: no
// panic, an error only for a plan no provider defines, and an error that
// repeats a bounded part of them.
func FuzzResolvePlan(f *testing.F) {
	for _, s := range []string{"acme", "", strings.Repeat("é", 100), "\x00\xff{}:#\n", "enterprise"} {
		f.Add(s, "enterprise")
		f.Add(s, s)
	}
	cfg, err := Load("plans.yaml", []byte(plansYAML), WithLookupEnv(noEnv))
	if err != nil {
		f.Fatal(err)
	}
	reg := NewRegistry(cfg)
	req := httptest.NewRequest("GET", "https://api.gh.test/search", nil)
	f.Fuzz(func(t *testing.T, business, plan string) {
		res, ok, err := reg.Resolve(req, Input{Business: business, PlanOf: func(string) string { return plan }})
		if !ok {
			t.Fatal("not matched")
		}
		known := plan == "" || plan == "enterprise" || plan == "standard" || plan == "free"
		if business == "" || known {
			if err != nil {
				t.Fatalf("business %q, plan %q: %v", business, plan, err)
			}
			if res.Plan == nil || len(res.Request.Items) != 4 {
				t.Fatalf("business %q, plan %q: %+v", business, plan, res)
			}
			return
		}
		if !errors.Is(err, ErrUnknownPlan) {
			t.Fatalf("business %q, plan %q: %v, want ErrUnknownPlan", business, plan, err)
		}
		if n := len(err.Error()); n > 600 {
			t.Fatalf("an error of %d bytes", n)
		}
	})
}

// TestCatalogGitHubEnterprise: the catalog puts a business on GitHub
// Enterprise Cloud (15,000/h per token) on its enterprise plan, three
// times core, headroom applied; every other business gets core as
// written. GITHUB_CORE_ENTERPRISE changes it.
func TestCatalogGitHubEnterprise(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env         map[string]string
		rate, burst int64
	}{
		{nil, 12825, 1425},
		{map[string]string{"GITHUB_CORE_ENTERPRISE": "27000/h burst 3000"}, 25650, 2850},
	} {
		cfg, err := LoadCatalog(env(c.env))
		if err != nil {
			t.Fatal(err)
		}
		gh, _ := cfg.Provider("github")
		ent, ok := gh.Plan("enterprise")
		if !ok || gh.DefaultPlan() != nil {
			t.Fatalf("github plans: %v, default %v", gh.Plans(), gh.DefaultPlan())
		}
		if q := ent.Override(&gh.Limits[0]).Quota; q.Name != "core" || q.Rate != c.rate || q.Burst != c.burst || q.Period != time.Hour {
			t.Errorf("%v: enterprise core = %d/%v burst %d, want %d/h burst %d", c.env, q.Rate, q.Period, q.Burst, c.rate, c.burst)
		}
	}
}
