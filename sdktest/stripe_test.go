package sdktest

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stripe/stripe-go/v85"
)

// stripe-go (v85) retries, MaxNetworkRetries times (default 2, after
// 0.5 s, then 1 s with jitter), every error of http.Client.Do that is not
// a redirect loop, a bad scheme or an unknown certificate authority: a
// refusal by the throttle is one. It retries responses whose Stripe error
// says so (a 429 lock_timeout), 409s and 5xx, and follows
// Stripe-Should-Retry only for responses it did not parse as an error.
// A rate_limit 429 it never retries.

func stripeCustomer(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_ok")
	fmt.Fprint(w, `{"id":"cus_1","object":"customer"}`)
}

// stripeRateLimited is Stripe's answer when one of its limiters refuses a
// request: 429, the limiter in Stripe-Rate-Limited-Reason, no Retry-After,
// and error code rate_limit.
func stripeRateLimited(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Request-Id", "req_429")
	h.Set("Stripe-Rate-Limited-Reason", "global-rate")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprint(w, `{"error":{"code":"rate_limit","doc_url":"https://stripe.com/docs/error-codes/rate-limit",`+
		`"message":"Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.",`+
		`"type":"invalid_request_error"}}`)
}

// stripeLockTimeout is Stripe's 429 for contention on one object: not a
// rate limit, safe to retry.
func stripeLockTimeout(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Request-Id", "req_lock")
	h.Set("Stripe-Should-Retry", "true")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprint(w, `{"error":{"code":"lock_timeout","doc_url":"https://stripe.com/docs/error-codes/lock-timeout",`+
		`"message":"This object cannot be accessed right now because another API request or Stripe process is currently accessing it.",`+
		`"type":"invalid_request_error"}}`)
}

// stripeClient wires hc into stripe-go as docs/sdks.md does. retries nil
// keeps stripe-go's default; its sleeps between retries are turned off so
// that the tests do not wait for them.
func stripeClient(hc *http.Client, retries *int64) *stripe.Client {
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient:        hc,
		MaxNetworkRetries: retries,
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	backends.API.(*stripe.BackendImplementation).SetNetworkRetriesSleep(false)
	return stripe.NewClient("sk_test_sdktest", stripe.WithBackends(backends))
}

func createCustomer(sc *stripe.Client) error {
	_, err := sc.V1Customers.Create(failFast(), &stripe.CustomerCreateParams{Email: stripe.String("a@example.com")})
	return err
}

func TestStripeRefusalReachesCallerOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, stripeCustomer), tinyLimits)
	sc := stripeClient(r.client, stripe.Int64(0))
	if err := createCustomer(sc); err != nil {
		t.Fatalf("first request: %v", err)
	}
	err := createCustomer(sc)
	refusal(t, err)
	var se *stripe.Error
	if errors.As(err, &se) {
		t.Errorf("a refusal came back as a *stripe.Error: %v", se)
	}
	r.want(t, counts{Admitted: 1, Refused: 1, Sent: 1, Seen: 1})
}

// With its default retries stripe-go asks the throttle again after a
// refusal: the reason docs/sdks.md sets MaxNetworkRetries to 0.
func TestStripeOwnRetriesResendRefusals(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, stripeCustomer), tinyLimits)
	sc := stripeClient(r.client, nil)
	if err := createCustomer(sc); err != nil {
		t.Fatalf("first request: %v", err)
	}
	refusal(t, createCustomer(sc))
	r.want(t, counts{Admitted: 1, Refused: 1 + stripe.DefaultMaxNetworkRetries, Sent: 1, Seen: 1})
}

// The throttle's layer retries Stripe's 429 once it has paused the
// account (DefaultPause: Stripe names no delay); the call succeeds.
func TestStripe429RetriedByThrottle(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, stripeRateLimited, stripeCustomer), nil, fastRetries)
	sc := stripeClient(r.client, stripe.Int64(0))
	c, err := sc.V1Customers.Create(t.Context(), &stripe.CustomerCreateParams{Email: stripe.String("a@example.com")})
	if err != nil || c.ID != "cus_1" {
		t.Fatalf("got %v, %v; want cus_1", c, err)
	}
	r.want(t, counts{Admitted: 2, Throttled: 1, Sent: 2, Seen: 2})
}

// When the throttle's retries run out, the caller gets Stripe's own
// rate_limit error, after 1 + retries requests.
func TestStripe429ReachesCallerAsStripeError(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, stripeRateLimited), nil, fastRetries)
	sc := stripeClient(r.client, stripe.Int64(0))
	_, err := sc.V1Customers.Create(t.Context(), &stripe.CustomerCreateParams{Email: stripe.String("a@example.com")})
	var se *stripe.Error
	if !errors.As(err, &se) || se.HTTPStatusCode != http.StatusTooManyRequests || se.Code != stripe.ErrorCodeRateLimit {
		t.Fatalf("got %v, want a *stripe.Error 429 rate_limit", err)
	}
	r.want(t, counts{Admitted: 2, Throttled: 2, Sent: 2, Seen: 2})
}

// A lock_timeout 429 is not a rate limit: the catalog ignores it, so the
// throttle neither pauses nor retries it, and with stripe-go's retries
// off nobody retries it. The caller gets the *stripe.Error.
func TestStripeLockTimeoutIsNotRetried(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, stripeLockTimeout, stripeCustomer), nil, fastRetries)
	sc := stripeClient(r.client, stripe.Int64(0))
	_, err := sc.V1Customers.Create(t.Context(), &stripe.CustomerCreateParams{Email: stripe.String("a@example.com")})
	var se *stripe.Error
	if !errors.As(err, &se) || se.Code != stripe.ErrorCodeLockTimeout {
		t.Fatalf("got %v, want a *stripe.Error lock_timeout", err)
	}
	r.want(t, counts{Admitted: 1, Sent: 1, Seen: 1})
}
