package proxy

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/fleetquota/throttle"
)

// classes records the class of every decision the transport reports.
type classes struct {
	mu   sync.Mutex
	seen []string
}

func (c *classes) Observe(_ context.Context, e throttle.Event) {
	if e.Kind == throttle.Decided {
		c.mu.Lock()
		c.seen = append(c.seen, e.Class)
		c.mu.Unlock()
	}
}

// TestPriorityHeader: Throttle-Priority names the request's class, which
// the transport decides it under; it is stripped before forwarding; a
// class the provider does not declare, or a bad value, is a 400 and
// sends nothing.
func TestPriorityHeader(t *testing.T) {
	t.Parallel()
	obs := &classes{}
	s := start(t, "    priority: {classes: [interactive, batch], reserve: {interactive: 20%}}\n"+
		"    limits: [{name: peak, limit: 1000/s}]\n"+
		"    routes: [{name: search, path: /search/**, priority: interactive}]\n",
		nil, Options{Throttle: []throttle.Option{throttle.WithObserver(obs)}})
	for _, h := range [][]string{
		{"Throttle-Priority", "interactive"},
		{"Throttle-Priority", " batch "},
		nil,
	} {
		if resp, body := s.do("GET", s.url("/x"), nil, h...); resp.StatusCode != 200 {
			t.Fatalf("%v: %d %s", h, resp.StatusCode, body)
		}
	}
	if resp, body := s.do("GET", s.url("/search/code"), nil); resp.StatusCode != 200 {
		t.Fatalf("route: %d %s", resp.StatusCode, body)
	}
	for _, r := range s.vendorSaw() {
		for name := range r.Header {
			if isThrottleHeader(name) {
				t.Errorf("the vendor got %s", name)
			}
		}
	}
	obs.mu.Lock()
	got := strings.Join(obs.seen, ",")
	obs.mu.Unlock()
	if want := "interactive,batch,batch,interactive"; got != want {
		t.Errorf("classes decided %s, want %s (the header's, the header's, the default, the route's)", got, want)
	}

	for _, h := range [][]string{
		{"Throttle-Priority", "urgent"},
		{"Throttle-Priority", ""},
		{"Throttle-Priority", "batch", "Throttle-Priority", "interactive"},
	} {
		resp, body := s.do("GET", s.url("/x"), nil, h...)
		m := own(t, resp, body, 400, codeBadRequest)
		if h[1] == "urgent" && !strings.Contains(m["message"].(string), "provider vendor has no such priority class (its classes: interactive, batch)") {
			t.Errorf("message %q does not name the classes", m["message"])
		}
	}
	if n := len(s.vendorSaw()); n != 4 {
		t.Errorf("the vendor got %d requests, want the 4 good ones", n)
	}
}

// TestPriorityHeaderWithoutClasses: a provider that declares no classes
// ignores the header, as the library ignores WithPriority.
func TestPriorityHeaderWithoutClasses(t *testing.T) {
	t.Parallel()
	s := start(t, wide, nil, Options{})
	if resp, body := s.do("GET", s.url("/x"), nil, "Throttle-Priority", "anything"); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if r := s.vendorSaw(); len(r) != 1 || r[0].Header.Get("Throttle-Priority") != "" {
		t.Errorf("vendor saw %v", r)
	}
}

// TestPriorityHeaderKeepsTheReserve: through the header, a batch client
// leaves an active interactive client its reserve of a daily quota: its
// request is refused (429) where interactive's still goes.
func TestPriorityHeaderKeepsTheReserve(t *testing.T) {
	t.Parallel()
	s := start(t, "    on_limit: fail\n"+
		"    priority: {classes: [interactive, batch], reserve: {interactive: 50%}}\n"+
		"    limits: [{name: daily, limit: 4/day}]\n", nil, Options{})
	for i, step := range []struct {
		class  string
		status int
	}{
		{"interactive", 200}, // interactive is active: batch leaves it 2 of the 4
		{"batch", 200},
		{"batch", 429},
		{"interactive", 200},
		{"interactive", 200},
		{"interactive", 429}, // the quota is spent
	} {
		resp, body := s.do("GET", s.url("/x"), nil, "Throttle-Priority", step.class)
		if resp.StatusCode != step.status {
			t.Fatalf("step %d (%s): %d %s, want %d", i, step.class, resp.StatusCode, body, step.status)
		}
		if step.status == 429 {
			own(t, resp, body, 429, codeLimited)
		}
	}
}
