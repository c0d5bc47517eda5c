// Package throttle keeps a fleet of processes inside the published quotas
// of the third-party APIs it calls. Its [Transport] is a
// [net/http.RoundTripper], so any vendor SDK that accepts an *http.Client
// is throttled without changes.
//
// For each request the transport finds the provider that claims the
// request's host and the stack of limits that applies (a daily quota, a
// per-second peak, a per-tenant limit, a route's limit), asks the store in
// one atomic round trip for the earliest slot that every limit of the
// stack admits, reserves it, and waits for it, or refuses the request at
// once with a [*LimitError] when the slot is too far away. A request that
// is refused is never sent and is charged nothing. When a vendor answers
// that it throttled a request anyway (a 429, or its own signal), the
// scope is paused in the store for the vendor's delay, so that the whole
// fleet holds back, not only the process that heard it. Requests to hosts
// no provider claims pass straight through.
//
// # Use
//
// [NewClient] returns an *http.Client with retries around the transport;
// [New] returns the bare [Transport]. Neither has anything to close.
//
//	store, err := redisstore.New(rdb, redisstore.Options{}) // shared by the fleet
//	client, err := throttle.NewClient(throttle.WithStore(store))
//	gh := github.NewClient(client)
//
// Without [WithStore] the state lives in this process alone (a
// quota.MemoryStore). Without [WithRegistry] the shipped catalog applies
// (config/providers.yaml: the published limits of common vendors); a
// configuration of your own is loaded with package providers and passed
// as WithRegistry(providers.NewRegistry(cfg)). docs/configuration.md
// describes the file.
//
// # Per-request values
//
// The request's context carries what its limits need to know:
// [WithBusiness] (the tenant, for limits scoped by business and for the
// fair share of a limit with fair: tenant), [WithLabel],
// [WithCost] and [WithLimitCost] (what the request counts for, e.g. a
// model call's tokens), [WithMaxWait] (a shorter wait than the provider's
// max_wait) and [WithSettle] (a [Settler] that reads the real cost from
// the response, such as [OpenAIUsage], [AnthropicUsage] or
// [ShopifyQueryCost], so that an estimate reserved up front is corrected; a
// provider's settle field configures the same settlers without code).
//
// # Errors
//
// A refusal is a [*LimitError] naming the provider, the limit that
// decided, the scope and when to retry; it matches [ErrLimited]. When the
// store fails and the provider fails closed, the error matches
// [ErrStoreUnavailable]. The client of NewClient reports a vendor's
// billing stop (OpenAI's insufficient_quota, with signals body: openai)
// as a [*QuotaError] matching [ErrQuotaExhausted].
// The client of NewClient never retries the throttle's own refusals; it
// retries throttled responses after the vendor's delay, and transport
// errors and 5xx for idempotent requests only, each attempt waiting for a
// slot of its own (see [WithRetries] and [WithRetryBodyLimit]).
//
// # Observing
//
// An [Observer] is told every [Event]: decisions, waits, refusals,
// deferrals to an appointment in a fair limit (which the transport keeps:
// it waits and asks again), vendor throttles, pauses, store errors and
// fallbacks. [SlogObserver] logs the
// ones that are not routine; package prom exports Prometheus metrics and
// module github.com/fleetquota/throttle/otel OpenTelemetry metrics and
// spans. Each [WithObserver] adds one.
//
// docs/operations.md tells how to run a fleet with it (Redis, failures,
// deploys), and docs/decisions.md why it works the way it does.
package throttle
