package prom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/prom"
	"github.com/fleetquota/throttle/quota"
)

func TestObserverRecordsEvents(t *testing.T) {
	t.Parallel()
	o := prom.New()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(o); err != nil {
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
# HELP throttle_events_total What the throttle did with requests, by provider, event and deciding limit.
# TYPE throttle_events_total counter
throttle_events_total{event="decided",limit="",provider="stripe"} 1
throttle_events_total{event="refused",limit="peak",provider="stripe"} 1
throttle_events_total{event="upstream_throttled",limit="",provider="stripe"} 1
# HELP throttle_remaining Requests a limit would still admit at once, after the latest decision.
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
