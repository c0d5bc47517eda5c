package providers

import (
	"net/http/httptest"
	"testing"

	"github.com/fleetquota/throttle/quota"
)

const inspectYAML = `
providers:
  tenant:
    hosts: [api.tenant.test]
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
