package throttle

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"

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
// ErrStoreUnavailable) is returned at once, never retried. Redirects are
// followed as the returned client's CheckRedirect says, each hop throttled
// as a request of its own; the retrying layer never follows one itself.
//
// A request body is never buffered. A body is retried only when the
// request can make a fresh copy of it (GetBody, which http.NewRequest sets
// for a *bytes.Buffer, *bytes.Reader or *strings.Reader) and its length
// is at most the retry body limit (DefaultRetryBodyLimit,
// WithRetryBodyLimit): its ContentLength or, where the request does not
// say it, the length of one copy, streamed to nowhere; each attempt sends
// a copy from GetBody. Any other body (a stream, a pipe, a file, a body over the
// limit) is sent once, still throttled and still pausing the scope on a
// vendor throttle, and its response, a 429 included, is the caller's.
//
// A vendor's billing stop (OpenAI's 429 "insufficient_quota" with
// signals body: openai) is neither retried nor paused on: the client
// returns a *QuotaError matching ErrQuotaExhausted instead of the
// response, so that the caller, or an SDK given this client, does not
// take it for a throttle worth retrying. (An SDK that retries transport
// errors gets the same error again at once: the retries are NewClient's
// job, turn the SDK's off.) The Transport itself returns the response.
//
// The options are New's, plus WithRetries and WithRetryBodyLimit.
func NewClient(opts ...Option) (*http.Client, error) {
	t, err := New(opts...)
	if err != nil {
		return nil, err
	}
	return t.Client(), nil
}

// DefaultRetryBodyLimit is the largest request body NewClient retries by
// default: 1 MiB holds the JSON of an ordinary API call, while a larger
// body is an upload, where each retry sends all of it again and the
// vendor's resumable upload, if it has one, is the better unit to retry.
const DefaultRetryBodyLimit = 1 << 20

// Client returns an *http.Client that retries around t, as NewClient does,
// sending any body it will not retry once and unbuffered.
func (t *Transport) Client() *http.Client {
	if t.registry == nil {
		return &http.Client{Transport: t} // every request fails clearly
	}
	policy := &backoff.Policy{
		SignalsFor: t.signalsFor,
		Now:        t.clock.Now,
	}
	rc := retryablehttp.NewClient()
	// The client returned below follows redirects as its CheckRedirect
	// says; this inner one must hand every 3xx back to it, or a caller
	// who turned redirects off would still get them followed.
	rc.HTTPClient = &http.Client{Transport: t, CheckRedirect: useLastResponse}
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
	return &http.Client{Transport: retrying{rc, t.retry.bodyLimit, t}}
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
	t         *Transport
}

func (r retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.roundTrip(req)
	if err != nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		return resp, err
	}
	if qe := r.t.quotaExhausted(resp); qe != nil {
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
		closeBody(req)
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
// provider's signals say it is a billing stop, having read the start of
// its body and closed it; nil, with resp untouched, otherwise.
func (t *Transport) quotaExhausted(resp *http.Response) *QuotaError {
	if resp.Request == nil {
		return nil
	}
	res, _, _ := t.registry.Resolve(resp.Request, providers.Input{})
	if res.Provider == nil || !backoff.Classify(resp, &res.Provider.Signals, t.clock.Now()).QuotaExhausted {
		return nil
	}
	// Classify has read up to MaxBodyPeek bytes already: no network read.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, backoff.MaxBodyPeek))
	_ = resp.Body.Close()
	return &QuotaError{Provider: res.Provider.Name, StatusCode: resp.StatusCode, Body: body}
}

// signalsFor returns the throttling signals of req's provider, or nil.
func (t *Transport) signalsFor(req *http.Request) *backoff.Signals {
	res, _, _ := t.registry.Resolve(req, providers.Input{})
	if res.Provider == nil {
		return nil
	}
	return &res.Provider.Signals
}
