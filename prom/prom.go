// Package prom exports what a throttle.Transport does as Prometheus
// metrics. It is a module of its own (github.com/fleetquota/throttle/prom)
// so that a program that imports only package throttle neither links
// client_golang nor has its Prometheus and protobuf versions raised.
//
//	obs, err := prom.New(prom.WithRegisterer(prometheus.DefaultRegisterer))
//	if err != nil { ... }
//	client, err := throttle.NewClient(throttle.WithObserver(obs), ...)
//
// Every label takes bounded values: provider, limit and priority class
// names come from the configuration (a class is one its provider
// declares, at most quota.MaxClasses, or "" for a provider without
// classes), events are a fixed set, statuses are HTTP status codes. Scope
// values (tenant ids) are never labels.
package prom

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
)

// DefaultBuckets are throttle_wait_seconds' buckets: from "went at once"
// (the bucket 0) to the longest waits a max_wait commonly allows.
var DefaultBuckets = []float64{0, .001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Observer is a throttle.Observer and a prometheus.Collector.
//
// Metrics (names with the namespace of WithNamespace, if any, and "_"
// before them):
//
//	throttle_events_total{provider,event,limit,class} counter: every event by kind
//	                                                 (decided, waited, refused, cancelled, deferred,
//	                                                 upstream_throttled, paused, store_error,
//	                                                 fell_back); limit is the deciding limit or "",
//	                                                 class the request's priority class or ""
//	throttle_wait_seconds{provider,class}            histogram: the wait of each admitted request
//	                                                 for its slot
//	throttle_appointment_wait_seconds{provider,class} histogram: each wait for an appointment
//	                                                 in a fair limit (a deferral)
//	throttle_decisions_per_request{provider,class}   histogram: the decisions (store calls) each
//	                                                 request took, counted when it is admitted
//	                                                 or refused
//	throttle_remaining{provider,limit}               gauge: remaining after the latest decision,
//	                                                 for limits with one state per provider only
//	throttle_upstream_throttled_total{provider,status} counter: vendor throttles by status
//	throttle_leases_held{provider}                   gauge: concurrency leases this process's
//	                                                 requests hold now
//	throttle_debt_charged_total{provider,limit}      counter: cost charged beyond the estimates
//	                                                 by settled costs (a debt once past the limit)
//	throttle_refunds_total{provider,limit}           counter: cost of estimates unused and asked
//	                                                 back (given back only where safe)
//
// Leases taken, given back and left to expire (as far as this process
// knows) count in throttle_events_total as the events leased, released
// and lease_expired; throttle_leases_held is the first less the two
// others, per process: sum it over the fleet for the leases held in all.
// Usage figures above a limit's rate, which were not settled, count as
// settle_malformed, by limit.
//
// A request over its tenant's share of a fair limit is deferred to an
// appointment: throttle_events_total counts the deferrals by limit,
// throttle_appointment_wait_seconds their waits (a request deferred twice
// counts twice), and throttle_decisions_per_request how many times the
// requests asked (1 for a request decided at once: its mean is the store
// calls per request). A request decided again after a pause that came
// during its wait counts once per decision.
//
// throttle_remaining reports a limit only where the provider's requests
// share one state: a limit of scope provider, or the shared state that a
// scoped limit keeps for requests without a scope value (missing: shared).
// A per-tenant limit has one state per tenant, and a gauge per provider and
// limit set from each decision would show whichever tenant went last:
// with tenants A (nearly out) and B (idle) alternating it would jump
// between 0 and the full quota at every request, and an alert on it would
// fire and clear at random. Keeping a series per tenant is no answer
// either: scope values are unbounded and never labels. Nor is "the
// minimum over a scrape interval": it depends on who scrapes when (two
// Prometheus servers would each reset it for the other). Per-tenant
// pressure shows instead as refusals and waits by limit
// (throttle_events_total{event="refused",limit=...}), and `throttle status
// --top` lists the busiest tenants from the store itself.
type Observer struct {
	events    *prometheus.CounterVec
	wait      *prometheus.HistogramVec
	remaining *prometheus.GaugeVec
	upstream  *prometheus.CounterVec
	leases    *prometheus.GaugeVec
	debt      *prometheus.CounterVec
	refunds   *prometheus.CounterVec
	// appointment and calls: fair share's deferrals and the decisions
	// per request.
	appointment *prometheus.HistogramVec
	calls       *prometheus.HistogramVec
}

// decisionBuckets are throttle_decisions_per_request's upper bounds: one
// decision, a deferral kept, and the few more that contention costs.
var decisionBuckets = []float64{1, 2, 3, 4, 6, 8, 16}

var (
	_ throttle.Observer    = (*Observer)(nil)
	_ prometheus.Collector = (*Observer)(nil)
)

// An Option configures New.
type Option interface{ apply(*settings) error }

type optionFunc func(*settings) error

func (f optionFunc) apply(s *settings) error { return f(s) }

type settings struct {
	namespace string
	buckets   []float64
	reg       prometheus.Registerer
}

// WithNamespace puts ns before every metric's name: "acme" makes
// acme_throttle_events_total. ns must be a valid metric name part
// ([a-zA-Z_][a-zA-Z0-9_]*). The default is none.
func WithNamespace(ns string) Option {
	return optionFunc(func(s *settings) error {
		if !validName(ns) {
			return fmt.Errorf("prom: WithNamespace(%q): want [a-zA-Z_][a-zA-Z0-9_]*", ns)
		}
		s.namespace = ns
		return nil
	})
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// WithBuckets sets throttle_wait_seconds' upper bounds, in seconds,
// strictly increasing (DefaultBuckets by default). Keep a bucket 0 to see
// how many requests went at once, and one at the longest max_wait.
func WithBuckets(b ...float64) Option {
	return optionFunc(func(s *settings) error {
		if len(b) == 0 {
			return errors.New("prom: WithBuckets(): no buckets")
		}
		for i, v := range b {
			if math.IsNaN(v) || i > 0 && v <= b[i-1] {
				return fmt.Errorf("prom: WithBuckets(%v): want numbers in strictly increasing order", b)
			}
		}
		s.buckets = append([]float64(nil), b...)
		return nil
	})
}

// WithRegisterer has New register the Observer with reg, e.g.
// prometheus.DefaultRegisterer. Without it New registers nothing and the
// caller registers the Observer where it wants.
func WithRegisterer(reg prometheus.Registerer) Option {
	return optionFunc(func(s *settings) error {
		if reg == nil {
			return errors.New("prom: WithRegisterer(nil)")
		}
		s.reg = reg
		return nil
	})
}

// New returns an Observer. It fails on a bad option, or when WithRegisterer
// is given and the registration fails (e.g. a second Observer with the same
// namespace in the same registry).
func New(opts ...Option) (*Observer, error) {
	s := settings{buckets: DefaultBuckets}
	for _, o := range opts {
		if err := o.apply(&s); err != nil {
			return nil, err
		}
	}
	const sub = "throttle"
	o := &Observer{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: s.namespace, Subsystem: sub, Name: "events_total",
			Help: "What the throttle did with requests, by provider, event, deciding limit and priority class.",
		}, []string{"provider", "event", "limit", "class"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: s.namespace, Subsystem: sub, Name: "wait_seconds",
			Help:    "How long admitted requests waited for their reserved slot, by priority class.",
			Buckets: s.buckets,
		}, []string{"provider", "class"}),
		remaining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: s.namespace, Subsystem: sub, Name: "remaining",
			Help: "Requests a provider-wide limit would still admit at once, after the latest decision.",
		}, []string{"provider", "limit"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: s.namespace, Subsystem: sub, Name: "upstream_throttled_total",
			Help: "Responses in which the vendor said it throttled the request, by status.",
		}, []string{"provider", "status"}),
		leases: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: s.namespace, Subsystem: sub, Name: "leases_held",
			Help: "Concurrency leases this process's requests hold now.",
		}, []string{"provider"}),
		debt: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: s.namespace, Subsystem: sub, Name: "debt_charged_total",
			Help: "Cost charged beyond the reserved estimates when the actual costs were settled, by limit.",
		}, []string{"provider", "limit"}),
		refunds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: s.namespace, Subsystem: sub, Name: "refunds_total",
			Help: "Cost of reserved estimates left unused and asked back when the actual costs were settled, by limit.",
		}, []string{"provider", "limit"}),
		appointment: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: s.namespace, Subsystem: sub, Name: "appointment_wait_seconds",
			Help:    "How long requests over their tenant's share of a fair limit waited for their appointment, per deferral, by priority class.",
			Buckets: s.buckets,
		}, []string{"provider", "class"}),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: s.namespace, Subsystem: sub, Name: "decisions_per_request",
			Help:    "How many decisions (store calls) each admitted or refused request took, by priority class.",
			Buckets: decisionBuckets,
		}, []string{"provider", "class"}),
	}
	if s.reg != nil {
		if err := s.reg.Register(o); err != nil {
			return nil, fmt.Errorf("prom: registering the throttle metrics: %w", err)
		}
	}
	return o, nil
}

// Observe records e.
func (o *Observer) Observe(_ context.Context, e throttle.Event) {
	o.events.WithLabelValues(e.Provider, e.Kind.String(), e.Limit, e.Class).Inc()
	switch e.Kind {
	case throttle.Decided:
		o.wait.WithLabelValues(e.Provider, e.Class).Observe(e.Wait.Seconds())
		o.observeCalls(e)
	case throttle.Refused:
		o.observeCalls(e)
	case throttle.Deferred:
		if !e.Shadow { // a deferral in shadow mode is not waited for
			o.appointment.WithLabelValues(e.Provider, e.Class).Observe(e.Wait.Seconds())
		}
	case throttle.UpstreamThrottled:
		o.upstream.WithLabelValues(e.Provider, strconv.Itoa(e.Status)).Inc()
	case throttle.Leased:
		o.leases.WithLabelValues(e.Provider).Inc()
	case throttle.Released, throttle.LeaseExpired:
		o.leases.WithLabelValues(e.Provider).Dec()
	case throttle.Settled:
		if e.Delta > 0 {
			o.debt.WithLabelValues(e.Provider, e.Limit).Add(float64(e.Delta))
		} else if e.Delta < 0 {
			o.refunds.WithLabelValues(e.Provider, e.Limit).Add(float64(-e.Delta))
		}
	}
	for i, it := range e.Items {
		if i < len(e.Statuses) && it.Limit != nil && providers.ProviderWide(it.Key) {
			o.remaining.WithLabelValues(e.Provider, it.Limit.Name).Set(float64(e.Statuses[i].Remaining))
		}
	}
}

// observeCalls records the decisions a request took, for an event that
// says (an Observer fed by hand may leave Calls zero).
func (o *Observer) observeCalls(e throttle.Event) {
	if e.Calls > 0 {
		o.calls.WithLabelValues(e.Provider, e.Class).Observe(float64(e.Calls))
	}
}

// Describe sends the metrics' descriptions.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	o.events.Describe(ch)
	o.wait.Describe(ch)
	o.remaining.Describe(ch)
	o.upstream.Describe(ch)
	o.leases.Describe(ch)
	o.debt.Describe(ch)
	o.refunds.Describe(ch)
	o.appointment.Describe(ch)
	o.calls.Describe(ch)
}

// Collect sends the metrics.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	o.events.Collect(ch)
	o.wait.Collect(ch)
	o.remaining.Collect(ch)
	o.upstream.Collect(ch)
	o.leases.Collect(ch)
	o.debt.Collect(ch)
	o.refunds.Collect(ch)
	o.appointment.Collect(ch)
	o.calls.Collect(ch)
}
