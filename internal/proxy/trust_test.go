package proxy

import (
	"strings"
	"testing"
)

// admitted sends n GETs to path with the headers and returns how many the
// vendor saw.
func (s *setup) admitted(n int, path string, header ...string) int {
	s.t.Helper()
	before := len(s.vendorSaw())
	for range n {
		resp, body := s.do("GET", s.url(path), nil, header...)
		if resp.StatusCode != 200 && resp.StatusCode != 429 {
			s.t.Fatalf("GET %s %q: %d %s", path, header, resp.StatusCode, body)
		}
	}
	return len(s.vendorSaw()) - before
}

const priced = `    on_limit: fail
    limits: [{name: daily, limit: 10/day}, {name: hourly, limit: 1000/hour}]
    routes:
      - {name: search, path: /search, cost: 5}
      - {name: export, path: /export, costs: {daily: 5}}
`

// A header cannot lower a cost the configuration sets (a route's cost or
// costs entry): the quota of 10 admits two requests of cost 5 whatever
// the client claims.
func TestHeadersCannotLowerConfiguredCosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path   string
		header []string
	}{
		{"/search", []string{headerCost, "1"}},
		{"/search", []string{headerLimitCost, "daily=1"}},
		{"/export", []string{headerLimitCost, "daily=1"}},
		{"/export", []string{headerCost, "1"}},
	} {
		s := start(t, priced, nil, Options{})
		if got := s.admitted(4, tc.path, tc.header...); got != 2 {
			t.Errorf("%s with %q: vendor saw %d of 4, want 2 (the configured cost 5 counts)", tc.path, tc.header, got)
		}
	}
}

// A header may raise a configured cost, and with LowerCosts lower it.
func TestHeadersRaiseCostsAndLowerThemWhenAllowed(t *testing.T) {
	t.Parallel()
	s := start(t, priced, nil, Options{})
	if got := s.admitted(3, "/search", headerCost, "10"); got != 1 {
		t.Errorf("cost raised to 10: vendor saw %d of 3, want 1", got)
	}
	s = start(t, priced, nil, Options{LowerCosts: true})
	if got := s.admitted(12, "/export", headerLimitCost, "daily=1"); got != 10 {
		t.Errorf("LowerCosts, daily=1: vendor saw %d of 12, want 10", got)
	}
}

// A limit name that is not in the request's stack is a 400 naming the
// stack's limits: a misspelt name would otherwise count nothing.
func TestUnknownLimitCostNameIs400(t *testing.T) {
	t.Parallel()
	s := start(t, priced, nil, Options{})
	resp, body := s.do("GET", s.url("/search"), nil, headerLimitCost, "daly=6")
	m := own(t, resp, body, 400, codeBadRequest)
	if msg, _ := m["message"].(string); !strings.Contains(msg, `no limit "daly"`) || !strings.Contains(msg, "daily, hourly") {
		t.Errorf("message %q: want the unknown name and the stack's limits", msg)
	}
	if n := len(s.vendorSaw()); n != 0 {
		t.Errorf("vendor saw %d requests, want none", n)
	}
}

// With Business set, every request counts for that business: made-up
// Throttle-Business values neither pass a per-business limit nor are
// accepted.
func TestBusinessBoundToTheProxy(t *testing.T) {
	t.Parallel()
	const perTenant = "    on_limit: fail\n    limits: [{name: tenant, limit: 2/min, scope: business}]\n"
	s := start(t, perTenant, nil, Options{Business: "acme"})
	if got := s.admitted(3, "/x"); got != 2 {
		t.Errorf("no header: vendor saw %d of 3, want 2 (acme's 2/min)", got)
	}
	if got := s.admitted(1, "/x", headerBusiness, "acme"); got != 0 {
		t.Errorf("Throttle-Business acme: vendor saw %d, want 0 (acme's minute is spent)", got)
	}
	for _, made := range []string{"tenant-1", "tenant-2"} {
		resp, body := s.do("GET", s.url("/x"), nil, headerBusiness, made)
		m := own(t, resp, body, 400, codeBadRequest)
		if msg, _ := m["message"].(string); !strings.Contains(msg, `business "acme"`) {
			t.Errorf("message %q: want the bound business", msg)
		}
	}
	if n := len(s.vendorSaw()); n != 2 {
		t.Errorf("vendor saw %d requests in all, want 2", n)
	}
}
