package providers

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// priorityYAML is GitHub's app quota with classes: interactive keeps 20%,
// default 10%, batch (the bottom) the rest.
const priorityYAML = `
providers:
  github:
    hosts: [api.github.com]
    priority:
      classes: [interactive, default, batch]
      reserve: {interactive: 20%, default: 10%}
      active_for: 30s
    limits:
      - {name: core, limit: 15000/h}
      - {name: daily, limit: 100000/day, pace: {reserve: 5%}}
      - {name: monthly, limit: 1000000/month, pace: true, reserve: 0%}
      - {name: conc, limit: 100 concurrent, reserve: {interactive: 30%}}
      - {name: learned, limit: 5000/h, learn: true, reserve: 0%}
    sync: {format: x-ratelimit, counters: {core: learned}}
    routes:
      - {name: search, path: /search/**, priority: interactive}
      - {name: export, path: /export/**, default: batch}
  plain:
    hosts: [api.plain.com]
    limits: [{name: peak, limit: 10/s}]
  chosen:
    hosts: [api.chosen.com]
    priority: {classes: [high, low], default: high}
    limits: [{name: daily, limit: 1000/day}]
`

func loadPriority(t *testing.T, src string) *Config {
	t.Helper()
	cfg, err := Load("p.yaml", []byte(src), WithLookupEnv(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestPriorityLoad checks what the priority fields become: the
// provider's classes and default, and each limit's quota fields.
func TestPriorityLoad(t *testing.T) {
	t.Parallel()
	cfg := loadPriority(t, strings.Replace(priorityYAML, "      - {name: export, path: /export/**, default: batch}\n", "", 1))
	gh, _ := cfg.Provider("github")
	pr := gh.Priority
	if pr == nil || !slices.Equal(pr.Classes, []string{"interactive", "default", "batch"}) || pr.Default != 2 ||
		!slices.Equal(pr.Reserve, []int64{2000, 1000}) || pr.ActiveFor != 30*time.Second {
		t.Fatalf("priority = %+v", pr)
	}
	if got := gh.Classes(); !slices.Equal(got, pr.Classes) {
		t.Errorf("Classes() = %v", got)
	}
	for i, want := range []string{"interactive", "default", "batch", "", ""} {
		if got := gh.ClassName(i); got != want {
			t.Errorf("ClassName(%d) = %q, want %q", i, got, want)
		}
	}
	if gh.ClassName(-1) != "" {
		t.Error("ClassName(-1) is not empty")
	}
	byName := map[string]*quota.Limit{}
	for _, l := range gh.Limits {
		byName[l.Quota.Name] = l.Quota
	}
	tests := []struct {
		name        string
		reserve     []int64
		activeFor   time.Duration
		pace        bool
		paceReserve int64
	}{
		{"core", []int64{2000, 1000}, 30 * time.Second, false, 0},
		{"daily", []int64{2000, 1000}, 30 * time.Second, true, 500},
		{"monthly", nil, 0, true, 0},
		{"conc", []int64{3000, 1000}, 30 * time.Second, false, 0},
		{"learned", nil, 0, false, 0},
	}
	for _, tt := range tests {
		q := byName[tt.name]
		if !slices.Equal(q.Reserve, tt.reserve) || (q.Reserve == nil) != (tt.reserve == nil) || q.ActiveFor != tt.activeFor ||
			q.Pace != tt.pace || q.PaceReserve != tt.paceReserve {
			t.Errorf("%s: reserve %v active_for %v pace %v %d; want %v %v %v %d", tt.name, q.Reserve, q.ActiveFor, q.Pace, q.PaceReserve,
				tt.reserve, tt.activeFor, tt.pace, tt.paceReserve)
		}
	}
	if lanes := byName["core"].Lanes(); len(lanes) != 3 || lanes[0].Rate != 3000 || lanes[1].Rate != 1500 || lanes[2].Rate != 10500 {
		t.Errorf("core's lanes = %+v", lanes)
	}
	if r := gh.Routes[0]; r.Priority != "interactive" {
		t.Errorf("route priority = %q", r.Priority)
	}
	if p, _ := cfg.Provider("plain"); p.Priority != nil || p.Classes() != nil || p.ClassName(0) != "" {
		t.Errorf("plain has classes: %+v", p.Priority)
	}
	if p, _ := cfg.Provider("chosen"); p.Priority.Default != 0 || p.Limits[0].Quota.Reserve != nil {
		t.Errorf("chosen: default %d, reserve %v; want 0 and none (no class keeps anything)", p.Priority.Default, p.Limits[0].Quota.Reserve)
	}
}

// TestPriorityRouteField: a route's unknown fields are still refused,
// priority among the valid ones.
func TestPriorityRouteField(t *testing.T) {
	t.Parallel()
	_, err := Load("p.yaml", []byte(priorityYAML), WithLookupEnv(noEnv))
	if err == nil || !strings.Contains(err.Error(), `unknown field "default": valid fields are name, method, path, cost, costs, limits, sync, settle, priority`) {
		t.Errorf("err = %v", err)
	}
}

// TestResolveClass checks the order a request's class is resolved in:
// the request's own, else its route's, else the provider's default; an
// undeclared class is an error naming the provider's classes, and a
// provider without classes ignores the class.
func TestResolveClass(t *testing.T) {
	t.Parallel()
	cfg := loadPriority(t, strings.Replace(priorityYAML, "      - {name: export, path: /export/**, default: batch}\n", "", 1))
	get := func(url string) *http.Request {
		req, _ := http.NewRequest("GET", url, nil)
		return req
	}
	tests := []struct {
		url, class string
		want       int
		wantName   string
	}{
		{"https://api.github.com/user", "", 2, "batch"},                  // the provider's default: the last class
		{"https://api.github.com/user", "interactive", 0, "interactive"}, // the request's own
		{"https://api.github.com/search/code", "", 0, "interactive"},     // the route's default
		{"https://api.github.com/search/code", "batch", 2, "batch"},      // the request's own beats the route's
		{"https://api.github.com/search/code", "default", 1, "default"},
		{"https://api.chosen.com/x", "", 0, "high"}, // a default set by the provider
		{"https://api.chosen.com/x", "low", 1, "low"},
		{"https://api.plain.com/x", "anything", 0, ""}, // no classes: ignored
	}
	for _, tt := range tests {
		res, ok, err := cfg.Resolve(get(tt.url), Input{Priority: tt.class})
		if !ok || err != nil {
			t.Errorf("%s %q: ok %v err %v", tt.url, tt.class, ok, err)
			continue
		}
		if res.Request.Class != tt.want || res.Class() != tt.wantName {
			t.Errorf("%s %q: class %d %q, want %d %q", tt.url, tt.class, res.Request.Class, res.Class(), tt.want, tt.wantName)
		}
		if err := res.Request.Validate(); err != nil {
			t.Errorf("%s %q: the resolved request is invalid: %v", tt.url, tt.class, err)
		}
	}
	res, ok, err := cfg.Resolve(get("https://api.github.com/user"), Input{Priority: "bach"})
	if !ok || res.Provider == nil || !errors.Is(err, ErrUnknownClass) {
		t.Fatalf("unknown class: ok %v provider %v err %v", ok, res.Provider, err)
	}
	if want := `providers: unknown priority class "bach": provider github declares interactive, default, batch`; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
	long := strings.Repeat("x", 300)
	if _, _, err := cfg.Resolve(get("https://api.github.com/user"), Input{Priority: long}); err == nil || len(err.Error()) > 200 {
		t.Errorf("a long unknown class is echoed whole: %v", err)
	}
}

// TestResolveClassAllocs: a class costs a plain request no allocation.
func TestResolveClassAllocs(t *testing.T) {
	cfg := loadPriority(t, strings.Replace(priorityYAML, "      - {name: export, path: /export/**, default: batch}\n", "", 1))
	req, _ := http.NewRequest("GET", "https://api.github.com/user", nil)
	in := Input{Priority: "interactive"}
	if n := testing.AllocsPerRun(100, func() {
		if _, _, err := cfg.Resolve(req, in); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Resolve with a class: %v allocations, want 0", n)
	}
}

// TestChangesPriority checks what validate --against says about a
// change of classes, reserves and pacing.
func TestChangesPriority(t *testing.T) {
	t.Parallel()
	const before = `
providers:
  p:
    hosts: [api.p.com]
    %s
    limits:
      - {name: core, limit: 15000/h}
      - {name: daily, limit: 100000/day%s}
`
	load := func(prio, daily string) *Config {
		return loadPriority(t, strings.Replace(strings.Replace(before, "%s", prio, 1), "%s", daily, 1))
	}
	none := load("", "")
	two := load("priority: {classes: [interactive, batch], reserve: {interactive: 20%}}", "")
	twoMore := load("priority: {classes: [interactive, batch], reserve: {interactive: 30%}}", ", pace: true")
	three := load("priority: {classes: [interactive, default, batch], reserve: {interactive: 20%, default: 5%}}", "")
	kinds := func(cs []Change) (out []string) {
		for _, c := range cs {
			out = append(out, c.Kind.String()+" "+c.Limit)
		}
		return out
	}
	tests := []struct {
		name     string
		old, new *Config
		want     []string
		detail   string // in one of the changes
	}{
		{"classes added", none, two, []string{"priority_changed ", "lanes_changed core", "priority_changed daily"}, "the lanes of the classes above it start full"},
		{"classes removed", two, none, []string{"priority_changed ", "lanes_changed core", "priority_changed daily"}, "is the whole limit's again"},
		{"reserves changed", two, twoMore, []string{"priority_changed core", "priority_changed daily", "priority_changed daily"}, "each lane keeps its state"},
		{"a class added", two, three, []string{"priority_changed ", "lanes_changed core", "priority_changed daily"}, "the number of lanes changes"},
		{"a class removed", three, two, []string{"priority_changed ", "lanes_changed core", "priority_changed daily"}, "a request that names default is refused"},
		{"nothing", two, two, nil, ""},
	}
	for _, tt := range tests {
		cs := Changes(tt.old, tt.new)
		if got := kinds(cs); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
		found := tt.detail == ""
		for _, c := range cs {
			found = found || strings.Contains(c.Detail, tt.detail)
		}
		if !found {
			t.Errorf("%s: no change says %q: %v", tt.name, tt.detail, cs)
		}
	}
	if !LanesChanged.Moves() || PriorityChanged.Moves() {
		t.Error("LanesChanged must move state, PriorityChanged must not")
	}
}
