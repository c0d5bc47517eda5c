// Package prom exports what a throttle.Transport does as Prometheus
// metrics. It lives in its own package so that programs that do not use
// Prometheus do not link client_golang.
//
//	obs := prom.New()
//	prometheus.MustRegister(obs)
//	client, err := throttle.NewClient(throttle.WithObserver(obs), ...)
//
// Every label takes bounded values: provider and limit names come from
// the configuration, events are a fixed set, statuses are HTTP status
// codes. Scope values (tenant ids) are never labels.
package prom

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetquota/throttle"
)

// Observer is a throttle.Observer and a prometheus.Collector.
//
// Metrics:
//
//	throttle_events_total{provider,event,limit}      counter: every event by kind
//	                                                 (decided, waited, refused, cancelled,
//	                                                 upstream_throttled, paused, store_error,
//	                                                 fell_back); limit is the deciding limit or ""
//	throttle_wait_seconds{provider}                  histogram: the wait of each admitted request
//	throttle_remaining{provider,limit}               gauge: remaining after the latest decision;
//	                                                 for a per-tenant limit, the latest tenant's
//	throttle_upstream_throttled_total{provider,status} counter: vendor throttles by status
type Observer struct {
	events    *prometheus.CounterVec
	wait      *prometheus.HistogramVec
	remaining *prometheus.GaugeVec
	upstream  *prometheus.CounterVec
}

var (
	_ throttle.Observer    = (*Observer)(nil)
	_ prometheus.Collector = (*Observer)(nil)
)

// New returns an Observer. Register it with a prometheus.Registerer.
func New() *Observer {
	return &Observer{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "throttle_events_total",
			Help: "What the throttle did with requests, by provider, event and deciding limit.",
		}, []string{"provider", "event", "limit"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "throttle_wait_seconds",
			Help: "How long admitted requests waited for their reserved slot.",
			// From "went at once" to the longest waits a max_wait allows.
			Buckets: []float64{0, .001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"provider"}),
		remaining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "throttle_remaining",
			Help: "Requests a limit would still admit at once, after the latest decision.",
		}, []string{"provider", "limit"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "throttle_upstream_throttled_total",
			Help: "Responses in which the vendor said it throttled the request, by status.",
		}, []string{"provider", "status"}),
	}
}

// Observe records e.
func (o *Observer) Observe(_ context.Context, e throttle.Event) {
	o.events.WithLabelValues(e.Provider, e.Kind.String(), e.Limit).Inc()
	switch e.Kind {
	case throttle.Decided:
		o.wait.WithLabelValues(e.Provider).Observe(e.Wait.Seconds())
	case throttle.UpstreamThrottled:
		o.upstream.WithLabelValues(e.Provider, strconv.Itoa(e.Status)).Inc()
	}
	for i, it := range e.Items {
		if i < len(e.Statuses) && it.Limit != nil {
			o.remaining.WithLabelValues(e.Provider, it.Limit.Name).Set(float64(e.Statuses[i].Remaining))
		}
	}
}

// Describe sends the metrics' descriptions.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	o.events.Describe(ch)
	o.wait.Describe(ch)
	o.remaining.Describe(ch)
	o.upstream.Describe(ch)
}

// Collect sends the metrics.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	o.events.Collect(ch)
	o.wait.Collect(ch)
	o.remaining.Collect(ch)
	o.upstream.Collect(ch)
}
