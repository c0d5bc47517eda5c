// Package backoff reads the signals an upstream API uses to say "you are
// throttled" and turns them into a retry policy for
// github.com/hashicorp/go-retryablehttp. It depends on the standard
// library and go-retryablehttp only.
//
// # Signals and Classify
//
// A [Signals] value describes one vendor: which responses mean throttled
// (a 429 by default; GitHub and Salesforce also use 403), which look
// throttled but must not be retried (OpenAI's 429 "insufficient_quota"),
// which extra headers carry the delay, and a cap on any delay. Its zero
// value is the common case. [Classify] applies it to a response and
// returns a [Verdict]: throttled or not, retryable or not, and the
// vendor's delay with the header it came from.
//
// The delay parsers behind Classify read Retry-After (delay-seconds,
// decimals, all three HTTP-date forms), retry-after-ms,
// X-RateLimit-Reset-After, X-RateLimit-Reset (a Unix time or seconds from
// now, told apart by size), the IETF RateLimit and RateLimit-Policy fields
// (draft -10/-11 structured fields and the older forms), RFC 3339
// timestamps and Go-like durations ("6m0s"). They take the current time
// as a parameter and never read the clock. A value that is malformed,
// negative, zero or in the past gives no delay; a huge one saturates and
// is then capped at [Signals.MaxDelay] ([DefaultMaxDelay] by default).
// The exception is a Retry-After or retry-after-ms of zero, the vendor's
// "retry now": a zero [Verdict.Delay] with its [Verdict.Source] set.
//
// # Retry policy
//
// [Policy] provides CheckRetry and Backoff methods with the signatures of
// retryablehttp.CheckRetry and retryablehttp.Backoff, and
// [PassthroughErrorHandler] makes an exhausted retry loop return the last
// response instead of an error. A transport that sends through
// retryablehttp should record the request in its context with
// [WithRequest], since CheckRetry is not given the request.
//
// Headers and bodies come from the network and are untrusted: nothing in
// this package panics on any input, and Classify reads at most
// [MaxBodyPeek] bytes of a body, which it gives back to the caller whole.
//
// # Vendor counters
//
// Most vendors say on every response, not only on a 429, how much of a
// quota is left and when it is full again. [ReadCounters] reads that into
// one [Reading] per counter (its name, Limit, Remaining, Reset from now
// and Window, each with a flag saying whether the response gave it), for
// a fleet to reconcile its own state with the vendor's. A [Format] names
// how a vendor writes its counters: "x-ratelimit" (GitHub, Intercom,
// SendGrid), "hubspot", "zendesk", "ietf" (the RateLimit and
// RateLimit-Policy fields of every draft), "openai", "anthropic",
// "shopify", "shopify-graphql" (the body's extensions.cost), "discord" and
// "salesforce"; [ParseFormat] reads the names. The Format's doc lists the
// vendor documentation each reader follows.
//
// A malformed or contradictory field becomes an error wrapping
// [ErrMalformed] (the field is left out) or [ErrInconsistent] (the most
// restrictive value is kept), and never stops the other fields from being
// read. Counts are rounded to the restrictive side, repeated values give
// the most restrictive one, a Remaining above the Limit is lowered to it,
// a reset already past reads as 0, and counts of 10^15 or more and resets
// more than a year ahead are rejected rather than saturated.
//
// # Bodies and the vendor's word on retrying
//
// [Signals.Body] opts a vendor in to having its 429 bodies read:
// with [BodyDiscord] a throttled 429's retry_after is the delay, before
// any header, and its global flag sets [Verdict.Global] (the account's
// global limit, which a transport pauses provider-wide); with
// [BodyOpenAI] a billing stop is [Verdict.Ignored] and
// [Verdict.QuotaExhausted], never retried nor paused on. A body that
// cannot be read is [Verdict.Err] and the headers decide. For every
// vendor, Stripe-Should-Retry and X-Should-Retry overrule Policy both
// ways: true retries any error response, false
// retries nothing.
package backoff
