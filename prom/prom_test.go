package prom_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/prom"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

func TestObserverRecordsEvents(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	o, err := prom.New(prom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	peak := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 10, Period: time.Second}
	items := []quota.Item{{Limit: peak, Key: "peak"}}
	o.Observe(ctx, throttle.Event{Kind: throttle.Decided, Provider: "stripe", Wait: 250 * time.Millisecond,
		Items: items, Statuses: []quota.Status{{Remaining: 7}}})
	o.Observe(ctx, throttle.Event{Kind: throttle.Refused, Provider: "stripe", Limit: "peak",
		Items: items, Statuses: []quota.Status{{Remaining: 0}}})
	o.Observe(ctx, throttle.Event{Kind: throttle.UpstreamThrottled, Provider: "stripe", Status: 429})

	want := `
# HELP throttle_events_total What the throttle did with requests, by provider, event, deciding limit and priority class.
# TYPE throttle_events_total counter
throttle_events_total{class="",event="decided",limit="",provider="stripe"} 1
throttle_events_total{class="",event="refused",limit="peak",provider="stripe"} 1
throttle_events_total{class="",event="upstream_throttled",limit="",provider="stripe"} 1
# HELP throttle_remaining Requests a provider-wide limit would still admit at once, after the latest decision.
# TYPE throttle_remaining gauge
throttle_remaining{limit="peak",provider="stripe"} 0
# HELP throttle_upstream_throttled_total Responses in which the vendor said it throttled the request, by status.
# TYPE throttle_upstream_throttled_total counter
throttle_upstream_throttled_total{provider="stripe",status="429"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"throttle_events_total", "throttle_remaining", "throttle_upstream_throttled_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(o, "throttle_wait_seconds"); n != 1 {
		t.Errorf("wait histogram series = %d, want 1", n)
	}
}

// TestObserverLeasesAndDebt: leases held go up with each request that
// takes them and down as they are released or expire; settled costs add
// their excess to the debt charged and their unused estimate to the
// refunds, by limit.
func TestObserverLeasesAndDebt(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	o, err := prom.New(prom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []throttle.EventKind{throttle.Leased, throttle.Leased, throttle.Leased, throttle.Released, throttle.LeaseExpired} {
		o.Observe(ctx, throttle.Event{Kind: k, Provider: "openai"})
	}
	for _, d := range []int64{300, -200, -50, 0} {
		o.Observe(ctx, throttle.Event{Kind: throttle.Settled, Provider: "openai", Limit: "tpm", Delta: d})
	}
	want := `
# HELP throttle_debt_charged_total Cost charged beyond the reserved estimates when the actual costs were settled, by limit.
# TYPE throttle_debt_charged_total counter
throttle_debt_charged_total{limit="tpm",provider="openai"} 300
# HELP throttle_events_total What the throttle did with requests, by provider, event, deciding limit and priority class.
# TYPE throttle_events_total counter
throttle_events_total{class="",event="lease_expired",limit="",provider="openai"} 1
throttle_events_total{class="",event="leased",limit="",provider="openai"} 3
throttle_events_total{class="",event="released",limit="",provider="openai"} 1
throttle_events_total{class="",event="settled",limit="tpm",provider="openai"} 4
# HELP throttle_leases_held Concurrency leases this process's requests hold now.
# TYPE throttle_leases_held gauge
throttle_leases_held{provider="openai"} 1
# HELP throttle_refunds_total Cost of reserved estimates left unused and asked back when the actual costs were settled, by limit.
# TYPE throttle_refunds_total counter
throttle_refunds_total{limit="tpm",provider="openai"} 250
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"throttle_debt_charged_total", "throttle_events_total", "throttle_leases_held", "throttle_refunds_total"); err != nil {
		t.Error(err)
	}
}

const tenantsYAML = `
providers:
  vendor:
    hosts: [api.vendor.test]
    on_limit: fail
    limits:
      - {name: global, limit: 100/min}
      - {name: per-tenant, limit: 10/min, scope: business}
`

// Two tenants alternate, A busy (three requests a turn) and B light (one):
// throttle_remaining must not jump between A's state and B's. The
// provider-wide limit is one state and is reported exactly; the per-tenant
// limit has a state per tenant and is not reported by provider and limit.
func TestRemainingIsStableAcrossTenants(t *testing.T) {
	t.Parallel()
	cfg, err := providers.Load("tenants.yaml", []byte(tenantsYAML))
	if err != nil {
		t.Fatal(err)
	}
	clock := quotatest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)) // never moves: exact counts
	mock := httpmock.NewMockTransport()
	mock.RegisterNoResponder(httpmock.NewStringResponder(200, "ok"))
	reg := prometheus.NewPedanticRegistry()
	obs, err := prom.New(prom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := throttle.New(throttle.WithRegistry(providers.NewRegistry(cfg)),
		throttle.WithStore(quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})),
		throttle.WithClock(clock), throttle.WithBase(mock), throttle.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	send := func(tenant string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(throttle.WithBusiness(context.Background(), tenant), "GET", "https://api.vendor.test/x", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("tenant %s, request %d: %v", tenant, sent+1, err)
		}
		resp.Body.Close()
		sent++
	}
	for turn := 0; turn < 3; turn++ {
		for _, tenant := range []string{"a", "a", "a", "b"} {
			send(tenant)
			want := fmt.Sprintf(`
# HELP throttle_remaining Requests a provider-wide limit would still admit at once, after the latest decision.
# TYPE throttle_remaining gauge
throttle_remaining{limit="global",provider="vendor"} %d
`, 100-sent)
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "throttle_remaining"); err != nil {
				t.Fatalf("after request %d (tenant %s): %v", sent, tenant, err)
			}
		}
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	o, err := prom.New(prom.WithNamespace("acme"), prom.WithBuckets(0, 1, 10), prom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	o.Observe(context.Background(), throttle.Event{Kind: throttle.Decided, Provider: "stripe", Wait: 2 * time.Second})
	want := `
# HELP acme_throttle_wait_seconds How long admitted requests waited for their reserved slot, by priority class.
# TYPE acme_throttle_wait_seconds histogram
acme_throttle_wait_seconds_bucket{class="",provider="stripe",le="0"} 0
acme_throttle_wait_seconds_bucket{class="",provider="stripe",le="1"} 0
acme_throttle_wait_seconds_bucket{class="",provider="stripe",le="10"} 1
acme_throttle_wait_seconds_bucket{class="",provider="stripe",le="+Inf"} 1
acme_throttle_wait_seconds_sum{class="",provider="stripe"} 2
acme_throttle_wait_seconds_count{class="",provider="stripe"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "acme_throttle_wait_seconds"); err != nil {
		t.Error(err)
	}
	// The same metrics twice in one registry: New says so.
	if _, err := prom.New(prom.WithNamespace("acme"), prom.WithRegisterer(reg)); err == nil {
		t.Error("a second registration of the same metrics succeeded")
	}
	for _, bad := range []prom.Option{
		prom.WithNamespace(""), prom.WithNamespace("1acme"), prom.WithNamespace("ac-me"),
		prom.WithBuckets(), prom.WithBuckets(1, 1), prom.WithBuckets(2, 1), prom.WithBuckets(math.NaN()),
		prom.WithRegisterer(nil),
	} {
		if o, err := prom.New(bad); err == nil || o != nil {
			t.Errorf("New(%#v) = %v, %v: want an error", bad, o, err)
		}
	}
}

// A request's priority class labels its events and its wait; "" for a
// provider without classes.
func TestObserverLabelsByClass(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	o, err := prom.New(prom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o.Observe(ctx, throttle.Event{Kind: throttle.Decided, Provider: "github", Class: "interactive"})
	o.Observe(ctx, throttle.Event{Kind: throttle.Decided, Provider: "github", Class: "batch", Limit: "core", Wait: 2 * time.Second})
	o.Observe(ctx, throttle.Event{Kind: throttle.Refused, Provider: "github", Class: "batch", Limit: "core"})
	o.Observe(ctx, throttle.Event{Kind: throttle.Decided, Provider: "stripe"})
	want := `
# HELP throttle_events_total What the throttle did with requests, by provider, event, deciding limit and priority class.
# TYPE throttle_events_total counter
throttle_events_total{class="",event="decided",limit="",provider="stripe"} 1
throttle_events_total{class="batch",event="decided",limit="core",provider="github"} 1
throttle_events_total{class="batch",event="refused",limit="core",provider="github"} 1
throttle_events_total{class="interactive",event="decided",limit="",provider="github"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "throttle_events_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(o, "throttle_wait_seconds"); n != 3 {
		t.Errorf("wait histogram series = %d, want 3 (github interactive, github batch, stripe)", n)
	}
}

// TestObserverFairShare: a deferral counts as an event of its fair
// limit and its wait in the appointment histogram (not in shadow mode);
// the decisions of each admitted or refused request go to
// throttle_decisions_per_request.
func TestObserverFairShare(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	o, err := prom.New(prom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o.Observe(ctx, throttle.Event{Kind: throttle.Decided, Provider: "openai", Calls: 1})
	o.Observe(ctx, throttle.Event{Kind: throttle.Deferred, Provider: "openai", Limit: "tpm", Wait: 2 * time.Second, Calls: 1})
	o.Observe(ctx, throttle.Event{Kind: throttle.Decided, Provider: "openai", Calls: 2})
	o.Observe(ctx, throttle.Event{Kind: throttle.Deferred, Provider: "openai", Limit: "tpm", Wait: time.Second, Calls: 1, Shadow: true})
	o.Observe(ctx, throttle.Event{Kind: throttle.Refused, Provider: "openai", Limit: "tpm", Calls: 3})
	want := `
# HELP throttle_decisions_per_request How many decisions (store calls) each admitted or refused request took, by priority class.
# TYPE throttle_decisions_per_request histogram
throttle_decisions_per_request_bucket{class="",provider="openai",le="1"} 1
throttle_decisions_per_request_bucket{class="",provider="openai",le="2"} 2
throttle_decisions_per_request_bucket{class="",provider="openai",le="3"} 3
throttle_decisions_per_request_bucket{class="",provider="openai",le="4"} 3
throttle_decisions_per_request_bucket{class="",provider="openai",le="6"} 3
throttle_decisions_per_request_bucket{class="",provider="openai",le="8"} 3
throttle_decisions_per_request_bucket{class="",provider="openai",le="16"} 3
throttle_decisions_per_request_bucket{class="",provider="openai",le="+Inf"} 3
throttle_decisions_per_request_sum{class="",provider="openai"} 6
throttle_decisions_per_request_count{class="",provider="openai"} 3
# HELP throttle_events_total What the throttle did with requests, by provider, event, deciding limit and priority class.
# TYPE throttle_events_total counter
throttle_events_total{class="",event="decided",limit="",provider="openai"} 2
throttle_events_total{class="",event="deferred",limit="tpm",provider="openai"} 2
throttle_events_total{class="",event="refused",limit="tpm",provider="openai"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "throttle_decisions_per_request", "throttle_events_total"); err != nil {
		t.Error(err)
	}
	// The shadow deferral was not waited for: one wait of 2s.
	want = `
# HELP throttle_appointment_wait_seconds How long requests over their tenant's share of a fair limit waited for their appointment, per deferral, by priority class.
# TYPE throttle_appointment_wait_seconds histogram
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="0"} 0
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="0.001"} 0
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="0.005"} 0
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="0.01"} 0
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="0.05"} 0
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="0.1"} 0
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="0.25"} 0
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="0.5"} 0
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="1"} 0
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="2.5"} 1
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="5"} 1
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="10"} 1
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="30"} 1
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="60"} 1
throttle_appointment_wait_seconds_bucket{class="",provider="openai",le="+Inf"} 1
throttle_appointment_wait_seconds_sum{class="",provider="openai"} 2
throttle_appointment_wait_seconds_count{class="",provider="openai"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "throttle_appointment_wait_seconds"); err != nil {
		t.Error(err)
	}
}
