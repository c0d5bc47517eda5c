package providers_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

func TestRouteCosts(t *testing.T) {
	t.Parallel()
	cfg, err := providers.Load("costs.yaml", []byte(`
providers:
  gh:
    hosts: [api.gh.test]
    limits:
      - {name: core, limit: 4500/h burst 500}
      - {name: points, limit: 810/min burst 90, scope: business}
    routes:
      - name: writes
        method: POST
        path: /**
        costs: {points: 5}
`))
	if err != nil {
		t.Fatal(err)
	}
	costs := func(method string, in providers.Input) []int64 {
		req, _ := http.NewRequest(method, "https://api.gh.test/repos/a/b/issues", nil)
		res, ok, err := cfg.Resolve(req, in)
		if !ok || err != nil {
			t.Fatalf("Resolve %s: ok=%v err=%v", method, ok, err)
		}
		var out []int64
		for i := range res.Request.Items {
			out = append(out, res.Request.CostOf(i))
		}
		return out
	}
	if got := costs("POST", providers.Input{Business: "acme"}); got[0] != 1 || got[1] != 5 {
		t.Errorf("a write: costs %v, want core 1 and points 5", got)
	}
	if got := costs("GET", providers.Input{Business: "acme"}); got[0] != 1 || got[1] != 1 {
		t.Errorf("a read: costs %v, want 1 and 1", got)
	}
	// Input.Costs overrides by name; the shared plan is not changed by it.
	if got := costs("GET", providers.Input{Costs: map[string]int64{"core": 3}}); got[0] != 3 || got[1] != 1 {
		t.Errorf("Input.Costs core=3: costs %v, want 3 and 1", got)
	}
	if got := costs("GET", providers.Input{}); got[0] != 1 {
		t.Errorf("after an override: costs %v, want the plan's 1 again", got)
	}
	req, _ := http.NewRequest("GET", "https://api.gh.test/x", nil)
	if _, _, err := cfg.Resolve(req, providers.Input{Costs: map[string]int64{"core": 600}}); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("a cost above core's capacity: %v, want quota.ErrInvalid", err)
	}

	for _, tc := range []struct{ yaml, want string }{
		{"costs: {nope: 5}", `costs.yaml:10:17: providers.gh.routes[0].costs.nope: no limit "nope"`},
		{"costs: {points: 0}", "providers.gh.routes[0].costs.points"},
		{"costs: {points: 500}", "below the cost 500 of route writes (its costs entry)"},
		{"costs: [points]", "want a map from limit names to costs"},
	} {
		_, err := providers.Load("costs.yaml", []byte(`
providers:
  gh:
    hosts: [api.gh.test]
    limits:
      - {name: points, limit: 810/min burst 90}
    routes:
      - name: writes
        path: /**
        `+tc.yaml+`
`))
		if !errors.Is(err, providers.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an ErrConfig containing %q", tc.yaml, err, tc.want)
		}
	}
}

// Scope.Part makes of a typed value the key part Resolve makes of the same
// value in a request.
func TestScopePartMatchesResolve(t *testing.T) {
	t.Parallel()
	cfg, err := providers.Load("part.yaml", []byte(`
providers:
  shop:
    hosts: ["*.shop.test"]
    limits: [{name: rest, limit: 2/s burst 40, scope: host}]
  pay:
    hosts: [api.pay.test]
    limits: [{name: global, limit: 100/s, scope: "header:Stripe-Account"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ url, header, typed string }{
		{"https://Store-9.SHOP.test./x", "", "Store-9.SHOP.test."},
		{"https://api.pay.test/x", "  acct_1 ", " acct_1"},
		{"https://api.pay.test/x", "a b{c}", "a b{c}"},
	} {
		req, _ := http.NewRequest("GET", tc.url, nil)
		if tc.header != "" {
			req.Header.Set("Stripe-Account", tc.header)
		}
		res, ok, err := cfg.Resolve(req, providers.Input{})
		if !ok || err != nil || len(res.Request.Items) != 1 {
			t.Fatalf("Resolve %s: %v %v", tc.url, ok, err)
		}
		lim := &res.Provider.Limits[0]
		_, key := res.Provider.StateKey(lim, lim.Scope.Part(tc.typed))
		if key != res.Request.Items[0].Key {
			t.Errorf("%q typed: key %q, Resolve made %q", tc.typed, key, res.Request.Items[0].Key)
		}
	}
}
