// Package backoff reads the signals an upstream API uses to say "you are
// throttled" and turns them into a retry policy for
// github.com/hashicorp/go-retryablehttp.
//
// A [Signals] value describes one vendor: which responses mean throttled
// (a 429 by default; GitHub and Salesforce also use 403), which look
// throttled but must not be retried (OpenAI's 429 "insufficient_quota"),
// and which headers carry the delay. [Classify] applies it to a response.
// The delay parsers (Retry-After, retry-after-ms, X-RateLimit-Reset,
// X-RateLimit-Reset-After, the IETF RateLimit fields, RFC 3339 timestamps
// and Go-like durations) all take the current time as a parameter and
// never read the wall clock themselves. Every vendor-supplied delay is
// capped at [Signals.MaxDelay].
//
// [Policy] provides CheckRetry and Backoff functions with the signatures
// of retryablehttp.CheckRetry and retryablehttp.Backoff, and
// [PassthroughErrorHandler] makes an exhausted retry loop return the last
// response instead of an error.
//
// Headers and bodies come from the network and are untrusted: nothing in
// this package panics on any input.
package backoff
