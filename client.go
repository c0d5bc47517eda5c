package throttle

import (
	"context"
	"errors"
	"net/http"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/providers"
)

// NewClient returns an *http.Client for any vendor SDK that accepts one:
// hashicorp/go-retryablehttp retries around a Transport, so that every
// attempt, retries included, waits for its own slot. Throttled responses
// (by the provider's signals) are retried for any method after the
// vendor's delay; connection errors and 5xx only for idempotent requests
// or ones with an Idempotency-Key. No retry sleeps past the request's
// context deadline. When retries run out the caller gets the last
// response, not an error. A refusal by the throttle itself (ErrLimited,
// ErrStoreUnavailable) is returned at once, never retried.
//
// The options are New's, plus WithRetries.
func NewClient(opts ...Option) (*http.Client, error) {
	t, err := New(opts...)
	if err != nil {
		return nil, err
	}
	return t.Client(), nil
}

// Client returns an *http.Client that retries around t, as NewClient does.
func (t *Transport) Client() *http.Client {
	policy := &backoff.Policy{
		SignalsFor: t.signalsFor,
		Now:        t.clock.Now,
	}
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: t}
	rc.Logger = nil
	rc.RetryMax = t.retry.max
	rc.RetryWaitMin, rc.RetryWaitMax = t.retry.min, t.retry.cap
	rc.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if errors.Is(err, ErrLimited) || errors.Is(err, ErrStoreUnavailable) {
			return false, nil
		}
		return policy.CheckRetry(ctx, resp, err)
	}
	rc.Backoff = policy.Backoff
	rc.ErrorHandler = backoff.PassthroughErrorHandler
	return &http.Client{Transport: retrying{&retryablehttp.RoundTripper{Client: rc}}}
}

// retrying hands each request to go-retryablehttp with the request in its
// context, where the retry policy reads the method and Idempotency-Key
// (retryablehttp gives CheckRetry no request when there is no response).
type retrying struct{ rt *retryablehttp.RoundTripper }

func (r retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	return r.rt.RoundTrip(req.WithContext(backoff.WithRequest(req.Context(), req)))
}

// signalsFor returns the throttling signals of req's provider, or nil.
func (t *Transport) signalsFor(req *http.Request) *backoff.Signals {
	res, _, _ := t.registry.Resolve(req, providers.Input{})
	if res.Provider == nil {
		return nil
	}
	return &res.Provider.Signals
}
