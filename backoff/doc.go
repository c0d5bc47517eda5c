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
//
// # Retry policy
//
// [Policy] provides CheckRetry and Backoff methods with the signatures of
// retryablehttp.CheckRetry and retryablehttp.Backoff, and
// [PassthroughErrorHandler] makes an exhausted retry loop return the last
// response instead of an error. A transport that sends through
// retryablehttp should record the request in its context with
// [WithRequest], since CheckRetry is not given the request; [Retryable]
// and [FitsDeadline] are the rules the policy applies, exported for the
// transport's own use.
//
// Headers and bodies come from the network and are untrusted: nothing in
// this package panics on any input, and Classify reads at most
// [MaxBodyPeek] bytes of a body, which it gives back to the caller whole.
package backoff
