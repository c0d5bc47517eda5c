package backoff

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrNoResponse is returned by PassthroughErrorHandler when the retry loop
// ended with neither a response nor an error, so that a caller never gets
// (nil, nil).
var ErrNoResponse = errors.New("backoff: retries ended without a response or an error")

// Policy is a retry policy for github.com/hashicorp/go-retryablehttp built
// on vendors' throttling signals. Its CheckRetry and Backoff methods have
// the signatures of retryablehttp.CheckRetry and retryablehttp.Backoff:
//
//	p := &backoff.Policy{SignalsFor: registry.SignalsFor}
//	c := retryablehttp.NewClient()
//	c.CheckRetry = p.CheckRetry
//	c.Backoff = p.Backoff
//	c.ErrorHandler = backoff.PassthroughErrorHandler
//
// A response is retried when:
//
//   - it is throttled by the request's Signals, whatever the method (a
//     throttled request was not processed), unless Signals.Ignore matches
//     it; a 403 is retried only this way (GitHub, Salesforce);
//   - its status is 5xx other than 501 (or 0), and the request is
//     idempotent or carries an Idempotency-Key.
//
// The vendor's own word overrides both rules: a response with
// Stripe-Should-Retry or X-Should-Retry "false" is never retried, and an
// error response (400 or more) with "true" is retried whatever its status
// and method, e.g. Stripe's 409 lock_timeout or a 503 to a POST. A response the Signals ignore (a billing stop
// included) is never retried, whatever the vendor says.
//
// A failed request (no response) is retried when the request is
// idempotent or carries an Idempotency-Key and the error is a transient
// network failure: a refused, reset or broken connection, an unexpected
// EOF, a timeout of the attempt, a DNS timeout. Certificate and TLS
// errors, redirect-policy errors and any error not known to be transient
// are not retried. When the request's context is done, CheckRetry stops
// and returns the context's error.
//
// CheckRetry also stops, returning (false, nil) so that the caller gets
// the last response, when the vendor's delay would end past the context's
// deadline.
//
// The zero Policy, and a nil *Policy, use the zero Signals for every
// request, the real clock and a shared random source. A Policy is safe
// for concurrent use if its functions are.
type Policy struct {
	// SignalsFor returns the Signals for a request. It is called with the
	// request of the response being judged, never with nil. If SignalsFor
	// is nil or returns nil, the zero Signals apply: a 429 is throttled.
	SignalsFor func(*http.Request) *Signals

	// Now returns the current time. If nil, time.Now is used. Tests inject
	// a fixed clock.
	Now func() time.Time

	// Rand returns a pseudo-random number in [0, n) for n > 0, like
	// math/rand/v2.Int64N, which is used if Rand is nil. It draws the
	// jitter of the exponential backoff; it must be safe for concurrent use
	// if the Policy is shared. A value outside [0, n) is clamped.
	Rand func(n int64) int64
}

func (p *Policy) now() time.Time {
	if p == nil || p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

func (p *Policy) rand(n int64) int64 {
	if n <= 0 {
		return 0
	}
	var r int64
	if p == nil || p.Rand == nil {
		r = rand.Int64N(n)
	} else {
		r = p.Rand(n)
	}
	if r < 0 {
		return 0
	}
	if r >= n {
		return n - 1
	}
	return r
}

func (p *Policy) signalsFor(req *http.Request) *Signals {
	if p == nil || p.SignalsFor == nil || req == nil {
		return nil
	}
	return p.SignalsFor(req)
}

// CheckRetry reports whether to retry after a response or an error, by
// the rules documented on Policy. It has the signature of
// retryablehttp.CheckRetry. When it returns false with a nil error, the
// caller gets the response (or the request's error) as it is. When it
// returns true for a response, it first reads up to MaxBodyPeek bytes of
// its body (which the body still yields), so that the connection is
// reused for the retry.
//
// retryablehttp does not give CheckRetry the request. CheckRetry learns
// the method and Idempotency-Key from WithRequest in ctx if present, else
// from resp.Request, else (for an error) from the *url.Error's Op, which
// carries the method but not the headers.
func (p *Policy) CheckRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if cerr := ctx.Err(); cerr != nil {
		return false, cerr
	}
	if err != nil {
		return requestRetryable(ctx, resp, err) && transientError(err), nil
	}
	if resp == nil {
		return false, nil
	}
	now := p.now()
	v := Classify(resp, p.signalsFor(resp.Request), now)
	switch {
	case v.Ignored:
		return false, nil
	case v.retrySaid:
		if !v.retryable {
			return false, nil
		}
	case v.Throttled:
	case retryableStatus(resp.StatusCode) && requestRetryable(ctx, resp, nil):
	default:
		return false, nil
	}
	if v.Delay > 0 && !fitsDeadline(ctx, v.Delay, now) {
		return false, nil
	}
	// retryablehttp drains only 4 KiB of the body before the retry and
	// closes the rest unread, which closes the connection: a vendor whose
	// 429s carry a bigger body (an HTML page, a verbose JSON error) would
	// cost a new connection, and a TLS handshake, per retry. Reading up to
	// MaxBodyPeek here, bounded so a huge body is never read whole, frees
	// the connection; the bytes are kept for the caller in case the
	// retries run out and this response is returned.
	peekBody(resp)
	return true, nil
}

// Backoff returns how long to wait before retry attemptNum (counted from
// 0, as retryablehttp does): the vendor's delay when the response gives
// one (see Classify; capped at Signals.MaxDelay, not at max, since an
// earlier retry would only be refused again; zero for Retry-After: 0,
// which asks for a retry at once), else exponential backoff
// with full jitter, a uniformly random wait in [0, min*2^attemptNum)
// capped at max. It has the signature of retryablehttp.Backoff.
//
// When the response's request has a context deadline, the wait is
// shortened to end before it, so that the retry loop is not cut short
// while sleeping (CheckRetry has already refused a vendor delay that
// would pass the deadline). Without a response (a failed connection)
// there is no context to read, and the wait is the plain backoff.
//
// The result is never negative, and large attempt numbers saturate at
// max rather than overflow.
func (p *Policy) Backoff(min, max time.Duration, attemptNum int, resp *http.Response) time.Duration {
	now := p.now()
	var left time.Duration = -1 // time left before the deadline; -1: none
	if resp != nil && resp.Request != nil {
		if dl, ok := resp.Request.Context().Deadline(); ok {
			left = dl.Sub(now)
			if left < 0 {
				left = 0
			}
		}
	}
	if resp != nil {
		// A Source with a zero Delay is the vendor's "retry now".
		if v := Classify(resp, p.signalsFor(resp.Request), now); v.Source != "" {
			if left >= 0 && v.Delay > left {
				return left
			}
			return v.Delay
		}
	}
	ceil := expCeiling(min, max, attemptNum)
	if left >= 0 && ceil > left {
		ceil = left
	}
	return time.Duration(p.rand(int64(ceil)))
}

// expCeiling returns min*2^attempt capped at max, without overflow.
// Negative inputs count as zero.
func expCeiling(min, max time.Duration, attempt int) time.Duration {
	if min < 0 {
		min = 0
	}
	if max < 0 {
		max = 0
	}
	if attempt < 0 {
		attempt = 0
	}
	if attempt < 63 && min <= max>>attempt {
		return min << attempt
	}
	return max
}

// fitsDeadline reports whether a wait of d starting at now ends before
// ctx's deadline. It is true when ctx has no deadline, and false when ctx
// is already done. A caller about to sleep for a vendor's delay uses it
// to return the response it has instead of sleeping into a deadline.
func fitsDeadline(ctx context.Context, d time.Duration, now time.Time) bool {
	if ctx == nil {
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return true
	}
	if d < 0 {
		d = 0
	}
	return d < dl.Sub(now)
}

// PassthroughErrorHandler is a retryablehttp.ErrorHandler that, when the
// retries end without success, returns the last response as it is,
// unread and unclosed, with a nil error, so the caller sees the vendor's
// 429 or 503 rather than a "giving up" error. It returns err only when
// there is no response, and ErrNoResponse if there is neither. It never
// returns both a response and an error.
func PassthroughErrorHandler(resp *http.Response, err error, numTries int) (*http.Response, error) {
	if resp != nil {
		return resp, nil
	}
	if err == nil {
		return nil, ErrNoResponse
	}
	return nil, err
}

// idempotent reports whether a request with this method and header may be
// sent again after a failure that may have reached the server: its method
// is idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE; "" means GET) or
// it carries a non-empty Idempotency-Key header. Methods are
// case-sensitive, as in HTTP.
func idempotent(method string, h http.Header) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return strings.TrimSpace(h.Get("Idempotency-Key")) != ""
}

// requestKey is the context key of WithRequest.
type requestKey struct{}

// WithRequest returns a copy of ctx that records whether req may be
// retried after a failure: its method is idempotent (GET, HEAD, OPTIONS,
// TRACE, PUT, DELETE) or it carries an Idempotency-Key header.
// retryablehttp calls CheckRetry
// with the request's context but not the request, so a transport that
// uses Policy should send req.WithContext(WithRequest(req.Context(), req)).
// Without it, a failed POST with an Idempotency-Key is not retried (the
// header is not visible), and a request redirected with a method change
// is judged by its last method. A nil req returns ctx unchanged.
func WithRequest(ctx context.Context, req *http.Request) context.Context {
	if req == nil {
		return ctx
	}
	return context.WithValue(ctx, requestKey{}, idempotent(req.Method, req.Header))
}

// requestRetryable reports whether the request behind resp or err may be
// retried after a failure; unknown means no.
func requestRetryable(ctx context.Context, resp *http.Response, err error) bool {
	if ok, found := ctx.Value(requestKey{}).(bool); found {
		return ok
	}
	if resp != nil && resp.Request != nil {
		return idempotent(resp.Request.Method, resp.Request.Header)
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Op != "" {
		// net/http's Op is the method with all but the first letter
		// lowered ("Get"); HTTP methods are upper case.
		return idempotent(strings.ToUpper(ue.Op), nil)
	}
	return false
}

// retryableStatus reports whether a status is worth retrying for an
// idempotent request: 5xx but 501 Not Implemented, and 0 (a response
// without a status, which go-retryablehttp retries too).
func retryableStatus(code int) bool {
	return code == 0 || (code >= 500 && code <= 599 && code != http.StatusNotImplemented)
}

// transientError reports whether err is a network failure that another
// attempt may not meet. It is an allow list: an error it does not know
// (a redirect policy's, a RoundTripper's own, a bad URL) is not retried.
func transientError(err error) bool {
	// Certificates and TLS: the server will present the same next time.
	var (
		certErr   *tls.CertificateVerificationError
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		recordErr tls.RecordHeaderError
		alertErr  tls.AlertError
		echErr    *tls.ECHRejectionError
	)
	if errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) ||
		errors.As(err, &invalid) || errors.As(err, &recordErr) || errors.As(err, &alertErr) ||
		errors.As(err, &echErr) {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.IsTimeout || dnsErr.IsTemporary
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ETIMEDOUT) {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return true
	}
	// A timeout of this attempt (http.Client.Timeout, a dial or TLS
	// handshake timeout). *url.Error itself has a Timeout method, so look
	// below it.
	inner := err
	var ue *url.Error
	if errors.As(err, &ue) {
		inner = ue.Err
	}
	var te interface{ Timeout() bool }
	return errors.As(inner, &te) && te.Timeout()
}
