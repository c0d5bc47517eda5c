package providers

import (
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/redisstore"
)

const inspectYAML = `
providers:
  tenant:
    hosts: [api.tenant.test]
    keys: per_tenant
    limits:
      - {name: peak, limit: 10/s, scope: business}
    routes:
      - {name: search, path: /search, limits: [{name: search, limit: 2/s, scope: business}]}
  mixed:
    hosts: [api.mixed.test]
    limits:
      - {name: global, limit: 100/s}
      - {name: per, limit: 10/s, scope: "header:X-Account"}
  flat:
    hosts: [api.flat.test]
    limits:
      - {name: global, limit: 100/s}
`

// TestStateKeyAgreesWithResolve checks that StateKey and PauseKey name
// exactly the tags and keys that Resolve gives requests.
func TestStateKeyAgreesWithResolve(t *testing.T) {
	t.Parallel()
	cfg, err := Load("inspect.yaml", []byte(inspectYAML))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url, business, account string
		part                   string // the key part of the scope value
	}{
		{url: "https://api.tenant.test/x", business: "acme", part: "acme"},
		{url: "https://api.tenant.test/search", business: "acme", part: "acme"},
		{url: "https://api.tenant.test/search", business: "a:b{c}", part: quota.SafePart("a:b{c}")},
		{url: "https://api.tenant.test/x"},
		{url: "https://api.mixed.test/x", account: "acct_1", part: "acct_1"},
		{url: "https://api.mixed.test/x"},
		{url: "https://api.flat.test/x", business: "ignored"},
	}
	for _, tc := range tests {
		req := httptest.NewRequest("GET", tc.url, nil)
		if tc.account != "" {
			req.Header.Set("X-Account", tc.account)
		}
		res, ok, err := cfg.Resolve(req, Input{Business: tc.business})
		if !ok || err != nil {
			t.Fatalf("%s: Resolve: ok %v, err %v", tc.url, ok, err)
		}
		p := res.Provider
		lims := p.Limits
		if res.Route != nil {
			lims = append(append([]Limit(nil), lims...), res.Route.Limits...)
		}
		if len(lims) != len(res.Request.Items) {
			t.Fatalf("%s: %d items, want %d", tc.url, len(res.Request.Items), len(lims))
		}
		for i := range lims {
			tag, key := p.StateKey(&lims[i], tc.part)
			if tag != res.Request.Tag || key != res.Request.Items[i].Key {
				t.Errorf("%s: StateKey(%s, %q) = %q, %q; Resolve: %q, %q",
					tc.url, lims[i].Quota.Name, tc.part, tag, key, res.Request.Tag, res.Request.Items[i].Key)
			}
		}
		tag, key := p.PauseKey(tc.part)
		if tag != res.Request.Tag || key != res.Pause {
			t.Errorf("%s: PauseKey(%q) = %q, %q; Resolve: %q, %q", tc.url, tc.part, tag, key, res.Request.Tag, res.Pause)
		}
	}
	for name, want := range map[string]bool{"tenant": true, "mixed": false, "flat": false} {
		p, _ := cfg.Provider(name)
		if s, ok := p.TenantScope(); ok != want || (ok && s.Kind != ScopeBusiness) {
			t.Errorf("%s: TenantScope() = %v, %v; want tenant tags %v", name, s, ok, want)
		}
	}
}

// TestKeyRoundTrip: for every limit and pause of providers with keys per
// tenant and per provider, and any scope value (hostile ones included),
// ParseKey gives back the limit and key part that StateKey and PauseKey
// were given — directly, and through the Redis store's physical layout.
func TestKeyRoundTrip(t *testing.T) {
	t.Parallel()
	cfg, err := Load("inspect.yaml", []byte(inspectYAML+`
  hosts:
    hosts: ["*.hosts.test"]
    keys: per_tenant
    limits:
      - {name: bucket, limit: 2/s burst 40, scope: host}
`))
	if err != nil {
		t.Fatal(err)
	}
	st, err := redisstore.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), redisstore.Options{Prefix: "p:"})
	if err != nil {
		t.Fatal(err)
	}
	hash := "#" + strings.Repeat("a1", 16)
	values := []string{
		"acme", "a:b", "{a}", "}{", "a}:b{c", "!pause", "!pause:x", "pause", "pause:acme", "!cancelled:x",
		hash, hash + ":" + hash, "#x", "core:acme", " padded ", "UPPER.Case.", "\xff\xfe", "a\nb",
		strings.Repeat("x", 64), strings.Repeat("x", 65), strings.Repeat("{", 1<<20),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		b := make([]byte, rng.IntN(80))
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		values = append(values, string(b))
	}
	n := 0
	for _, p := range cfg.Providers() {
		for _, lim := range p.allLimits() {
			for _, v := range values {
				part := lim.Scope.Part(v)
				if lim.Scope.Kind == ScopeProvider {
					part = ""
				}
				tag, key := p.StateKey(lim, part)
				want := Key{Limit: lim, Part: part}
				if got, ok := p.ParseKey(tag, key, false); !ok || got != want {
					t.Fatalf("%s: ParseKey(StateKey(%s, %.40q)) = %+v, %v; want %+v", p.Name, lim.Quota.Name, part, got, ok, want)
				}
				// Through the store's layout: the same tag and key come back.
				rt, rk, kind, ok := st.ParseKey(st.Key(tag, key))
				if !ok || kind != redisstore.KeyItem || rt != tag || rk != key {
					t.Fatalf("%s: the store does not keep tag %q and key %q as they are: %q, %q, %v, %v", p.Name, tag, key, rt, rk, kind, ok)
				}
				if _, ok := p.ParseKey(tag, key, true); ok {
					t.Errorf("%s: item key %q parses as a pause", p.Name, key)
				}
				for _, q := range cfg.Providers() {
					if _, ok := q.ParseKey(tag, key, false); ok && q != p {
						t.Errorf("%s's key %q, %q parses as %s's", p.Name, tag, key, q.Name)
					}
				}
				n++
			}
		}
		ts, tenant := p.TenantScope()
		for _, v := range values {
			part := ts.Part(v)
			if !tenant {
				part = ""
			}
			tag, key := p.PauseKey(part)
			if got, ok := p.ParseKey(tag, key, true); !ok || got != (Key{Part: part}) {
				t.Fatalf("%s: ParseKey(PauseKey(%.40q)) = %+v, %v", p.Name, part, got, ok)
			}
			rt, rk, kind, ok := st.ParseKey(st.PauseKey(tag, key))
			if !ok || kind != redisstore.KeyPause || rt != tag || rk != key {
				t.Fatalf("%s: the store does not keep pause %q, %q as it is", p.Name, tag, key)
			}
		}
	}
	if n < 1000 {
		t.Errorf("only %d keys tried", n)
	}
	// What no configuration makes does not parse.
	tp, _ := cfg.Provider("tenant")
	flat, _ := cfg.Provider("flat")
	for _, tc := range []struct {
		p          *Provider
		tag, key   string
		pause      bool
		whyNotMade string
	}{
		{tp, "tenant", "nosuch:acme", false, "no such limit"},
		{tp, "tenant:bob", "peak:acme", false, "the tag of another tenant"},
		{tp, "tenant", "peak:acme", false, "a tenant's key in the provider's tag"},
		{tp, "tenant:acme", "peak", false, "the shared state in a tenant's tag"},
		{tp, "tenant:acme", "peak:a:b", false, "a part with a colon"},
		{tp, "tenant:acme", "peak:{a}", false, "a part SafePart would have hashed"},
		{tp, "tenant:acme", "pause:acme", false, "a pause as an item"},
		{tp, "tenant:acme", "pause:bob", true, "a pause in another tenant's tag"},
		{flat, "flat:acme", "pause:acme", true, "a tenant pause of a provider with keys per provider"},
		{flat, "flat", "global:acme", false, "a value of a provider-wide limit"},
		{flat, "tenant", "global", false, "another provider's tag"},
		{flat, "flat", "", false, "an empty key"},
	} {
		if k, ok := tc.p.ParseKey(tc.tag, tc.key, tc.pause); ok {
			t.Errorf("%s: ParseKey(%q, %q, %v) = %+v: %s", tc.p.Name, tc.tag, tc.key, tc.pause, k, tc.whyNotMade)
		}
	}
}
