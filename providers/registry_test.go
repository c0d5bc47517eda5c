package providers

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

const registryYAML = `
providers:
  wide:
    hosts: [api.wide.example, "*.wide.example", "api.wide.example:8443"]
    limits:
      - {name: peak, limit: 100/s}
      - {name: daily, limit: 250000/day resets 00:00 America/Los_Angeles}
    routes:
      - name: search
        method: GET
        path: /search/*
        limits: [{name: search, limit: 30/min}]
      - name: writes
        method: [POST, PATCH]
        path: /repos/{owner}/**
        cost: 5
  port:
    hosts: ["api.wide.example:9000", "*.deep.wide.example"]
    on_limit: fail
    limits: [{name: peak, limit: 10/s}]
  tenant:
    hosts: [api.tenant.example]
    keys: per_tenant
    max_wait: 3s
    limits:
      - {name: per-biz, limit: 10/s, scope: business}
      - {name: daily, limit: 1000/day, scope: business}
    routes:
      - name: search
        path: /search
        limits: [{name: search, limit: 1/s, scope: business}]
  mixed:
    hosts: [api.mixed.example]
    limits:
      - {name: global, limit: 100/s}
      - {name: account, limit: 10/s, scope: "header:Stripe-Account"}
      - {name: batch, limit: 6/s, scope: "label:class", only: [batch], missing: skip}
      - {name: strict, limit: 5/s, scope: business, missing: refuse}
  store:
    hosts: ["*.store.example"]
    keys: per_tenant
    limits: [{name: bucket, limit: 2/s burst 40, scope: host}]
  skip:
    hosts: [api.skip.example]
    limits: [{name: per-biz, limit: 10/s, scope: business, missing: skip}]
`

func newTestRegistry(t testing.TB) *Registry {
	t.Helper()
	cfg, err := Load("registry.yaml", []byte(registryYAML), WithLookupEnv(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	return NewRegistry(cfg)
}

func newRequest(t testing.TB, method, url string, header ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

// stack renders a request as "tag | key key ... | pause | cost".
func stack(r quota.Request, pause string) string {
	keys := make([]string, len(r.Items))
	for i, it := range r.Items {
		keys[i] = it.Key
	}
	return fmt.Sprintf("%s | %s | %s | %d", r.Tag, strings.Join(keys, " "), pause, r.Cost)
}

func TestResolve(t *testing.T) {
	t.Parallel()
	reg := newTestRegistry(t)
	long := strings.Repeat("x", 100)
	tests := []struct {
		name     string
		method   string
		url      string
		header   []string
		in       Input
		provider string // "" = no match
		route    string
		want     string // stack(); "" = don't check
		err      error
	}{
		{name: "exact host", url: "https://api.wide.example/v1/x", provider: "wide",
			want: "wide | peak daily | pause | 1"},
		{name: "host case and dot", url: "https://API.Wide.Example./v1/x", provider: "wide"},
		{name: "explicit default port", url: "https://api.wide.example:443/", provider: "wide"},
		{name: "port pattern", url: "https://api.wide.example:9000/", provider: "port"},
		{name: "other port", url: "https://api.wide.example:9001/", provider: "wide"},
		{name: "wildcard", url: "https://eu.wide.example/", provider: "wide"},
		{name: "wildcard deep", url: "https://a.b.wide.example/", provider: "wide"},
		{name: "longest wildcard wins", url: "https://x.deep.wide.example/", provider: "port"},
		{name: "wildcard not apex", url: "https://wide.example/"},
		{name: "unknown host", url: "https://example.org/"},
		{name: "suffix is not a label", url: "https://evilwide.example/"},
		{name: "route", method: "GET", url: "https://api.wide.example/search/code?q=x", provider: "wide", route: "search",
			want: "wide | peak daily search | pause | 1"},
		{name: "route trailing slash", method: "GET", url: "https://api.wide.example/search/code/", provider: "wide", route: "search"},
		{name: "route method mismatch", method: "POST", url: "https://api.wide.example/search/code", provider: "wide", route: ""},
		{name: "route too deep", method: "GET", url: "https://api.wide.example/search/code/x", provider: "wide", route: ""},
		{name: "route rest", method: "PATCH", url: "https://api.wide.example/repos/me/x/issues/1", provider: "wide", route: "writes",
			want: "wide | peak daily | pause | 5"},
		{name: "route rest empty", method: "POST", url: "https://api.wide.example/repos/me", provider: "wide", route: "writes"},
		{name: "cost override", url: "https://api.wide.example/", in: Input{Cost: 7}, provider: "wide",
			want: "wide | peak daily | pause | 7"},
		{name: "cost too big", url: "https://api.wide.example/", in: Input{Cost: 101}, provider: "wide", err: quota.ErrInvalid},
		{name: "cost negative", url: "https://api.wide.example/", in: Input{Cost: -1}, provider: "wide", err: quota.ErrInvalid},
		{name: "tenant tag", url: "https://api.tenant.example/x", in: Input{Business: "acme"}, provider: "tenant",
			want: "tenant:acme | per-biz:acme daily:acme | pause:acme | 1"},
		{name: "tenant route", url: "https://api.tenant.example/search", in: Input{Business: "acme"}, provider: "tenant", route: "search",
			want: "tenant:acme | per-biz:acme daily:acme search:acme | pause:acme | 1"},
		{name: "tenant missing shares", url: "https://api.tenant.example/x", provider: "tenant",
			want: "tenant | per-biz daily | pause | 1"},
		{name: "tenant unsafe value", url: "https://api.tenant.example/x", in: Input{Business: "a}b:{c"}, provider: "tenant",
			want: "tenant:" + quota.SafePart("a}b:{c") + " | " + quota.KeyOf("per-biz", "a}b:{c") + " " + quota.KeyOf("daily", "a}b:{c") +
				" | " + quota.KeyOf("pause", "a}b:{c") + " | 1"},
		{name: "tenant long value", url: "https://api.tenant.example/x", in: Input{Business: long}, provider: "tenant",
			want: "tenant:" + quota.SafePart(long) + " | " + quota.KeyOf("per-biz", long) + " " + quota.KeyOf("daily", long) +
				" | " + quota.KeyOf("pause", long) + " | 1"},
		{name: "mixed scopes", url: "https://api.mixed.example/", header: []string{"stripe-account", "acct_1"},
			in: Input{Business: "acme", Labels: map[string]string{"class": "batch"}}, provider: "mixed",
			want: "mixed | global account:acct_1 batch:batch strict:acme | pause | 1"},
		{name: "mixed shared and skipped", url: "https://api.mixed.example/", in: Input{Business: "acme", Labels: map[string]string{"class": "interactive"}},
			provider: "mixed", want: "mixed | global account strict:acme | pause | 1"},
		{name: "refuse", url: "https://api.mixed.example/", provider: "mixed", err: ErrMissingScope},
		{name: "host scope", url: "https://Shop-1.store.example/admin", provider: "store",
			want: "store:shop-1.store.example | bucket:shop-1.store.example | pause:shop-1.store.example | 1"},
		{name: "skip all", url: "https://api.skip.example/", provider: "skip", want: "skip |  | pause | 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			method := tt.method
			if method == "" {
				method = "GET"
			}
			res, ok, err := reg.Resolve(newRequest(t, method, tt.url, tt.header...), tt.in)
			if tt.provider == "" {
				if ok || res.Provider != nil || err != nil {
					t.Fatalf("Resolve = %v, %v, %v; want no provider", res.Provider, ok, err)
				}
				return
			}
			if !ok || res.Provider == nil || res.Provider.Name != tt.provider {
				t.Fatalf("Resolve ok=%v provider=%v; want %s", ok, res.Provider, tt.provider)
			}
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotRoute := ""
			if res.Route != nil {
				gotRoute = res.Route.Name
			}
			if gotRoute != tt.route {
				t.Errorf("route = %q, want %q", gotRoute, tt.route)
			}
			if tt.want != "" {
				if got := stack(res.Request, res.Pause); got != tt.want {
					t.Errorf("stack = %q\n        want %q", got, tt.want)
				}
			}
			// A request reads its own scope's pause and, with keys per
			// tenant, the provider's pause of every tenant: among its own
			// without a tenant value, as its Over pause with one.
			wantPauses, wantOver := []string{res.Pause}, quota.PauseKey{}
			if p := res.Provider; p.Keys == PerTenant && res.Request.Tag == p.Name {
				wantPauses = append(wantPauses, "pause:all")
			} else if p.Keys == PerTenant {
				wantOver = quota.PauseKey{Tag: p.Name, Key: "pause:all"}
			}
			if !slices.Equal(res.Request.Pauses, wantPauses) || res.Request.Over != wantOver {
				t.Errorf("Pauses = %q, Over = %+v, Pause = %q; want %q, %+v", res.Request.Pauses, res.Request.Over, res.Pause, wantPauses, wantOver)
			}
			if len(res.Request.Items) > 0 {
				if err := res.Request.Validate(); err != nil {
					t.Errorf("Validate: %v", err)
				}
			}
		})
	}
}

func TestResolveMaxWait(t *testing.T) {
	t.Parallel()
	reg := newTestRegistry(t)
	one := time.Second
	neg := -time.Second
	tests := []struct {
		url  string
		in   Input
		want time.Duration
	}{
		{"https://api.wide.example/", Input{}, DefaultMaxWait},
		{"https://api.tenant.example/", Input{}, 3 * time.Second},
		{"https://api.wide.example:9000/", Input{}, 0}, // on_limit: fail
		{"https://api.wide.example:9000/", Input{MaxWait: &one}, one},
		{"https://api.wide.example/", Input{MaxWait: &neg}, 0},
	}
	for _, tt := range tests {
		res, ok, err := reg.Resolve(newRequest(t, "GET", tt.url), tt.in)
		if !ok || err != nil || res.Request.MaxWait != tt.want {
			t.Errorf("%s %+v: MaxWait = %v (%v, %v), want %v", tt.url, tt.in, res.Request.MaxWait, ok, err, tt.want)
		}
	}
}

func TestResolveEdges(t *testing.T) {
	t.Parallel()
	reg := newTestRegistry(t)
	// A request without URL host uses Host.
	req := newRequest(t, "GET", "/x")
	req.Host = "api.wide.example"
	if res, ok, _ := reg.Resolve(req, Input{}); !ok || res.Provider.Name != "wide" {
		t.Errorf("Host only: %v %v", ok, res.Provider)
	}
	if _, ok, err := reg.Resolve(nil, Input{}); ok || err != nil {
		t.Errorf("nil request: %v %v", ok, err)
	}
	if _, ok, err := NewRegistry(nil).Resolve(req, Input{}); ok || err != nil {
		t.Errorf("empty registry: %v %v", ok, err)
	}
	req = newRequest(t, "GET", "https://"+strings.Repeat("a.", 200)+"wide.example/")
	if _, ok, _ := reg.Resolve(req, Input{}); ok {
		t.Errorf("over-long host matched")
	}
	if err := reg.Reload(nil); err == nil {
		t.Errorf("Reload(nil) = nil")
	}
}

// TestReload resolves from many goroutines while the configuration is
// swapped: every resolution sees one configuration or the other, whole.
func TestReload(t *testing.T) {
	t.Parallel()
	a, err := Load("a.yaml", []byte("providers:\n  p:\n    hosts: [api.p.example]\n    limits: [{name: a, limit: 1/s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load("b.yaml", []byte("providers:\n  p:\n    hosts: [api.p.example]\n    limits: [{name: b, limit: 2/s}, {name: b2, limit: 2/s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry(a)
	req := newRequest(t, "GET", "https://api.p.example/")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, ok, err := reg.Resolve(req, Input{})
				if !ok || err != nil {
					t.Errorf("Resolve: %v %v", ok, err)
					return
				}
				switch n := len(res.Request.Items); {
				case n == 1 && res.Request.Items[0].Key == "a":
				case n == 2 && res.Request.Items[0].Key == "b" && res.Request.Items[1].Key == "b2":
				default:
					t.Errorf("mixed configuration: %s", stack(res.Request, res.Pause))
					return
				}
			}
		}()
	}
	for i := 0; i < 200; i++ {
		cfg := a
		if i%2 == 0 {
			cfg = b
		}
		if err := reg.Reload(cfg); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

func TestReloadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := dir + "/good.yaml"
	bad := dir + "/bad.yaml"
	writeFile(t, good, "providers:\n  p:\n    hosts: [api.p.example]\n    limits: [{name: a, limit: 1/s}]\n")
	writeFile(t, bad, "providers:\n  p:\n    hosts: [api.p.example]\n    limits: [{name: a, limit: 0/s}, {name: b, rate: x}]\n")
	reg := NewRegistry(nil)
	if err := reg.ReloadFile(good); err != nil {
		t.Fatal(err)
	}
	old := reg.config()
	err := reg.ReloadFile(bad)
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) < 2 {
		t.Fatalf("ReloadFile(bad) = %v; want every problem", err)
	}
	if reg.config() != old {
		t.Errorf("a bad reload replaced the configuration")
	}
}
