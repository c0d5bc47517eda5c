package throttle_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
)

func TestSlogObserver(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	obs := throttle.SlogObserver(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	ctx := context.Background()
	obs.Observe(ctx, throttle.Event{Kind: throttle.Decided, Provider: "stripe"})                   // routine: not logged
	obs.Observe(ctx, throttle.Event{Kind: throttle.Waited, Provider: "stripe", Wait: time.Second}) // debug: filtered
	obs.Observe(ctx, throttle.Event{Kind: throttle.Refused, Provider: "stripe", Limit: "peak", Wait: 2 * time.Second})
	obs.Observe(ctx, throttle.Event{Kind: throttle.StoreError, Provider: "stripe", Err: errors.New("dial tcp: refused")})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("logged %d lines, want 2 (refused, store_error):\n%s", len(lines), buf.String())
	}
	for i, want := range []string{"event=refused limit=peak wait=2s", `event=store_error error="dial tcp: refused"`} {
		if !strings.Contains(lines[i], "level=WARN") || !strings.Contains(lines[i], "provider=stripe "+want) {
			t.Errorf("line %d = %q, want WARN with %q", i, lines[i], want)
		}
	}
}

func TestEventKindString(t *testing.T) {
	t.Parallel()
	if got := throttle.UpstreamThrottled.String(); got != "upstream_throttled" {
		t.Errorf("UpstreamThrottled.String() = %q", got)
	}
	for k, want := range map[throttle.EventKind]string{throttle.Leased: "leased", throttle.Released: "released",
		throttle.LeaseExpired: "lease_expired", throttle.Settled: "settled"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", k, got, want)
		}
	}
	if got := throttle.EventKind(200).String(); got != "EventKind(200)" {
		t.Errorf("EventKind(200).String() = %q, want EventKind(200), as every enum prints a value it does not know", got)
	}
}

// A fallback is logged with the policy that decided and why the store did
// not.
func TestSlogObserverFellBack(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	obs := throttle.SlogObserver(slog.New(slog.NewTextHandler(&buf, nil)))
	obs.Observe(context.Background(), throttle.Event{Kind: throttle.FellBack, Provider: "stripe",
		Policy: providers.FailOpen, Err: errors.New("dial tcp: refused")})
	if want := `provider=stripe event=fell_back policy=fail_open error="dial tcp: refused"`; !strings.Contains(buf.String(), want) {
		t.Errorf("logged %q, want %q", buf.String(), want)
	}
}

// Several observers (a log, Prometheus, OpenTelemetry) need no glue: each
// WithObserver adds one, and every one is told every event.
func TestWithObserverAddsObservers(t *testing.T) {
	t.Parallel()
	second := &recorder{}
	f := newFixture(t, vendorYAML, throttle.WithObserver(second))
	if _, err := f.do(context.Background(), "GET", "https://api.vendor.test/x"); err != nil {
		t.Fatal(err)
	}
	done := f.startRequest(context.Background(), "https://api.vendor.test/x")
	f.waitForTimers(1)
	f.clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	first := f.obs.snapshot()
	if got := second.snapshot(); !reflect.DeepEqual(got, first) || len(got) == 0 {
		t.Fatalf("second observer saw %+v, first %+v: want the same, not empty", got, first)
	}
	want := throttle.Event{Kind: throttle.Waited, Provider: "vendor", Limit: "peak", Wait: time.Second}
	if !slices.ContainsFunc(first, func(e throttle.Event) bool { return reflect.DeepEqual(e, want) }) {
		t.Errorf("events %+v lack %+v: a wait names the limit that made it", first, want)
	}
}

func TestWithObserverNil(t *testing.T) {
	t.Parallel()
	if _, err := throttle.New(throttle.WithObserver(nil)); err == nil || !strings.Contains(err.Error(), "WithObserver(nil)") {
		t.Errorf("New(WithObserver(nil)) = %v, want an error naming WithObserver(nil)", err)
	}
}

// Leases and settled costs: a lease left to expire is a Warn, the routine
// ones and a settlement Debug, with its delta.
func TestSlogObserverLeasesAndSettled(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	obs := throttle.SlogObserver(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ctx := context.Background()
	obs.Observe(ctx, throttle.Event{Kind: throttle.Leased, Provider: "openai"})
	obs.Observe(ctx, throttle.Event{Kind: throttle.Released, Provider: "openai"})
	obs.Observe(ctx, throttle.Event{Kind: throttle.LeaseExpired, Provider: "openai"})
	obs.Observe(ctx, throttle.Event{Kind: throttle.Settled, Provider: "openai", Limit: "tpm", Delta: -120})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"level=DEBUG msg=throttle provider=openai event=leased", "level=DEBUG msg=throttle provider=openai event=released",
		"level=WARN msg=throttle provider=openai event=lease_expired", "level=DEBUG msg=throttle provider=openai event=settled limit=tpm delta=-120"}
	if len(lines) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("line %d = %q, want it to end with %q", i, lines[i], w)
		}
	}
}

func TestSlogObserverClass(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	obs := throttle.SlogObserver(slog.New(slog.NewTextHandler(&buf, nil)))
	obs.Observe(context.Background(), throttle.Event{Kind: throttle.Refused, Provider: "github", Limit: "core", Class: "batch", Wait: time.Second})
	obs.Observe(context.Background(), throttle.Event{Kind: throttle.Refused, Provider: "stripe", Limit: "peak", Wait: time.Second})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "limit=core class=batch wait=1s") || strings.Contains(lines[1], "class=") {
		t.Errorf("logged:\n%s\nwant class=batch on the first line alone", buf.String())
	}
}
