// Package otel exports what a throttle.Transport does as OpenTelemetry
// metrics and spans. It is a module of its own
// (github.com/fleetquota/throttle/otel), so that programs that do not use
// OpenTelemetry do not depend on it: the throttle module's go.mod names no
// OpenTelemetry package.
//
//	obs, err := otel.New() // the global MeterProvider; WithMeterProvider to choose
//	if err != nil { ... }
//	client, err := throttle.NewClient(throttle.WithObserver(obs), ...)
//
// The package is named after its directory; a program that also imports
// go.opentelemetry.io/otel imports it under another name, e.g.
// throttleotel.
//
// # Versions
//
// The module requires go.opentelemetry.io/otel, otel/metric and
// otel/trace v1.20.0 (and, for its tests only, otel/sdk and
// otel/sdk/metric v1.20.0): the lowest release this code needs, the first
// with metric.WithExplicitBucketBoundaries, which the semantic conventions
// ask of duration histograms. Any later v1 release works; the module never
// moves a program to a newer OpenTelemetry than the program itself asks
// for.
//
// # Metrics
//
// Names, units and attributes follow the OpenTelemetry semantic
// conventions' naming rules: dotted lowercase names under the throttle
// namespace, no unit in the name, seconds for durations, a counter's unit
// the annotation of what it counts, and ASP.NET Core's rate-limiting
// metrics (aspnetcore.rate_limiting.*) as the prior art for a decision
// counter and a wait histogram. The instrumentation scope is
// "github.com/fleetquota/throttle/otel".
//
//	throttle.decisions        counter {decision}      every decision of the store (or the local limiter)
//	    throttle.provider.name, throttle.outcome (admitted, refused, deferred: given an
//	    appointment in a fair limit, asked again then),
//	    throttle.limit.name (the limit that made the request wait or refused it; absent when none did),
//	    throttle.mode (enforce, shadow: a shadow refusal was sent anyway),
//	    throttle.priority.class (the request's priority class; absent when the provider has none)
//	throttle.wait.duration    histogram s             the wait each admitted request was given,
//	                                                  0 when it went at once (in shadow mode, the
//	                                                  wait it would have had)
//	    throttle.provider.name, throttle.limit.name (when a limit made it wait),
//	    throttle.priority.class
//	throttle.appointment.duration histogram s         each wait for an appointment in a fair limit
//	                                                  (a request over its tenant's share, deferred;
//	                                                  none in shadow mode)
//	    throttle.provider.name, throttle.limit.name (the fair limit), throttle.priority.class
//	throttle.request.decisions histogram {decision}   the decisions (store calls) each admitted or
//	                                                  refused request took: 1 when decided at once,
//	                                                  more after appointments, lease waits, pauses
//	    throttle.provider.name, throttle.priority.class
//	throttle.cancellations    counter {cancellation}  requests whose context ended while they
//	                                                  waited; their slots were given back
//	    throttle.provider.name, throttle.limit.name, throttle.priority.class
//	throttle.upstream.throttles counter {throttle}    responses in which the vendor said it
//	                                                  throttled the request
//	    throttle.provider.name, http.response.status_code
//	throttle.pauses           counter {pause}         scopes paused fleet-wide after a vendor throttle
//	    throttle.provider.name
//	throttle.store.errors     counter {error}         failed calls to the quota store
//	    throttle.provider.name
//	throttle.store.fallbacks  counter {fallback}      requests decided by on_store_error while the
//	                                                  store was failing
//	    throttle.provider.name, throttle.on_store_error (fail_open, local)
//	throttle.lease.count      updowncounter {lease}   concurrency leases this process's requests
//	                                                  hold (acquisitions less releases and expirations)
//	    throttle.provider.name
//	throttle.lease.acquisitions counter {lease}       requests that took their leases
//	throttle.lease.releases   counter {lease}         requests that gave them back (body read or
//	                                                  closed, round trip failed)
//	throttle.lease.expirations counter {lease}        requests whose leases were left to expire, as
//	                                                  far as this process knows (a body neither read
//	                                                  nor closed for a TTL, a failed release; a
//	                                                  process that dies reports nothing)
//	    throttle.provider.name
//	throttle.settle.debt      counter {cost}          cost charged beyond the reserved estimates
//	                                                  when actual costs were settled (a debt the next
//	                                                  requests wait out once past the limit)
//	throttle.settle.refund    counter {cost}          cost of estimates left unused and asked back
//	                                                  (the store gives it back only where safe)
//	throttle.settle.malformed counter {figure}        actual costs reported above the limit's rate,
//	                                                  not settled (the estimates stayed charged)
//	    throttle.provider.name, throttle.limit.name (the limit settled), throttle.priority.class
//
// throttle.lease.count follows the conventions' count of things in use
// (db.client.connection.count): an UpDownCounter per process, whose sum
// over the fleet is the leases held in all. Costs are in the limit's own
// units (a model API's tokens), "{cost}" as the conventions annotate a
// count of things with no unit.
//
// Refusals by limit are throttle.decisions with throttle.outcome=refused,
// by throttle.limit.name: one instrument, so that the sum over its
// attributes is every decision, as the conventions ask. Every attribute
// takes bounded values: provider, limit and class names come from the
// configuration (a class is one its provider declares, at most
// quota.MaxClasses). Scope values (tenant ids) are never attributes. The
// histogram advises DefaultBuckets as its bucket boundaries; a View in the
// MeterProvider changes them.
//
// Attributes are named as the conventions name properties of a system
// ({area}.provider.name, as gen_ai.provider.name names the vendor of a
// model API; file.owner.name rather than file.owner), with the
// throttle's own under the throttle namespace; the HTTP status is the
// conventions' http.response.status_code.
//
// # Spans
//
// A request that waits for its slot gets a child span "throttle.wait"
// (kind internal) of the span in its context — the caller's span, or the
// HTTP client span when otelhttp wraps the transport — from the start of
// the wait to its end, with throttle.provider.name, throttle.limit.name
// (the limit that made it wait), throttle.priority.class (when the
// provider has classes) and throttle.outcome (admitted, or
// cancelled when the request's context ended first, the span's status
// then being Error). A child span rather than a span event "throttle.wait"
// on the caller's span, because the wait is an interval, and a span is
// the conventions' record of one: its start and end show in a trace view
// where the time went before the request was sent, with no duration
// attribute to read. And OpenTelemetry is deprecating the Span Event API
// (OTEP 4430): new instrumentation is to emit events as logs, which would
// need the Logs API, still unstable in Go.
//
// The span is started only when the context's span is recording, with
// that span's TracerProvider: the throttle never starts a trace of its
// own, and needs no TracerProvider option. Requests that go at once get
// no span: there is nothing to show.
package otel
