package throttle

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// DefaultRetryBodyLimit is the largest request body NewClient retries by
// default: 1 MiB holds the JSON of an ordinary API call, while a larger
// body is an upload, where each retry sends all of it again and the
// vendor's resumable upload, if it has one, is the better unit to retry.
const DefaultRetryBodyLimit = 1 << 20

// retrySettings are NewClient's retries (WithRetries, WithRetryBodyLimit).
type retrySettings struct {
	max      int
	min, cap time.Duration
	// bodyLimit is the largest request body that is retried.
	bodyLimit int64
}

// The backoff of NewClient's retries where the vendor names no delay,
// without WithRetries: exponential from DefaultRetryWaitMin, capped at
// DefaultRetryWaitMax. The proxy (cmd/throttle) retries with them too.
const (
	DefaultRetryWaitMin = 500 * time.Millisecond
	DefaultRetryWaitMax = 30 * time.Second
)

// defaultRetry is what NewClient retries without options.
var defaultRetry = retrySettings{4, DefaultRetryWaitMin, DefaultRetryWaitMax, DefaultRetryBodyLimit}

// retryClient returns an *http.Client that retries around rt, a Transport
// of the providers of reg whose clock is clock, as s says: the vendors'
// signals decide what is retried and after how long.
func retryClient(rt http.RoundTripper, reg *providers.Registry, clock quota.Clock, s retrySettings) *http.Client {
	policy := &backoff.Policy{
		SignalsFor: func(req *http.Request) *backoff.Signals { return signalsFor(reg, req) },
		Now:        clock.Now,
	}
	rc := retryablehttp.NewClient()
	// The client returned below follows redirects as its CheckRedirect
	// says; this inner one must hand every 3xx back to it, or a caller
	// who turned redirects off would still get them followed.
	rc.HTTPClient = &http.Client{Transport: rt, CheckRedirect: useLastResponse}
	rc.Logger = nil
	rc.RetryMax = s.max
	rc.RetryWaitMin, rc.RetryWaitMax = s.min, s.cap
	rc.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if errors.Is(err, ErrLimited) || errors.Is(err, ErrStoreUnavailable) {
			return false, nil
		}
		return policy.CheckRetry(ctx, resp, err)
	}
	rc.Backoff = policy.Backoff
	rc.ErrorHandler = backoff.PassthroughErrorHandler
	return &http.Client{Transport: retrying{rc, s.bodyLimit, reg, clock}}
}

// useLastResponse hands every redirect back to the caller's client.
func useLastResponse(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// retrying hands each request whose body it may retry to go-retryablehttp,
// and any other, once, to the http.Client around the Transport that
// retryablehttp sends each attempt with (so redirects go the same way).
//
// go-retryablehttp's own RoundTripper reads every body into memory
// (FromRequest: io.ReadAll), so retrying builds its requests itself: the
// body is a ReaderFunc over GetBody, which retryablehttp calls before each
// attempt (and once more to look for a length) and never buffers.
type retrying struct {
	client    *retryablehttp.Client
	bodyLimit int64
	// registry and clock read a billing stop (quotaExhausted).
	registry *providers.Registry
	clock    quota.Clock
}

func (r retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.roundTrip(req)
	if err != nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		return resp, err
	}
	if qe := quotaExhausted(r.registry, r.clock, resp); qe != nil {
		return nil, qe
	}
	return resp, nil
}

func (r retrying) roundTrip(req *http.Request) (*http.Response, error) {
	hasBody := req.Body != nil && req.Body != http.NoBody
	size := req.ContentLength
	if hasBody && req.GetBody != nil && size <= 0 {
		size = copyLength(req.GetBody, r.bodyLimit)
	}
	if hasBody && (req.GetBody == nil || size < 0 || size > r.bodyLimit) {
		return unwrap(r.client.HTTPClient.Do(req))
	}
	// The request goes in its context, where the retry policy reads the
	// method and Idempotency-Key (retryablehttp gives CheckRetry no
	// request when there is no response). The copy also keeps
	// retryablehttp from setting the caller's request's Body.
	out := req.WithContext(backoff.WithRequest(req.Context(), req))
	if hasBody {
		// Every attempt sends a copy from GetBody; this one goes unread,
		// and a RoundTripper closes the body it is given.
		_ = req.Body.Close()
		out.Body = nil
	}
	rreq, err := retryablehttp.FromRequest(out)
	if err != nil {
		return nil, err
	}
	if hasBody {
		if err := rreq.SetBody(retryablehttp.ReaderFunc(func() (io.Reader, error) { return req.GetBody() })); err != nil {
			return nil, err
		}
		// SetBody takes the length from a Len method, which GetBody's
		// ReadCloser hides; without the caller's, the body would go
		// chunked.
		rreq.ContentLength, rreq.GetBody = size, req.GetBody
	}
	return unwrap(r.client.Do(rreq))
}

// copyLength returns the length of a copy of a body from getBody when the
// request does not say it (stripe-go sets GetBody but no ContentLength), or
// -1 when it is longer than limit or cannot be read: it streams at most
// limit+1 bytes of the copy to io.Discard, so nothing is buffered.
func copyLength(getBody func() (io.ReadCloser, error), limit int64) int64 {
	rc, err := getBody()
	if err != nil {
		return -1
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(rc, limit+1))
	if err != nil || n > limit {
		return -1
	}
	return n
}

// unwrap returns an http.Client's error without the *url.Error around it,
// as a RoundTripper's error should be: the caller's http.Client adds its
// own.
func unwrap(resp *http.Response, err error) (*http.Response, error) {
	if ue, ok := err.(*url.Error); ok {
		return resp, ue.Err
	}
	return resp, err
}

// quotaExhausted returns the error that stands for resp when its
// provider's signals (in reg, read at clock's now) say it is a billing
// stop, having read the start of its body and closed it; nil, with resp
// untouched, otherwise.
func quotaExhausted(reg *providers.Registry, clock quota.Clock, resp *http.Response) *QuotaError {
	if resp.Request == nil {
		return nil
	}
	res, _, _ := reg.Resolve(resp.Request, providers.Input{})
	if res.Provider == nil || !backoff.Classify(resp, &res.Provider.Signals, clock.Now()).QuotaExhausted {
		return nil
	}
	// Classify has read up to MaxBodyPeek bytes already: no network read.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, backoff.MaxBodyPeek))
	_ = resp.Body.Close()
	return &QuotaError{Provider: res.Provider.Name, StatusCode: resp.StatusCode, Body: body}
}

// signalsFor returns the throttling signals of req's provider in reg, or
// nil.
func signalsFor(reg *providers.Registry, req *http.Request) *backoff.Signals {
	res, _, _ := reg.Resolve(req, providers.Input{})
	if res.Provider == nil {
		return nil
	}
	return &res.Provider.Signals
}
