package otel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fleetquota/throttle"
)

// ScopeName is the instrumentation scope of the package's meter and
// tracer.
const ScopeName = "github.com/fleetquota/throttle/otel"

// Attribute keys (see the package doc for where each appears).
const (
	// ProviderKey is the provider's name, as configured.
	ProviderKey = attribute.Key("throttle.provider.name")
	// LimitKey is the name of the limit that decided.
	LimitKey = attribute.Key("throttle.limit.name")
	// ClassKey is the request's priority class, one its provider
	// declares; absent when the provider declares none.
	ClassKey = attribute.Key("throttle.priority.class")
	// OutcomeKey is what became of the request: OutcomeAdmitted,
	// OutcomeRefused, OutcomeDeferred or OutcomeCancelled.
	OutcomeKey = attribute.Key("throttle.outcome")
	// ModeKey is the provider's mode: "enforce" or "shadow".
	ModeKey = attribute.Key("throttle.mode")
	// OnStoreErrorKey is the policy that decided while the store failed:
	// "fail_open" or "local".
	OnStoreErrorKey = attribute.Key("throttle.on_store_error")
	// StatusCodeKey is the semantic conventions' HTTP response status.
	StatusCodeKey = attribute.Key("http.response.status_code")
)

// Values of OutcomeKey.
const (
	OutcomeAdmitted  = "admitted"
	OutcomeRefused   = "refused"
	OutcomeCancelled = "cancelled"
	// OutcomeDeferred: a decision that gave the request an appointment
	// in its tenant's lane of a fair limit; it asks again then.
	OutcomeDeferred = "deferred"
)

// DecisionBuckets are the bucket boundaries throttle.request.decisions
// advises: one decision, a deferral kept, and the few more that
// contention costs.
var DecisionBuckets = []float64{1, 2, 3, 4, 6, 8, 16}

// DefaultBuckets are the bucket boundaries, in seconds, that
// throttle.wait.duration advises: the semantic conventions' boundaries for
// request durations, with 0 first (to count the requests that went at
// once) and 30 and 60 last (the long waits a max_wait allows).
var DefaultBuckets = []float64{0, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60}

// Observer is a throttle.Observer that records metrics and the
// "throttle.wait" span (see the package doc). Safe for concurrent use.
type Observer struct {
	decisions     metric.Int64Counter
	wait          metric.Float64Histogram
	cancellations metric.Int64Counter
	upstream      metric.Int64Counter
	pauses        metric.Int64Counter
	storeErrors   metric.Int64Counter
	fallbacks     metric.Int64Counter
	leases        metric.Int64UpDownCounter
	acquisitions  metric.Int64Counter
	releases      metric.Int64Counter
	expirations   metric.Int64Counter
	debt          metric.Int64Counter
	refund        metric.Int64Counter
	malformed     metric.Int64Counter
	appointment   metric.Float64Histogram
	calls         metric.Int64Histogram
}

var _ throttle.Observer = (*Observer)(nil)

// An Option configures New.
type Option interface{ apply(*settings) error }

type optionFunc func(*settings) error

func (f optionFunc) apply(s *settings) error { return f(s) }

type settings struct {
	mp metric.MeterProvider
}

// WithMeterProvider sets the MeterProvider the metrics are recorded with.
// The default is the global one (otel.GetMeterProvider), as otelhttp's.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(s *settings) error {
		if mp == nil {
			return errors.New("otel: WithMeterProvider(nil)")
		}
		s.mp = mp
		return nil
	})
}

// New returns an Observer. It fails on a bad option or when the meter
// refuses an instrument.
func New(opts ...Option) (*Observer, error) {
	var s settings
	for _, o := range opts {
		if err := o.apply(&s); err != nil {
			return nil, err
		}
	}
	if s.mp == nil {
		s.mp = otel.GetMeterProvider()
	}
	m := s.mp.Meter(ScopeName)
	var o Observer
	var errs [16]error
	o.decisions, errs[0] = m.Int64Counter("throttle.decisions", metric.WithUnit("{decision}"),
		metric.WithDescription("Decisions of the quota store (or the local limiter), by outcome and deciding limit."))
	o.wait, errs[1] = m.Float64Histogram("throttle.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("The wait each admitted request was given for its slot."),
		metric.WithExplicitBucketBoundaries(DefaultBuckets...))
	o.cancellations, errs[2] = m.Int64Counter("throttle.cancellations", metric.WithUnit("{cancellation}"),
		metric.WithDescription("Requests whose context ended while they waited for their slot."))
	o.upstream, errs[3] = m.Int64Counter("throttle.upstream.throttles", metric.WithUnit("{throttle}"),
		metric.WithDescription("Responses in which the vendor said it throttled the request."))
	o.pauses, errs[4] = m.Int64Counter("throttle.pauses", metric.WithUnit("{pause}"),
		metric.WithDescription("Scopes paused fleet-wide after a vendor throttle."))
	o.storeErrors, errs[5] = m.Int64Counter("throttle.store.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Failed calls to the quota store."))
	o.fallbacks, errs[6] = m.Int64Counter("throttle.store.fallbacks", metric.WithUnit("{fallback}"),
		metric.WithDescription("Requests decided by the provider's on_store_error policy while the store was failing."))
	o.leases, errs[7] = m.Int64UpDownCounter("throttle.lease.count", metric.WithUnit("{lease}"),
		metric.WithDescription("Concurrency leases this process's requests hold."))
	o.acquisitions, errs[8] = m.Int64Counter("throttle.lease.acquisitions", metric.WithUnit("{lease}"),
		metric.WithDescription("Requests that took their concurrency leases."))
	o.releases, errs[9] = m.Int64Counter("throttle.lease.releases", metric.WithUnit("{lease}"),
		metric.WithDescription("Requests that gave their concurrency leases back."))
	o.expirations, errs[10] = m.Int64Counter("throttle.lease.expirations", metric.WithUnit("{lease}"),
		metric.WithDescription("Requests whose concurrency leases were left to expire, as far as this process knows."))
	o.debt, errs[11] = m.Int64Counter("throttle.settle.debt", metric.WithUnit("{cost}"),
		metric.WithDescription("Cost charged beyond the reserved estimates when the actual costs were settled."))
	o.refund, errs[12] = m.Int64Counter("throttle.settle.refund", metric.WithUnit("{cost}"),
		metric.WithDescription("Cost of reserved estimates left unused and asked back when the actual costs were settled."))
	o.malformed, errs[13] = m.Int64Counter("throttle.settle.malformed", metric.WithUnit("{figure}"),
		metric.WithDescription("Actual costs reported above the limit's rate, not settled: the estimates stayed charged."))
	o.appointment, errs[14] = m.Float64Histogram("throttle.appointment.duration", metric.WithUnit("s"),
		metric.WithDescription("The wait for each appointment in a fair limit that a request over its tenant's share was given."),
		metric.WithExplicitBucketBoundaries(DefaultBuckets...))
	o.calls, errs[15] = m.Int64Histogram("throttle.request.decisions", metric.WithUnit("{decision}"),
		metric.WithDescription("The decisions (store calls) each admitted or refused request took."),
		metric.WithExplicitBucketBoundaries(DecisionBuckets...))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return &o, nil
}

// Observe records e.
func (o *Observer) Observe(ctx context.Context, e throttle.Event) {
	if ctx.Err() != nil {
		// The SDK drops measurements made with a done context, but what
		// happened to a request whose context ended (a cancelled wait
		// above all) must still count. The values (the span) stay.
		ctx = context.WithoutCancel(ctx)
	}
	switch e.Kind {
	case throttle.Decided:
		o.decisions.Add(ctx, 1, byLimit(e, OutcomeKey.String(OutcomeAdmitted), mode(e.Shadow)))
		o.wait.Record(ctx, e.Wait.Seconds(), byLimit(e))
		o.recordCalls(ctx, e)
	case throttle.Refused:
		o.decisions.Add(ctx, 1, byLimit(e, OutcomeKey.String(OutcomeRefused), mode(e.Shadow)))
		o.recordCalls(ctx, e)
	case throttle.Deferred:
		o.decisions.Add(ctx, 1, byLimit(e, OutcomeKey.String(OutcomeDeferred), mode(e.Shadow)))
		if !e.Shadow { // a deferral in shadow mode is not waited for
			o.appointment.Record(ctx, e.Wait.Seconds(), byLimit(e))
		}
	case throttle.Waited:
		waitSpan(ctx, e, OutcomeAdmitted)
	case throttle.Cancelled:
		o.cancellations.Add(ctx, 1, byLimit(e))
		waitSpan(ctx, e, OutcomeCancelled)
	case throttle.UpstreamThrottled:
		o.upstream.Add(ctx, 1, metric.WithAttributes(ProviderKey.String(e.Provider), StatusCodeKey.Int(e.Status)))
	case throttle.Paused:
		o.pauses.Add(ctx, 1, metric.WithAttributes(ProviderKey.String(e.Provider)))
	case throttle.StoreError:
		o.storeErrors.Add(ctx, 1, metric.WithAttributes(ProviderKey.String(e.Provider)))
	case throttle.FellBack:
		o.fallbacks.Add(ctx, 1, metric.WithAttributes(ProviderKey.String(e.Provider), OnStoreErrorKey.String(e.Policy.String())))
	case throttle.Leased:
		o.leases.Add(ctx, 1, metric.WithAttributes(ProviderKey.String(e.Provider)))
		o.acquisitions.Add(ctx, 1, metric.WithAttributes(ProviderKey.String(e.Provider)))
	case throttle.Released:
		o.leases.Add(ctx, -1, metric.WithAttributes(ProviderKey.String(e.Provider)))
		o.releases.Add(ctx, 1, metric.WithAttributes(ProviderKey.String(e.Provider)))
	case throttle.LeaseExpired:
		o.leases.Add(ctx, -1, metric.WithAttributes(ProviderKey.String(e.Provider)))
		o.expirations.Add(ctx, 1, metric.WithAttributes(ProviderKey.String(e.Provider)))
	case throttle.Settled:
		if e.Delta > 0 {
			o.debt.Add(ctx, e.Delta, byLimit(e))
		} else if e.Delta < 0 {
			o.refund.Add(ctx, -e.Delta, byLimit(e))
		}
	case throttle.SettleMalformed:
		o.malformed.Add(ctx, 1, byLimit(e))
		// Kinds the transport reports later get an instrument of their
		// own here and a line in the package doc; until then they are
		// not recorded.
	}
}

// recordCalls records the decisions a request took, for an event that
// says (an Observer fed by hand may leave Calls zero).
func (o *Observer) recordCalls(ctx context.Context, e throttle.Event) {
	if e.Calls > 0 {
		attrs := append(make([]attribute.KeyValue, 0, 2), ProviderKey.String(e.Provider))
		if e.Class != "" {
			attrs = append(attrs, ClassKey.String(e.Class))
		}
		o.calls.Record(ctx, int64(e.Calls), metric.WithAttributes(attrs...))
	}
}

// byLimit returns the attributes of e's provider, of the limit that
// decided and of the request's priority class (each absent, not empty,
// when there is none: the conventions' "conditionally required") and
// extra.
func byLimit(e throttle.Event, extra ...attribute.KeyValue) metric.MeasurementOption {
	attrs := append(make([]attribute.KeyValue, 0, 5), ProviderKey.String(e.Provider))
	if e.Limit != "" {
		attrs = append(attrs, LimitKey.String(e.Limit))
	}
	if e.Class != "" {
		attrs = append(attrs, ClassKey.String(e.Class))
	}
	return metric.WithAttributes(append(attrs, extra...)...)
}

func mode(shadow bool) attribute.KeyValue {
	if shadow {
		return ModeKey.String("shadow")
	}
	return ModeKey.String("enforce")
}

// waitSpan records the wait that just ended as a child of the span in ctx,
// when that span is recording: with its TracerProvider, from Wait ago to
// now.
func waitSpan(ctx context.Context, e throttle.Event, outcome string) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return
	}
	attrs := append(make([]attribute.KeyValue, 0, 4), ProviderKey.String(e.Provider))
	if e.Limit != "" {
		attrs = append(attrs, LimitKey.String(e.Limit))
	}
	if e.Class != "" {
		attrs = append(attrs, ClassKey.String(e.Class))
	}
	end := time.Now()
	_, span := parent.TracerProvider().Tracer(ScopeName).Start(ctx, "throttle.wait",
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(end.Add(-e.Wait)),
		trace.WithAttributes(append(attrs, OutcomeKey.String(outcome))...))
	if outcome == OutcomeCancelled {
		span.SetStatus(codes.Error, "the request's context ended while it waited for its slot")
	}
	span.End(trace.WithTimestamp(end))
}
