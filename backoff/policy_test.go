package backoff

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/jarcoal/httpmock"
)

// Compile-time checks that the methods fit retryablehttp's hooks.
var (
	_ retryablehttp.CheckRetry   = (*Policy)(nil).CheckRetry
	_ retryablehttp.Backoff      = (*Policy)(nil).Backoff
	_ retryablehttp.ErrorHandler = PassthroughErrorHandler
)

// deadlineCtx is a live context with a chosen deadline, so tests can put
// the deadline relative to the fixed clock instead of the wall clock.
type deadlineCtx struct {
	context.Context
	dl time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.dl, true }

func withDeadline(d time.Duration) context.Context {
	return deadlineCtx{context.Background(), now.Add(d)}
}

// fixedPolicy is a Policy on the fixed clock with the given signals for
// every request.
func fixedPolicy(s *Signals) *Policy {
	return &Policy{
		SignalsFor: func(*http.Request) *Signals { return s },
		Now:        func() time.Time { return now },
		Rand:       func(n int64) int64 { return n - 1 },
	}
}

// reqResponse is response() with a request of the given method attached,
// with an Idempotency-Key if key is set.
func reqResponse(method, key string, status int, body string, kv ...string) *http.Response {
	resp := response(status, body, kv...)
	resp.Request = request(method, key)
	return resp
}

func request(method, key string) *http.Request {
	req, err := http.NewRequest(method, "https://api.example.com/v1/things", nil)
	if err != nil {
		panic(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return req
}

func urlErr(method string, err error) error {
	op := method[:1] + strings.ToLower(method[1:])
	return &url.Error{Op: op, URL: "https://api.example.com/v1/things", Err: err}
}

// timeoutErr is a timeout like net/http's Client.Timeout error.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "Client.Timeout exceeded while awaiting headers" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestCheckRetryResponses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ctx  context.Context
		sig  *Signals
		resp *http.Response
		want bool
	}{
		{"429 POST is retried", nil, nil, reqResponse("POST", "", 429, ""), true},
		{"429 PATCH is retried", nil, nil, reqResponse("PATCH", "", 429, "", "Retry-After", "1"), true},
		{"429 insufficient_quota is not", nil, openai, reqResponse("GET", "", 429, `"insufficient_quota"`), false},
		{"503 GET", nil, nil, reqResponse("GET", "", 503, ""), true},
		{"500 PUT", nil, nil, reqResponse("PUT", "", 500, ""), true},
		{"502 DELETE", nil, nil, reqResponse("DELETE", "", 502, ""), true},
		{"504 HEAD", nil, nil, reqResponse("HEAD", "", 504, ""), true},
		{"503 POST is not", nil, nil, reqResponse("POST", "", 503, ""), false},
		{"503 POST with Idempotency-Key", nil, nil, reqResponse("POST", "k1", 503, ""), true},
		{"501 GET is not", nil, nil, reqResponse("GET", "", 501, ""), false},
		{"status 0 GET", nil, nil, reqResponse("GET", "", 0, ""), true},
		{"200", nil, nil, reqResponse("GET", "", 200, ""), false},
		{"400", nil, nil, reqResponse("GET", "", 400, ""), false},
		{"403 by default is not", nil, nil, reqResponse("GET", "", 403, "", "x-ratelimit-remaining", "0"), false},
		{"GitHub 403 remaining 0 POST", nil, github, reqResponse("POST", "", 403, "", "x-ratelimit-remaining", "0"), true},
		{"GitHub 403 forbidden", nil, github, reqResponse("GET", "", 403, "no"), false},
		{"Salesforce 403 POST", nil, salesforce, reqResponse("POST", "", 403, "REQUEST_LIMIT_EXCEEDED"), true},
		{"no request: 503 is not", nil, nil, response(503, ""), false},
		{"no request: 429 is", nil, nil, response(429, ""), true},
		{"WithRequest overrides the redirected method",
			WithRequest(context.Background(), request("POST", "")), nil, reqResponse("GET", "", 503, ""), false},
		{"delay fits the deadline", withDeadline(time.Minute), nil,
			reqResponse("GET", "", 429, "", "Retry-After", "30"), true},
		{"delay passes the deadline", withDeadline(time.Minute), nil,
			reqResponse("GET", "", 429, "", "Retry-After", "90"), false},
		{"delay ends at the deadline", withDeadline(time.Minute), nil,
			reqResponse("GET", "", 429, "", "Retry-After", "60"), false},
		{"503 delay passes the deadline", withDeadline(time.Second), nil,
			reqResponse("GET", "", 503, "", "Retry-After", "5"), false},
		{"no delay, deadline near", withDeadline(time.Millisecond), nil, reqResponse("GET", "", 429, ""), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			got, err := fixedPolicy(tc.sig).CheckRetry(ctx, tc.resp, nil)
			if got != tc.want || err != nil {
				t.Errorf("CheckRetry = %v, %v; want %v, nil", got, err, tc.want)
			}
		})
	}
}

// TestCheckRetryReadsTheBodyItRetries (D14): before a retry the body is
// read to its end when it fits in MaxBodyPeek, so that the connection can
// serve the retry (retryablehttp drains only 4 KiB), and it still yields
// every byte; a bigger body is read no further than MaxBodyPeek.
func TestCheckRetryReadsTheBodyItRetries(t *testing.T) {
	t.Parallel()
	p := fixedPolicy(nil)
	for _, size := range []int{0, 10 << 10, MaxBodyPeek, MaxBodyPeek + 1, 3 * MaxBodyPeek} {
		body := strings.Repeat("x", size)
		src := strings.NewReader(body)
		orig := &closeRecorder{Reader: src}
		resp := reqResponse("GET", "", 429, "")
		resp.Body = orig
		if retry, err := p.CheckRetry(context.Background(), resp, nil); !retry || err != nil {
			t.Fatalf("%d bytes: CheckRetry = %v, %v; want a retry", size, retry, err)
		}
		wantLeft := 0
		if size > MaxBodyPeek {
			wantLeft = size - MaxBodyPeek - 1
		}
		if src.Len() != wantLeft {
			t.Errorf("%d bytes: %d left unread, want %d", size, src.Len(), wantLeft)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil || string(got) != body {
			t.Errorf("%d bytes: read back %d bytes, %v; want the whole body", size, len(got), err)
		}
		if err := resp.Body.Close(); err != nil || !orig.closed {
			t.Errorf("%d bytes: Close = %v, original closed = %v", size, err, orig.closed)
		}
	}
	// A response that is not retried is left alone.
	src := strings.NewReader("created")
	resp := reqResponse("POST", "", 201, "")
	resp.Body = io.NopCloser(src)
	if retry, _ := p.CheckRetry(context.Background(), resp, nil); retry || src.Len() != len("created") {
		t.Errorf("201: retry %v, %d of %d bytes left; want no retry and the body untouched", retry, src.Len(), len("created"))
	}
}

func TestCheckRetryErrors(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	post := WithRequest(context.Background(), request("POST", ""))
	postKey := WithRequest(context.Background(), request("POST", "order-42"))
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"GET connection refused", nil, urlErr("GET", refused), true},
		{"GET connection reset", nil, urlErr("GET", reset), true},
		{"GET EOF", nil, urlErr("GET", io.EOF), true},
		{"GET unexpected EOF", nil, urlErr("GET", io.ErrUnexpectedEOF), true},
		{"GET attempt timeout", nil, urlErr("GET", timeoutErr{}), true},
		{"GET DNS timeout", nil, urlErr("GET", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "timeout", IsTimeout: true}}), true},
		{"GET DNS not found", nil, urlErr("GET", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", IsNotFound: true}}), false},
		{"PUT refused", nil, urlErr("PUT", refused), true},
		{"POST refused", nil, urlErr("POST", refused), false},
		{"PATCH reset", nil, urlErr("PATCH", reset), false},
		{"POST via WithRequest", post, urlErr("POST", refused), false},
		{"POST with Idempotency-Key via WithRequest", postKey, urlErr("POST", refused), true},
		{"bare error, no method known", nil, refused, false},
		{"unknown CA", nil, urlErr("GET", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), false},
		{"wrong host", nil, urlErr("GET", x509.HostnameError{Host: "x"}), false},
		{"expired", nil, urlErr("GET", x509.CertificateInvalidError{Reason: x509.Expired}), false},
		{"TLS alert inside OpError", nil, urlErr("GET", &net.OpError{Op: "remote error", Err: tls.AlertError(42)}), false},
		{"plain HTTP on TLS port", nil, urlErr("GET", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), false},
		{"redirect policy", nil, urlErr("GET", errors.New("stopped after 10 redirects")), false},
		{"unknown error", nil, urlErr("GET", errors.New("throttle: limited")), false},
		{"inner cancel, live context", nil, urlErr("GET", context.Canceled), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			got, err := fixedPolicy(nil).CheckRetry(ctx, nil, tc.err)
			if got != tc.want || err != nil {
				t.Errorf("CheckRetry(%v) = %v, %v; want %v, nil", tc.err, got, err, tc.want)
			}
		})
	}
}

func TestCheckRetryContextDone(t *testing.T) {
	t.Parallel()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	for _, ctx := range []context.Context{canceled, expired} {
		for _, resp := range []*http.Response{nil, reqResponse("GET", "", 429, "")} {
			got, err := fixedPolicy(nil).CheckRetry(ctx, resp, urlErr("GET", ctx.Err()))
			if got || err == nil || !errors.Is(err, ctx.Err()) {
				t.Errorf("CheckRetry after %v = %v, %v; want false, the context's error", ctx.Err(), got, err)
			}
		}
	}
}

func TestCheckRetryNilPolicy(t *testing.T) {
	t.Parallel()
	var p *Policy
	got, err := p.CheckRetry(context.Background(), reqResponse("POST", "", 429, ""), nil)
	if !got || err != nil {
		t.Errorf("nil Policy CheckRetry(429) = %v, %v; want true, nil", got, err)
	}
	if d := p.Backoff(time.Second, time.Minute, 3, nil); d < 0 || d >= 8*time.Second {
		t.Errorf("nil Policy Backoff = %v, want [0, 8s)", d)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	top := func(n int64) int64 { return n - 1 }
	cases := []struct {
		name     string
		min, max time.Duration
		attempt  int
		resp     *http.Response
		sig      *Signals
		rand     func(int64) int64
		want     time.Duration
	}{
		{"vendor delay", time.Second, 30 * time.Second, 0, reqResponse("GET", "", 429, "", "Retry-After", "45"), nil, top, 45 * time.Second},
		{"vendor delay not capped by max", time.Second, time.Second, 5, reqResponse("GET", "", 429, "", "Retry-After", "45"), nil, top, 45 * time.Second},
		{"vendor delay capped by MaxDelay", time.Second, time.Second, 0, reqResponse("GET", "", 429, "", "Retry-After", "45"),
			&Signals{MaxDelay: 10 * time.Second}, top, 10 * time.Second},
		{"503 Retry-After", time.Second, time.Minute, 0, reqResponse("GET", "", 503, "", "Retry-After", "7"), nil, top, 7 * time.Second},
		{"attempt 0, top of range", time.Second, time.Minute, 0, nil, nil, top, time.Second - 1},
		{"attempt 3, top of range", time.Second, time.Minute, 3, nil, nil, top, 8*time.Second - 1},
		{"attempt 3, bottom of range", time.Second, time.Minute, 3, nil, nil, func(int64) int64 { return 0 }, 0},
		{"capped at max", time.Second, 30 * time.Second, 10, nil, nil, top, 30*time.Second - 1},
		{"huge attempt", time.Second, 30 * time.Second, 1 << 30, nil, nil, top, 30*time.Second - 1},
		{"attempt 61", 2, maxDuration, 61, nil, nil, top, 2<<61 - 1},
		{"attempt 62 would overflow: max", 2, maxDuration, 62, nil, nil, top, maxDuration - 1},
		{"attempt 63 saturates at max", 1, maxDuration, 63, nil, nil, top, maxDuration - 1},
		{"negative attempt", time.Second, time.Minute, -4, nil, nil, top, time.Second - 1},
		{"negative min", -time.Second, time.Minute, 2, nil, nil, top, 0},
		{"negative max", time.Second, -time.Minute, 2, nil, nil, top, 0},
		{"min above max", time.Minute, time.Second, 0, nil, nil, top, time.Second - 1},
		{"rand too big is clamped", time.Second, time.Minute, 0, nil, nil, func(n int64) int64 { return n * 2 }, time.Second - 1},
		{"rand negative is clamped", time.Second, time.Minute, 0, nil, nil, func(int64) int64 { return -5 }, 0},
		{"throttled without delay backs off", time.Second, time.Minute, 1, reqResponse("GET", "", 429, ""), nil, top, 2*time.Second - 1},
		{"Retry-After: 0 retries at once", time.Second, time.Minute, 1, reqResponse("GET", "", 429, "", "Retry-After", "0"), nil, top, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := fixedPolicy(tc.sig)
			p.Rand = tc.rand
			if got := p.Backoff(tc.min, tc.max, tc.attempt, tc.resp); got != tc.want {
				t.Errorf("Backoff(%v, %v, %d) = %v, want %v", tc.min, tc.max, tc.attempt, got, tc.want)
			}
		})
	}
}

func TestBackoffDeadline(t *testing.T) {
	t.Parallel()
	p := fixedPolicy(nil)
	resp := reqResponse("GET", "", 503, "")
	resp.Request = resp.Request.WithContext(withDeadline(3 * time.Second))
	if got := p.Backoff(time.Second, time.Minute, 5, resp); got != 3*time.Second-1 {
		t.Errorf("Backoff near a deadline = %v, want the jitter range cut to the 3s left", got)
	}
	resp.Header.Set("Retry-After", "10")
	if got := p.Backoff(time.Second, time.Minute, 5, resp); got != 3*time.Second {
		t.Errorf("vendor Backoff near a deadline = %v, want 3s", got)
	}
	resp.Request = resp.Request.WithContext(withDeadline(-time.Second))
	if got := p.Backoff(time.Second, time.Minute, 5, resp); got != 0 {
		t.Errorf("Backoff past the deadline = %v, want 0", got)
	}
}

func TestFitsDeadline(t *testing.T) {
	t.Parallel()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want bool
	}{
		{"no deadline", context.Background(), maxDuration, true},
		{"nil context", nil, time.Hour, true},
		{"before", withDeadline(time.Minute), 59 * time.Second, true},
		{"at", withDeadline(time.Minute), time.Minute, false},
		{"after", withDeadline(time.Minute), time.Hour, false},
		{"negative wait", withDeadline(time.Minute), -time.Hour, true},
		{"deadline passed", withDeadline(-time.Second), 0, false},
		{"done", canceled, 0, false},
	}
	for _, tc := range cases {
		if got := fitsDeadline(tc.ctx, tc.d, now); got != tc.want {
			t.Errorf("%s: fitsDeadline(%v) = %v, want %v", tc.name, tc.d, got, tc.want)
		}
	}
}

func TestRetryable(t *testing.T) {
	t.Parallel()
	key := http.Header{"Idempotency-Key": {"abc"}}
	blank := http.Header{"Idempotency-Key": {"  "}}
	cases := []struct {
		method string
		h      http.Header
		want   bool
	}{
		{"GET", nil, true}, {"", nil, true}, {"HEAD", nil, true}, {"OPTIONS", nil, true},
		{"TRACE", nil, true}, {"PUT", nil, true}, {"DELETE", nil, true},
		{"POST", nil, false}, {"PATCH", nil, false}, {"CONNECT", nil, false}, {"get", nil, false},
		{"POST", key, true}, {"PATCH", key, true}, {"POST", blank, false},
	}
	for _, tc := range cases {
		if got := idempotent(tc.method, tc.h); got != tc.want {
			t.Errorf("idempotent(%q, %v) = %v, want %v", tc.method, tc.h, got, tc.want)
		}
	}
}

func TestPassthroughErrorHandler(t *testing.T) {
	t.Parallel()
	resp := response(429, "slow down")
	boom := errors.New("boom")
	if got, err := PassthroughErrorHandler(resp, boom, 3); got != resp || err != nil {
		t.Errorf("with a response = %v, %v; want the response, nil", got, err)
	}
	if got, err := PassthroughErrorHandler(nil, boom, 3); got != nil || err != boom {
		t.Errorf("without a response = %v, %v; want nil, the error", got, err)
	}
	if got, err := PassthroughErrorHandler(nil, nil, 3); got != nil || !errors.Is(err, ErrNoResponse) {
		t.Errorf("with neither = %v, %v; want nil, ErrNoResponse", got, err)
	}
}

// sequence answers with each responder in turn, repeating the last.
func sequence(rs ...httpmock.Responder) httpmock.Responder {
	i := 0
	return func(req *http.Request) (*http.Response, error) {
		r := rs[min(i, len(rs)-1)]
		i++
		return r(req)
	}
}

// mockClient returns a retryablehttp client using the policy and a mock
// transport answering every request to the test URL with r.
func mockClient(t *testing.T, p *Policy, r httpmock.Responder) (*retryablehttp.Client, *httpmock.MockTransport) {
	t.Helper()
	mt := httpmock.NewMockTransport()
	mt.RegisterNoResponder(r)
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: mt}
	c.Logger = nil
	c.RetryMax = 3
	c.RetryWaitMin = time.Microsecond
	c.RetryWaitMax = time.Millisecond
	c.CheckRetry = p.CheckRetry
	c.Backoff = p.Backoff
	c.ErrorHandler = PassthroughErrorHandler
	return c, mt
}

func do(t *testing.T, c *retryablehttp.Client, ctx context.Context, method string, h http.Header) (*http.Response, error) {
	t.Helper()
	req, err := retryablehttp.NewRequestWithContext(ctx, method, "https://api.example.com/v1/things", strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Request = req.Request.WithContext(WithRequest(req.Context(), req.Request))
	return c.Do(req)
}

func withHeader(r httpmock.Responder, kv ...string) httpmock.Responder {
	h := make(http.Header)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return r.HeaderSet(h)
}

func TestRetryablehttpRetriesThrottledPost(t *testing.T) {
	t.Parallel()
	// Real clock, but every wait is capped at a millisecond.
	p := &Policy{SignalsFor: func(*http.Request) *Signals { return &Signals{MaxDelay: time.Millisecond} }}
	c, mt := mockClient(t, p, sequence(
		withHeader(httpmock.NewStringResponder(429, "slow down"), "Retry-After", "2.0"),
		httpmock.NewStringResponder(201, "created"),
	))
	resp, err := do(t, c, context.Background(), "POST", nil)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 201 || mt.GetTotalCallCount() != 2 {
		t.Errorf("got %d after %d calls; want 201 after 2", resp.StatusCode, mt.GetTotalCallCount())
	}
}

func TestRetryablehttpExhaustedReturnsLastResponse(t *testing.T) {
	t.Parallel()
	p := &Policy{SignalsFor: func(*http.Request) *Signals { return &Signals{MaxDelay: time.Millisecond} }}
	c, mt := mockClient(t, p, withHeader(httpmock.NewStringResponder(429, "still slow"), "Retry-After", "1"))
	resp, err := do(t, c, context.Background(), "GET", nil)
	if err != nil || resp == nil {
		t.Fatalf("Do = %v, %v; want the last response and no error", resp, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || string(body) != "still slow" || mt.GetTotalCallCount() != 4 {
		t.Errorf("got %d %q after %d calls; want 429 \"still slow\" after 4", resp.StatusCode, body, mt.GetTotalCallCount())
	}
}

func TestRetryablehttpSalesforce403(t *testing.T) {
	t.Parallel()
	sf := &Signals{Rules: salesforce.Rules}
	p := &Policy{SignalsFor: func(*http.Request) *Signals { return sf }}
	body := `[{"errorCode":"REQUEST_LIMIT_EXCEEDED","message":"TotalRequests Limit exceeded."}]`
	c, mt := mockClient(t, p, sequence(httpmock.NewStringResponder(403, body), httpmock.NewStringResponder(200, "ok")))
	resp, err := do(t, c, context.Background(), "POST", nil)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || mt.GetTotalCallCount() != 2 {
		t.Errorf("got %d after %d calls; want 200 after 2", resp.StatusCode, mt.GetTotalCallCount())
	}
}

func TestRetryablehttpPost503NotRetried(t *testing.T) {
	t.Parallel()
	c, mt := mockClient(t, &Policy{}, httpmock.NewStringResponder(503, "down"))
	resp, err := do(t, c, context.Background(), "POST", nil)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 503 || mt.GetTotalCallCount() != 1 {
		t.Errorf("got %d after %d calls; want 503 after 1", resp.StatusCode, mt.GetTotalCallCount())
	}

	c, mt = mockClient(t, &Policy{}, sequence(httpmock.NewStringResponder(503, "down"), httpmock.NewStringResponder(200, "ok")))
	resp, err = do(t, c, context.Background(), "POST", http.Header{"Idempotency-Key": {"k"}})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || mt.GetTotalCallCount() != 2 {
		t.Errorf("with Idempotency-Key got %d after %d calls; want 200 after 2", resp.StatusCode, mt.GetTotalCallCount())
	}
}

func TestRetryablehttpConnectionErrors(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	c, mt := mockClient(t, &Policy{}, sequence(httpmock.NewErrorResponder(refused), httpmock.NewStringResponder(200, "ok")))
	resp, err := do(t, c, context.Background(), "GET", nil)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	resp.Body.Close()
	if mt.GetTotalCallCount() != 2 {
		t.Errorf("GET after a refused connection: %d calls, want 2", mt.GetTotalCallCount())
	}

	c, mt = mockClient(t, &Policy{}, httpmock.NewErrorResponder(refused))
	resp, err = do(t, c, context.Background(), "POST", nil)
	if resp != nil || !errors.Is(err, syscall.ECONNREFUSED) || mt.GetTotalCallCount() != 1 {
		t.Errorf("POST refused = %v, %v after %d calls; want nil, the dial error, after 1", resp, err, mt.GetTotalCallCount())
	}
}

func TestRetryablehttpDelayPastDeadline(t *testing.T) {
	t.Parallel()
	// The deadline is an hour away and the vendor asks for two: the
	// caller gets the 429 at once instead of a sleep cut by the deadline.
	p := &Policy{SignalsFor: func(*http.Request) *Signals { return &Signals{MaxDelay: 3 * time.Hour} }}
	c, mt := mockClient(t, p, withHeader(httpmock.NewStringResponder(429, "later"), "Retry-After", "7200"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	resp, err := do(t, c, ctx, "GET", nil)
	if err != nil || resp == nil {
		t.Fatalf("Do = %v, %v; want the 429", resp, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 429 || mt.GetTotalCallCount() != 1 {
		t.Errorf("got %d after %d calls; want 429 after 1", resp.StatusCode, mt.GetTotalCallCount())
	}
}

func TestRetryablehttpCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	c, _ := mockClient(t, &Policy{}, func(req *http.Request) (*http.Response, error) {
		cancel()
		return nil, req.Context().Err()
	})
	resp, err := do(t, c, ctx, "GET", nil)
	if resp != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v, %v; want nil, context.Canceled", resp, err)
	}
}
