package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
)

const priorityYAML = `
providers:
  classed:
    hosts: [api.classed.test]
    on_limit: fail
    priority:
      classes: [interactive, default, batch]
      reserve: {interactive: 20%, default: 10%}
    limits:
      - {name: hourly, limit: 15000/h}
      - {name: conc, limit: 10 concurrent}
    routes:
      - {name: search, path: /search/**, priority: interactive}
  plain:
    hosts: [api.plain.test]
    limits: [{name: peak, limit: 100/s}]
`

// TestWithPriority checks the class every event of a request carries:
// the context's, else the route's, else the provider's default (the last
// class); none for a provider without classes.
func TestWithPriority(t *testing.T) {
	t.Parallel()
	f := newFixture(t, priorityYAML)
	tests := []struct {
		class, url, want string
	}{
		{"", "https://api.classed.test/repos", "batch"},
		{"interactive", "https://api.classed.test/repos", "interactive"},
		{"", "https://api.classed.test/search/code", "interactive"},
		{"default", "https://api.classed.test/search/code", "default"},
		{"interactive", "https://api.plain.test/x", ""},
	}
	for _, tt := range tests {
		before := len(f.obs.snapshot())
		ctx := context.Background()
		if tt.class != "" {
			ctx = throttle.WithPriority(ctx, tt.class)
		}
		if _, err := f.do(ctx, "GET", tt.url); err != nil {
			t.Fatalf("%s %q: %v", tt.url, tt.class, err)
		}
		events := f.obs.snapshot()[before:]
		var kinds []throttle.EventKind
		for _, e := range events {
			kinds = append(kinds, e.Kind)
			if e.Class != tt.want {
				t.Errorf("%s %q: %v event of class %q, want %q", tt.url, tt.class, e.Kind, e.Class, tt.want)
			}
		}
		if len(events) == 0 || events[0].Kind != throttle.Decided {
			t.Errorf("%s %q: events %v, want a decision first", tt.url, tt.class, kinds)
		}
	}
	// Leases are taken and given back under the request's class too.
	var leased, released bool
	for _, e := range f.obs.snapshot() {
		leased = leased || e.Kind == throttle.Leased && e.Class == "interactive"
		released = released || e.Kind == throttle.Released && e.Class == "interactive"
	}
	if !leased || !released {
		t.Errorf("no Leased and Released events of class interactive: %+v", f.obs.snapshot())
	}
}

// TestWithPriorityUnknownClass: a class the provider does not declare is
// refused before anything is sent, with an error that names the
// provider's classes.
func TestWithPriorityUnknownClass(t *testing.T) {
	t.Parallel()
	f := newFixture(t, priorityYAML)
	ctx := throttle.WithPriority(context.Background(), "urgent")
	resp, err := f.do(ctx, "GET", "https://api.classed.test/repos")
	if resp != nil || !errors.Is(err, throttle.ErrUnknownClass) || !errors.Is(err, providers.ErrUnknownClass) {
		t.Fatalf("resp %v, err %v; want ErrUnknownClass", resp, err)
	}
	if want := `throttle: classed: providers: unknown priority class "urgent": provider classed declares interactive, default, batch`; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
	if n := f.mock.GetTotalCallCount(); n != 0 {
		t.Errorf("sent %d requests, want none", n)
	}
	// An empty class is the default, as if none were set.
	if _, err := f.do(throttle.WithPriority(context.Background(), ""), "GET", "https://api.classed.test/repos"); err != nil {
		t.Errorf("empty class: %v", err)
	}
}

// TestPriorityReserveHeld: a window keeps interactive's reserve from
// batch while interactive is active, and gives it back active_for after
// interactive's last request; the refusal names the class.
func TestPriorityReserveHeld(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `
providers:
  classed:
    hosts: [api.classed.test]
    on_limit: fail
    priority: {classes: [interactive, batch], reserve: {interactive: 50%}, active_for: 1m}
    limits: [{name: daily, quota: 10, per: day}]
`)
	interactive := throttle.WithPriority(context.Background(), "interactive")
	batch := context.Background() // the default class: batch
	if _, err := f.do(interactive, "GET", "https://api.classed.test/x"); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	var err error
	for err == nil {
		if _, err = f.do(batch, "GET", "https://api.classed.test/x"); err == nil {
			admitted++
		}
	}
	// 10, less interactive's 1, less its reserve of 5 while it is active.
	var le *throttle.LimitError
	if admitted != 4 || !errors.As(err, &le) || le.Limit != "daily" {
		t.Fatalf("batch admitted %d, then %v; want 4, then a refusal by daily", admitted, err)
	}
	events := f.obs.snapshot()
	if last := events[len(events)-1]; last.Kind != throttle.Refused || last.Class != "batch" {
		t.Errorf("last event %+v, want batch's refusal", last)
	}
	for i := 0; i < 5; i++ { // interactive takes its reserve
		if _, err := f.do(interactive, "GET", "https://api.classed.test/x"); err != nil {
			t.Fatalf("interactive %d: %v", i, err)
		}
	}
	if _, err := f.do(interactive, "GET", "https://api.classed.test/x"); !errors.Is(err, throttle.ErrLimited) {
		t.Fatalf("interactive beyond the quota: %v", err)
	}
	// The quota is spent: the reserve no longer matters. A fresh day, and
	// interactive quiet for active_for, gives batch the whole quota.
	f.clock.Advance(24 * time.Hour)
	if _, err := f.do(interactive, "GET", "https://api.classed.test/x"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Minute + time.Second)
	for i := 0; i < 9; i++ {
		if _, err := f.do(batch, "GET", "https://api.classed.test/x"); err != nil {
			t.Fatalf("batch %d after interactive went quiet: %v", i, err)
		}
	}
}

// A request names its priority class: while interactive requests are
// being made, batch leaves them interactive's reserve of the limit.
func ExampleWithPriority() {
	srv, host := vendor()
	defer srv.Close()
	cfg, err := providers.Load("providers.yaml", []byte(`
providers:
  vendor:
    hosts: ["`+host+`"]
    on_limit: fail
    priority:
      classes: [interactive, batch]      # the top first; batch is the default
      reserve: {interactive: 50%}        # of each limit, kept from batch
    limits:
      - {name: monthly, limit: 10/month}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := throttle.NewClient(throttle.WithRegistry(providers.NewRegistry(cfg)))
	if err != nil {
		fmt.Println(err)
		return
	}
	get := func(class string) error {
		ctx := throttle.WithPriority(context.Background(), class)
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/items", nil)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	fmt.Println("interactive:", get("interactive"))
	n := 0
	for get("batch") == nil {
		n++
	}
	fmt.Println("batch admitted:", n) // 10, less 1 for interactive and 5 it keeps
	fmt.Println("interactive:", get("interactive"))
	err = get("urgent")
	fmt.Println(errors.Is(err, throttle.ErrUnknownClass), strings.Contains(err.Error(), "declares interactive, batch"))
	// Output:
	// interactive: <nil>
	// batch admitted: 4
	// interactive: <nil>
	// true true
}
