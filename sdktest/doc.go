// Package sdktest drives the official Go SDKs of Stripe, GitHub, OpenAI
// and Anthropic through throttle.NewClient, against fake vendors that
// answer with each vendor's real throttling responses, and checks the
// recipes of docs/sdks.md: a refusal by the throttle reaches the caller
// once, as a *throttle.LimitError under the SDK's error; a vendor's 429 is
// retried by one layer, a bounded number of times; and how many requests
// the vendor saw.
//
// The SDKs keep their real base URLs, so the shipped catalog
// (config/providers.yaml) decides, with its real signals; the transport
// under the throttle (throttle.WithBase) sends each request to the fake
// vendor instead and counts it.
//
// It is a module of its own so that the SDKs stay out of the library's
// go.mod. Only its tests do anything; make test runs them.
package sdktest
