package proxy

import (
	"testing"
)

// TestPlansThroughTheProxy: the proxy takes the tenant from
// Throttle-Business as ever, and its plan from the configuration (the
// tenants map), never from the client: acme on enterprise (6/min) and
// globex on the default plan (3/min) each get their own figures, end to
// end, and a client cannot name a plan.
func TestPlansThroughTheProxy(t *testing.T) {
	t.Parallel()
	s := start(t, `    on_limit: fail
    limits: [{name: per-tenant, limit: 3/min, scope: business}]
    plans:
      enterprise: {limits: {per-tenant: 6/min}}
      standard: {}
    default_plan: standard
tenants: {acme: enterprise}
`, nil, Options{})
	sent := func(business string, n int) int {
		t.Helper()
		ok := 0
		for i := 0; i < n; i++ {
			resp, body := s.do("GET", s.url("/x"), nil, headerBusiness, business)
			switch resp.StatusCode {
			case 200:
				ok++
			case 429:
				if m := own(t, resp, body, 429, codeLimited); m["limit"] != "per-tenant" || m["scope"] != business {
					t.Errorf("refusal of %s: %s", business, body)
				}
			default:
				t.Fatalf("%s: %d %s", business, resp.StatusCode, body)
			}
		}
		return ok
	}
	if got := sent("acme", 8); got != 6 {
		t.Errorf("acme (enterprise, 6/min) sent %d of 8, want 6", got)
	}
	if got := sent("globex", 8); got != 3 {
		t.Errorf("globex (standard, 3/min) sent %d of 8, want 3", got)
	}
	if n := len(s.vendorSaw()); n != 9 {
		t.Errorf("the vendor saw %d requests, want 9", n)
	}
	resp, body := s.do("GET", s.url("/x"), nil, headerBusiness, "globex", "Throttle-Plan", "enterprise")
	own(t, resp, body, 400, codeBadRequest)
}
