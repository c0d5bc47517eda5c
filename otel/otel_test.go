package otel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fleetquota/throttle"
	throttleotel "github.com/fleetquota/throttle/otel"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

const vendorYAML = `
providers:
  vendor:
    hosts: [api.vendor.test]
    on_limit: wait
    max_wait: 10s
    limits:
      - {name: peak, limit: 1/s, burst: 1}
  failfast:
    hosts: [fail.vendor.test]
    on_limit: fail
    limits:
      - {name: peak, limit: 1/s, burst: 1}
  shadow:
    hosts: [shadow.vendor.test]
    mode: shadow
    on_limit: fail
    limits:
      - {name: peak, limit: 1/s, burst: 1}
`

// fixture is a Transport on a clock that moves only when told, sending to
// httpmock, observed by an Observer on an in-memory MeterProvider.
type fixture struct {
	t      *testing.T
	clock  *quotatest.Clock
	rt     *throttle.Transport
	obs    *throttleotel.Observer
	reader *sdkmetric.ManualReader
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cfg, err := providers.Load("test.yaml", []byte(vendorYAML))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, clock: quotatest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)),
		reader: sdkmetric.NewManualReader()}
	f.obs, err = throttleotel.New(throttleotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))))
	if err != nil {
		t.Fatal(err)
	}
	mock := httpmock.NewMockTransport()
	mock.RegisterNoResponder(httpmock.NewStringResponder(200, "ok"))
	f.rt, err = throttle.New(throttle.WithRegistry(providers.NewRegistry(cfg)),
		throttle.WithStore(quota.NewMemoryStore(quota.MemoryOptions{Clock: f.clock})),
		throttle.WithClock(f.clock), throttle.WithBase(mock), throttle.WithObserver(f.obs))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) do(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := f.rt.RoundTrip(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// waitOnce sends a request that must wait for its slot: it starts it,
// lets the clock reach the slot once the request sleeps (or cancels ctx
// instead, when cancel is not nil) and returns the request's error.
func (f *fixture) waitOnce(ctx context.Context, url string, cancel context.CancelFunc) error {
	f.t.Helper()
	done := make(chan error, 1)
	go func() { done <- f.do(ctx, url) }()
	for f.clock.Timers() < 1 {
		time.Sleep(time.Millisecond)
	}
	if cancel != nil {
		cancel()
	} else {
		f.clock.Advance(time.Second)
	}
	return <-done
}

// collect returns every data point as one line, sorted: the instrument's
// name, unit and attributes, then the counter's value or the histogram's
// count and sum.
func (f *fixture) collect() string {
	f.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := f.reader.Collect(context.Background(), &rm); err != nil {
		f.t.Fatal(err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != throttleotel.ScopeName {
			f.t.Errorf("scope %q, want %q", sm.Scope.Name, throttleotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if upDown := strings.HasSuffix(m.Name, ".count"); d.IsMonotonic == upDown {
					f.t.Errorf("%s: monotonic %v, want %v", m.Name, d.IsMonotonic, !upDown)
				}
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s [%s] {%s} %d", m.Name, m.Unit, attrs(p.Attributes), p.Value))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if !slices.Equal(p.Bounds, throttleotel.DefaultBuckets) {
						f.t.Errorf("%s bounds %v, want DefaultBuckets", m.Name, p.Bounds)
					}
					lines = append(lines, fmt.Sprintf("%s [%s] {%s} count=%d sum=%g", m.Name, m.Unit, attrs(p.Attributes), p.Count, p.Sum))
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					if !slices.Equal(p.Bounds, throttleotel.DecisionBuckets) {
						f.t.Errorf("%s bounds %v, want DecisionBuckets", m.Name, p.Bounds)
					}
					lines = append(lines, fmt.Sprintf("%s [%s] {%s} count=%d sum=%d", m.Name, m.Unit, attrs(p.Attributes), p.Count, p.Sum))
				}
			default:
				f.t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func attrs(s attribute.Set) string {
	var kv []string
	for it := s.Iter(); it.Next(); {
		a := it.Attribute()
		kv = append(kv, string(a.Key)+"="+a.Value.Emit())
	}
	return strings.Join(kv, " ")
}

func TestMetricsFromTheTransport(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bg := context.Background()
	// vendor: one at once, one that waits 1s for its slot, one cancelled
	// while it waits.
	if err := f.do(bg, "https://api.vendor.test/x"); err != nil {
		t.Fatal(err)
	}
	if err := f.waitOnce(bg, "https://api.vendor.test/x", nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	if err := f.waitOnce(ctx, "https://api.vendor.test/x", cancel); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v, want context.Canceled", err)
	}
	// failfast and shadow: one admitted, one refused (shadow: sent anyway).
	for _, host := range []string{"fail", "shadow"} {
		if err := f.do(bg, "https://"+host+".vendor.test/x"); err != nil {
			t.Fatal(err)
		}
		err := f.do(bg, "https://"+host+".vendor.test/x")
		if refused := errors.Is(err, throttle.ErrLimited); refused != (host == "fail") {
			t.Fatalf("%s: second request: %v", host, err)
		}
	}
	want := strings.TrimSpace(`
throttle.cancellations [{cancellation}] {throttle.limit.name=peak throttle.provider.name=vendor} 1
throttle.decisions [{decision}] {throttle.limit.name=peak throttle.mode=enforce throttle.outcome=admitted throttle.provider.name=vendor} 2
throttle.decisions [{decision}] {throttle.limit.name=peak throttle.mode=enforce throttle.outcome=refused throttle.provider.name=failfast} 1
throttle.decisions [{decision}] {throttle.limit.name=peak throttle.mode=shadow throttle.outcome=refused throttle.provider.name=shadow} 1
throttle.decisions [{decision}] {throttle.mode=enforce throttle.outcome=admitted throttle.provider.name=failfast} 1
throttle.decisions [{decision}] {throttle.mode=enforce throttle.outcome=admitted throttle.provider.name=vendor} 1
throttle.decisions [{decision}] {throttle.mode=shadow throttle.outcome=admitted throttle.provider.name=shadow} 1
throttle.request.decisions [{decision}] {throttle.provider.name=failfast} count=2 sum=2
throttle.request.decisions [{decision}] {throttle.provider.name=shadow} count=2 sum=2
throttle.request.decisions [{decision}] {throttle.provider.name=vendor} count=3 sum=3
throttle.wait.duration [s] {throttle.limit.name=peak throttle.provider.name=vendor} count=2 sum=2
throttle.wait.duration [s] {throttle.provider.name=failfast} count=1 sum=0
throttle.wait.duration [s] {throttle.provider.name=shadow} count=1 sum=0
throttle.wait.duration [s] {throttle.provider.name=vendor} count=1 sum=0
`)
	if got := f.collect(); got != want {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
}

// The events that need a vendor's 429 or a failing store, given directly.
func TestMetricsOfThrottlesAndStoreErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, e := range []throttle.Event{
		{Kind: throttle.UpstreamThrottled, Provider: "vendor", Status: 429, Wait: 5 * time.Second},
		{Kind: throttle.UpstreamThrottled, Provider: "vendor", Status: 429},
		{Kind: throttle.UpstreamThrottled, Provider: "vendor", Status: 403},
		{Kind: throttle.Paused, Provider: "vendor", Limit: "pause", Wait: 5 * time.Second},
		{Kind: throttle.StoreError, Provider: "vendor", Err: errors.New("dial tcp: connection refused")},
		{Kind: throttle.FellBack, Provider: "vendor", Policy: providers.FailOpen, Err: errors.New("dial tcp: connection refused")},
		{Kind: throttle.FellBack, Provider: "vendor", Policy: providers.Local, Err: errors.New("dial tcp: connection refused")},
		{Kind: throttle.FellBack, Provider: "vendor", Policy: providers.Local},
		{Kind: throttle.EventKind(200), Provider: "vendor"}, // a kind from a later version: ignored
	} {
		f.obs.Observe(ctx, e)
	}
	want := strings.TrimSpace(`
throttle.pauses [{pause}] {throttle.provider.name=vendor} 1
throttle.store.errors [{error}] {throttle.provider.name=vendor} 1
throttle.store.fallbacks [{fallback}] {throttle.on_store_error=fail_open throttle.provider.name=vendor} 1
throttle.store.fallbacks [{fallback}] {throttle.on_store_error=local throttle.provider.name=vendor} 2
throttle.upstream.throttles [{throttle}] {http.response.status_code=403 throttle.provider.name=vendor} 1
throttle.upstream.throttles [{throttle}] {http.response.status_code=429 throttle.provider.name=vendor} 2
`)
	if got := f.collect(); got != want {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
}

// Leases and settled costs, given directly: the lease count goes up and
// down, the excess and the refunds add up by limit, malformed figures
// count.
func TestMetricsOfLeasesAndDebt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, e := range []throttle.Event{
		{Kind: throttle.Leased, Provider: "vendor"},
		{Kind: throttle.Leased, Provider: "vendor"},
		{Kind: throttle.Leased, Provider: "vendor"},
		{Kind: throttle.Released, Provider: "vendor"},
		{Kind: throttle.LeaseExpired, Provider: "vendor", Err: errors.New("dial tcp: connection refused")},
		{Kind: throttle.Settled, Provider: "vendor", Limit: "tpm", Delta: 300},
		{Kind: throttle.Settled, Provider: "vendor", Limit: "tpm", Delta: -200},
		{Kind: throttle.Settled, Provider: "vendor", Limit: "output", Delta: -50},
		{Kind: throttle.SettleMalformed, Provider: "vendor", Limit: "tpm", Delta: 999_999_900},
	} {
		f.obs.Observe(ctx, e)
	}
	want := strings.TrimSpace(`
throttle.lease.acquisitions [{lease}] {throttle.provider.name=vendor} 3
throttle.lease.count [{lease}] {throttle.provider.name=vendor} 1
throttle.lease.expirations [{lease}] {throttle.provider.name=vendor} 1
throttle.lease.releases [{lease}] {throttle.provider.name=vendor} 1
throttle.settle.debt [{cost}] {throttle.limit.name=tpm throttle.provider.name=vendor} 300
throttle.settle.malformed [{figure}] {throttle.limit.name=tpm throttle.provider.name=vendor} 1
throttle.settle.refund [{cost}] {throttle.limit.name=output throttle.provider.name=vendor} 50
throttle.settle.refund [{cost}] {throttle.limit.name=tpm throttle.provider.name=vendor} 200
`)
	if got := f.collect(); got != want {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
}

func TestWaitSpan(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rec := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	bg := context.Background()

	// No span in the context: the throttle starts no trace of its own.
	if err := f.do(bg, "https://api.vendor.test/x"); err != nil {
		t.Fatal(err)
	}
	if err := f.waitOnce(bg, "https://api.vendor.test/x", nil); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans without a caller's span, want none", n)
	}

	// A request that goes at once: no wait, no span. Then one that waits
	// and one cancelled while it waits, each inside a caller's span.
	f.clock.Advance(time.Minute)
	ctx, callerAtOnce := tracer.Start(bg, "GET at once")
	if err := f.do(ctx, "https://api.vendor.test/x"); err != nil {
		t.Fatal(err)
	}
	callerAtOnce.End()
	ctx, callerWaited := tracer.Start(bg, "GET waited")
	if err := f.waitOnce(ctx, "https://api.vendor.test/x", nil); err != nil {
		t.Fatal(err)
	}
	callerWaited.End()
	ctx, callerCancelled := tracer.Start(bg, "GET cancelled")
	ctx, cancel := context.WithCancel(ctx)
	if err := f.waitOnce(ctx, "https://api.vendor.test/x", cancel); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	callerCancelled.End()

	var waits []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "throttle.wait" {
			waits = append(waits, s)
		}
	}
	if len(waits) != 2 {
		t.Fatalf("%d throttle.wait spans, want 2 (the wait and the cancelled wait)", len(waits))
	}
	for i, c := range []struct {
		parent  trace.Span
		outcome string
		status  codes.Code
	}{
		{callerWaited, throttleotel.OutcomeAdmitted, codes.Unset},
		{callerCancelled, throttleotel.OutcomeCancelled, codes.Error},
	} {
		s := waits[i]
		if s.Parent().SpanID() != c.parent.SpanContext().SpanID() || s.SpanContext().TraceID() != c.parent.SpanContext().TraceID() {
			t.Errorf("wait %d: not a child of its caller's span", i)
		}
		if s.SpanKind() != trace.SpanKindInternal {
			t.Errorf("wait %d: kind %v, want internal", i, s.SpanKind())
		}
		if d := s.EndTime().Sub(s.StartTime()); d != time.Second {
			t.Errorf("wait %d: lasts %v, want the wait, 1s", i, d)
		}
		want := []attribute.KeyValue{
			throttleotel.ProviderKey.String("vendor"),
			throttleotel.LimitKey.String("peak"),
			throttleotel.OutcomeKey.String(c.outcome),
		}
		if got := s.Attributes(); !slices.Equal(got, want) {
			t.Errorf("wait %d: attributes %v, want %v", i, got, want)
		}
		if s.Status().Code != c.status {
			t.Errorf("wait %d: status %v, want %v", i, s.Status(), c.status)
		}
		if s.InstrumentationScope().Name != throttleotel.ScopeName {
			t.Errorf("wait %d: scope %q", i, s.InstrumentationScope().Name)
		}
	}
}

func TestNewRejectsANilMeterProvider(t *testing.T) {
	t.Parallel()
	if o, err := throttleotel.New(throttleotel.WithMeterProvider(nil)); err == nil || o != nil {
		t.Errorf("New(WithMeterProvider(nil)) = %v, %v: want an error", o, err)
	}
}

// A request's priority class is an attribute of its decisions, waits,
// cancellations and settlements; absent for a provider without classes.
func TestMetricsByClass(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, e := range []throttle.Event{
		{Kind: throttle.Decided, Provider: "vendor", Class: "interactive"},
		{Kind: throttle.Decided, Provider: "vendor", Class: "batch", Limit: "peak", Wait: time.Second},
		{Kind: throttle.Refused, Provider: "vendor", Class: "batch", Limit: "peak"},
		{Kind: throttle.Cancelled, Provider: "vendor", Class: "batch", Limit: "peak"},
		{Kind: throttle.Decided, Provider: "vendor"},
	} {
		f.obs.Observe(ctx, e)
	}
	want := strings.TrimSpace(`
throttle.cancellations [{cancellation}] {throttle.limit.name=peak throttle.priority.class=batch throttle.provider.name=vendor} 1
throttle.decisions [{decision}] {throttle.limit.name=peak throttle.mode=enforce throttle.outcome=admitted throttle.priority.class=batch throttle.provider.name=vendor} 1
throttle.decisions [{decision}] {throttle.limit.name=peak throttle.mode=enforce throttle.outcome=refused throttle.priority.class=batch throttle.provider.name=vendor} 1
throttle.decisions [{decision}] {throttle.mode=enforce throttle.outcome=admitted throttle.priority.class=interactive throttle.provider.name=vendor} 1
throttle.decisions [{decision}] {throttle.mode=enforce throttle.outcome=admitted throttle.provider.name=vendor} 1
throttle.wait.duration [s] {throttle.limit.name=peak throttle.priority.class=batch throttle.provider.name=vendor} count=1 sum=1
throttle.wait.duration [s] {throttle.priority.class=interactive throttle.provider.name=vendor} count=1 sum=0
throttle.wait.duration [s] {throttle.provider.name=vendor} count=1 sum=0
`)
	if got := f.collect(); got != want {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
}

// TestMetricsOfFairShare: a deferral counts as a decision with the
// outcome deferred, its wait in throttle.appointment.duration (not in
// shadow mode), and each admitted or refused request's decisions in
// throttle.request.decisions.
func TestMetricsOfFairShare(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, e := range []throttle.Event{
		{Kind: throttle.Decided, Provider: "vendor", Calls: 1},
		{Kind: throttle.Deferred, Provider: "vendor", Limit: "tpm", Wait: 2 * time.Second, Calls: 1},
		{Kind: throttle.Decided, Provider: "vendor", Calls: 2},
		{Kind: throttle.Deferred, Provider: "vendor", Limit: "tpm", Wait: time.Second, Calls: 1, Shadow: true},
		{Kind: throttle.Refused, Provider: "vendor", Limit: "tpm", Calls: 3},
	} {
		f.obs.Observe(ctx, e)
	}
	want := strings.TrimSpace(`
throttle.appointment.duration [s] {throttle.limit.name=tpm throttle.provider.name=vendor} count=1 sum=2
throttle.decisions [{decision}] {throttle.limit.name=tpm throttle.mode=enforce throttle.outcome=deferred throttle.provider.name=vendor} 1
throttle.decisions [{decision}] {throttle.limit.name=tpm throttle.mode=enforce throttle.outcome=refused throttle.provider.name=vendor} 1
throttle.decisions [{decision}] {throttle.limit.name=tpm throttle.mode=shadow throttle.outcome=deferred throttle.provider.name=vendor} 1
throttle.decisions [{decision}] {throttle.mode=enforce throttle.outcome=admitted throttle.provider.name=vendor} 2
throttle.request.decisions [{decision}] {throttle.provider.name=vendor} count=3 sum=6
throttle.wait.duration [s] {throttle.provider.name=vendor} count=2 sum=0
`)
	if got := f.collect(); got != want {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
}
