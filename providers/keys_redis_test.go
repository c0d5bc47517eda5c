package providers

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/redisstore"
)

// Configurations of review finding D5: v1 has only a per-tenant limit, v2
// adds a provider-wide one.
const (
	d5v1 = `
providers:
  gh: {hosts: [api.gh.test], on_limit: fail, limits: [{name: core, limit: 5/day, scope: business}]}
`
	d5v2 = `
providers:
  gh: {hosts: [api.gh.test], on_limit: fail, limits: [{name: core, limit: 5/day, scope: business}, {name: global, limit: 1000/s}]}
`
	d5v1Tenant = `
providers:
  gh: {hosts: [api.gh.test], on_limit: fail, keys: per_tenant, limits: [{name: core, limit: 5/day, scope: business}]}
`
)

func mustLoad(t *testing.T, yaml string) *Config {
	t.Helper()
	cfg, err := Load("test.yaml", []byte(yaml), WithLookupEnv(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// admitted sends n requests of business through reg to store and counts
// those admitted.
func admitted(t *testing.T, reg *Registry, store quota.Store, url, business string, n int) int {
	t.Helper()
	got := 0
	for i := 0; i < n; i++ {
		res, ok, err := reg.Resolve(httptest.NewRequest("GET", url, nil), Input{Business: business})
		if !ok || err != nil {
			t.Fatalf("Resolve(%s): %v, %v", url, ok, err)
		}
		rv, err := store.Reserve(context.Background(), &res.Request)
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		if rv.Allowed {
			got++
		}
	}
	return got
}

func newRedisStore(t *testing.T, prefix string) (*redisstore.Store, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	st, err := redisstore.New(srv.Client(t), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st, srv
}

// TestReloadKeepsSpentQuota is review finding D5: a reload that adds a
// provider-wide limit to a provider whose limits were all per tenant used
// to move every tenant's keys from tag gh:acme to gh, so acme, having
// spent its 5/day, got 5 more.
func TestReloadKeepsSpentQuota(t *testing.T) {
	t.Parallel()
	st, _ := newRedisStore(t, "d5:")
	const url = "https://api.gh.test/x"

	reg := NewRegistry(mustLoad(t, d5v1))
	if got := admitted(t, reg, st, url, "acme", 10); got != 5 {
		t.Fatalf("v1: acme sent %d of 10, want 5", got)
	}
	if err := reg.Reload(mustLoad(t, d5v2)); err != nil {
		t.Fatalf("Reload(v2): %v", err)
	}
	if got := admitted(t, reg, st, url, "acme", 10); got != 0 {
		t.Errorf("after the reload acme sent %d more against its 5/day, want 0", got)
	}

	// Keys per tenant, said explicitly: v2 is then refused at load, and a
	// v2 that also drops keys: per_tenant is refused by Reload.
	st2, _ := newRedisStore(t, "d5t:")
	reg = NewRegistry(mustLoad(t, d5v1Tenant))
	if got := admitted(t, reg, st2, url, "acme", 10); got != 5 {
		t.Fatalf("v1 per tenant: acme sent %d of 10, want 5", got)
	}
	v2Tenant := `
providers:
  gh: {hosts: [api.gh.test], on_limit: fail, keys: per_tenant, limits: [{name: core, limit: 5/day, scope: business}, {name: global, limit: 1000/s}]}
`
	if _, err := Load("v2.yaml", []byte(v2Tenant)); !errors.Is(err, ErrConfig) {
		t.Errorf("v2 with keys: per_tenant and a provider-wide limit loads: %v", err)
	}
	err := reg.Reload(mustLoad(t, d5v2))
	if !errors.Is(err, ErrKeysMoved) {
		t.Fatalf("Reload of v2 without keys: per_tenant: %v, want ErrKeysMoved", err)
	}
	if got := admitted(t, reg, st2, url, "acme", 10); got != 0 {
		t.Errorf("after the refused reload acme sent %d more, want 0", got)
	}
	// Accepted on purpose, the keys move: the tag is now the provider's.
	if err := reg.Reload(mustLoad(t, d5v2), AllowMovedKeys()); err != nil {
		t.Fatalf("Reload(v2, AllowMovedKeys): %v", err)
	}
	res, _, _ := reg.Resolve(httptest.NewRequest("GET", url, nil), Input{Business: "acme"})
	if res.Request.Tag != "gh" {
		t.Errorf("after AllowMovedKeys the tag is %q, want gh", res.Request.Tag)
	}
}

// TestKeysOfEarlierVersions checks that the state written in the key
// format of the versions before the keys field (literal keys below) is
// found by this one, for a provider-wide provider and a per-tenant one:
// a running fleet keeps its state across the upgrade.
func TestKeysOfEarlierVersions(t *testing.T) {
	t.Parallel()
	st, srv := newRedisStore(t, "throttle:")
	ctx := context.Background()
	c := srv.Client(t)
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMicro(), 10)
	for _, k := range []string{
		"throttle:{wide}:peak",                   // provider-wide GCRA state
		"throttle:{gh:acme}:core:acme",           // a tenant's state in its tag
		"throttle:{gh:carol}:!pause:pause:carol", // a tenant's pause
	} {
		if err := c.Set(ctx, k, future, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := mustLoad(t, `
providers:
  wide: {hosts: [api.wide.test], on_limit: fail, limits: [{name: peak, limit: 10/min burst 5}]}
  gh: {hosts: [api.gh.test], on_limit: fail, keys: per_tenant, limits: [{name: core, limit: 100/h, scope: business}]}
`)
	reg := NewRegistry(cfg)
	if got := admitted(t, reg, st, "https://api.gh.test/x", "acme", 1); got != 0 {
		t.Errorf("acme's state in {gh:acme} was not found: admitted")
	}
	if got := admitted(t, reg, st, "https://api.gh.test/x", "bob", 1); got != 1 {
		t.Errorf("bob was refused")
	}
	res, _, _ := reg.Resolve(httptest.NewRequest("GET", "https://api.gh.test/x", nil), Input{Business: "carol"})
	if rv, err := st.Reserve(ctx, &res.Request); err != nil || rv.Allowed || rv.Decider != quota.PausedDecider {
		t.Errorf("carol's pause in {gh:carol} was not found: %+v, %v", rv, err)
	}
	res, _, _ = reg.Resolve(httptest.NewRequest("GET", "https://api.wide.test/x", nil), Input{})
	if rv, err := st.Reserve(ctx, &res.Request); err != nil || rv.Allowed || rv.Decider == quota.PausedDecider {
		t.Errorf("wide's state in {wide} was not found: %+v, %v", rv, err)
	}
	// And the tools parse them back to their limit and scope value.
	gh, _ := cfg.Provider("gh")
	for k, want := range map[string]Key{
		"throttle:{gh:acme}:core:acme":           {Limit: &gh.Limits[0], Part: "acme"},
		"throttle:{gh:carol}:!pause:pause:carol": {Part: "carol"},
	} {
		tag, key, kind, ok := st.ParseKey(k)
		if !ok {
			t.Fatalf("redisstore ParseKey(%q) not ok", k)
		}
		got, ok := gh.ParseKey(tag, key, kind == redisstore.KeyPause)
		if !ok || got != want {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v", k, got, ok, want)
		}
	}
}
