package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
	"github.com/fleetquota/throttle/throttletest"
)

// setup is a proxy in front of one vendor, served by an httptest server.
type setup struct {
	t      *testing.T
	vendor *throttletest.Vendor
	proxy  *Proxy
	srv    *httptest.Server
	mu     sync.Mutex
	seen   []*http.Request // what the vendor received
	done   []string        // provider/status, from Options.Done
}

// start runs a fake vendor answering with handler (nil: 200 {"ok":true}),
// a provider claiming it configured by provider (YAML lines under the
// provider, "hosts" added), and a proxy with opts on top.
func start(t *testing.T, provider string, handler http.Handler, opts Options) *setup {
	t.Helper()
	s := &setup{t: t}
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.Clone(context.Background()))
		s.mu.Unlock()
		if handler != nil {
			handler.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	})
	s.vendor = throttletest.NewVendor(throttletest.Options{Handler: record, RecordBodies: true})
	t.Cleanup(s.vendor.Close)
	yaml := fmt.Sprintf("providers:\n  vendor:\n    hosts: [%q]\n%s", s.vendor.Host(), provider)
	cfg, err := providers.Load("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	opts.Registry = providers.NewRegistry(cfg)
	opts.LoopbackHTTP = true
	opts.Done = func(p string, status int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.done = append(s.done, fmt.Sprintf("%s/%d", p, status))
	}
	s.proxy, err = New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.srv = httptest.NewServer(Timeouts(s.proxy, 5*time.Second, 5*time.Second))
	t.Cleanup(s.srv.Close)
	return s
}

// url is the proxy URL of path on the vendor, in the /<host>/<path> form.
func (s *setup) url(path string) string {
	return s.srv.URL + "/" + s.vendor.Host() + path
}

func (s *setup) do(method, url string, body io.Reader, header ...string) (*http.Response, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		s.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp, b
}

func (s *setup) vendorSaw() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.seen...)
}

// own checks an answer the proxy made itself and returns its body.
func own(t *testing.T, resp *http.Response, body []byte, status int, code string) map[string]any {
	t.Helper()
	if resp.StatusCode != status || resp.Header.Get(HeaderError) != code {
		t.Fatalf("got %d with %s %q, want %d with %q; body %s", resp.StatusCode, HeaderError,
			resp.Header.Get(HeaderError), status, code, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if m["error"] != code || m["message"] == "" {
		t.Errorf("body %s: want error %q and a message", body, code)
	}
	return m
}

const wide = "    limits: [{name: peak, limit: 1000/s}]\n"

func TestForwardsOnlyToClaimedHosts(t *testing.T) {
	t.Parallel()
	s := start(t, wide, nil, Options{})

	resp, body := s.do("GET", s.url("/v1/items/a%2Fb?page=2&q=x+y"), nil)
	if resp.StatusCode != 200 || string(body) != `{"ok":true}` || resp.Header.Get(HeaderError) != "" {
		t.Fatalf("claimed host: got %d %s (%s %q)", resp.StatusCode, body, HeaderError, resp.Header.Get(HeaderError))
	}
	seen := s.vendorSaw()
	if len(seen) != 1 || seen[0].URL.EscapedPath() != "/v1/items/a%2Fb" || seen[0].URL.RawQuery != "page=2&q=x+y" {
		t.Fatalf("vendor saw %v, want /v1/items/a%%2Fb?page=2&q=x+y", seen)
	}

	for _, c := range []struct {
		path, code string
		status     int
	}{
		{"/example.com/x", codeUnknownHost, 403},
		{"/127.0.0.1:1/x", codeUnknownHost, 403},
		{"/", codeNotFound, 404},
		{"/bad%20host/x", codeBadRequest, 400},
		{"/host:99999/x", codeBadRequest, 400},
		{"/https:/" + s.vendor.Host() + "/x", codeBadRequest, 400},
	} {
		resp, body := s.do("GET", s.srv.URL+c.path, nil)
		m := own(t, resp, body, c.status, c.code)
		if c.code == codeUnknownHost && m["host"] == "" {
			t.Errorf("%s: body %s names no host", c.path, body)
		}
	}
	if n := len(s.vendorSaw()); n != 1 {
		t.Errorf("vendor saw %d requests, want only the claimed one", n)
	}

	// Not a forward proxy: absolute URLs and CONNECT are refused.
	for _, line := range []string{"GET http://" + s.vendor.Host() + "/x HTTP/1.1", "CONNECT " + s.vendor.Host() + " HTTP/1.1"} {
		status := rawStatus(t, s.srv.Listener.Addr().String(), line+"\r\nHost: x\r\n\r\n")
		if status != 400 {
			t.Errorf("%q: status %d, want 400", line, status)
		}
	}
	if n := len(s.vendorSaw()); n != 1 {
		t.Errorf("vendor saw %d requests after forward-proxy attempts, want 1", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done[0] != "vendor/200" || s.done[1] != "/403" {
		t.Errorf("Done saw %v, want vendor/200 then /403 first", s.done)
	}
}

// rawStatus writes a raw request and returns the answer's status.
func rawStatus(t *testing.T, addr, raw string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestStripsThrottleAndHopByHopHeaders(t *testing.T) {
	t.Parallel()
	s := start(t, wide+"    routes: [{name: r, path: /x, limits: [{name: t, limit: 100/s, scope: business}, {name: l, limit: 100/s, scope: \"label:class\"}]}]\n", nil, Options{})
	resp, body := s.do("GET", s.url("/x"), nil,
		"Throttle-Business", "acme",
		"Throttle-Label", "class=batch",
		"Throttle-Cost", "2",
		"Throttle-Limit-Cost", "t=3",
		"Throttle-Max-Wait", "1s",
		"Connection", "X-Secret-Hop",
		"X-Secret-Hop", "1",
		"Keep-Alive", "timeout=5",
		"Proxy-Authorization", "Basic eA==",
		"Te", "gzip",
		"X-Forwarded-For", "10.0.0.1",
		"Forwarded", "for=10.0.0.1",
		"Upgrade", "websocket",
		"Authorization", "Bearer token",
		"Stripe-Account", "acct_1",
	)
	if resp.StatusCode != 200 {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
	seen := s.vendorSaw()[0]
	for name := range seen.Header {
		switch {
		case isThrottleHeader(name):
			t.Errorf("vendor saw %s", name)
		case name == "X-Secret-Hop", name == "Keep-Alive", name == "Proxy-Authorization", name == "Te",
			name == "Upgrade", name == "Forwarded", strings.HasPrefix(name, "X-Forwarded-"):
			t.Errorf("vendor saw %s: %q", name, seen.Header[name])
		}
	}
	if seen.Header.Get("Authorization") != "Bearer token" || seen.Header.Get("Stripe-Account") != "acct_1" {
		t.Errorf("vendor saw headers %v, want Authorization and Stripe-Account passed on", seen.Header)
	}
	if seen.Host != s.vendor.Host() {
		t.Errorf("vendor saw Host %q, want %q", seen.Host, s.vendor.Host())
	}
}

func TestRefusalIs429WithJSON(t *testing.T) {
	t.Parallel()
	s := start(t, "    on_limit: fail\n    limits: [{name: per-tenant, limit: 1/min, scope: business}]\n", nil, Options{})
	if resp, body := s.do("GET", s.url("/x"), nil, headerBusiness, "acme"); resp.StatusCode != 200 {
		t.Fatalf("first request: %d %s", resp.StatusCode, body)
	}
	resp, body := s.do("GET", s.url("/x"), nil, headerBusiness, "acme")
	m := own(t, resp, body, 429, codeLimited)
	if m["provider"] != "vendor" || m["limit"] != "per-tenant" || m["scope"] != "acme" {
		t.Errorf("body %s: want provider vendor, limit per-tenant, scope acme", body)
	}
	ms, _ := m["retry_after_ms"].(float64)
	if ms < 50_000 || ms > 60_000 {
		t.Errorf("retry_after_ms %v, want about a minute", m["retry_after_ms"])
	}
	if ra := resp.Header.Get("Retry-After"); ra != "60" && ra != "59" {
		t.Errorf("Retry-After %q, want 60 (whole seconds, rounded up)", ra)
	}
	// Another tenant has its own state.
	if resp, body := s.do("GET", s.url("/x"), nil, headerBusiness, "globex"); resp.StatusCode != 200 {
		t.Errorf("other tenant: %d %s", resp.StatusCode, body)
	}
	if n := len(s.vendorSaw()); n != 2 {
		t.Errorf("vendor saw %d requests, want 2 (the refusal is not sent)", n)
	}
}

func TestVendor429PassesThroughAsItIs(t *testing.T) {
	t.Parallel()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After-Ms", "1")
		w.Header().Set(HeaderError, "forged")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, "vendor says slow down")
	})
	s := start(t, wide, handler, Options{Retries: 1, retryWaitMin: time.Millisecond, retryWaitMax: time.Millisecond})
	resp, body := s.do("GET", s.url("/x"), nil)
	if resp.StatusCode != 429 || string(body) != "vendor says slow down" || resp.Header.Get(HeaderError) != "" {
		t.Errorf("got %d %q with %s %q, want the vendor's 429 without %s", resp.StatusCode, body,
			HeaderError, resp.Header.Get(HeaderError), HeaderError)
	}
	if n := len(s.vendorSaw()); n != 2 {
		t.Errorf("vendor saw %d requests, want 2 (one retry)", n)
	}
}

func TestRetryResendsTheBodyAndLargeBodiesGoOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		first := calls%2 == 1
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After-Ms", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "done")
	})
	s := start(t, wide, handler, Options{MaxRetryBody: 16,
		Retries: 2, retryWaitMin: time.Millisecond, retryWaitMax: time.Millisecond})

	resp, body := s.do("POST", s.url("/charge"), strings.NewReader("amount=1"))
	if resp.StatusCode != 200 || string(body) != "done" {
		t.Fatalf("small body: got %d %q, want 200 done after one retry", resp.StatusCode, body)
	}
	// Sent chunked (no length): held all the same, and sent with a length.
	resp, body = s.do("POST", s.url("/charge"), io.MultiReader(strings.NewReader("amount=2")))
	if resp.StatusCode != 200 || string(body) != "done" {
		t.Fatalf("chunked small body: got %d %q", resp.StatusCode, body)
	}
	large := strings.Repeat("x", 17)
	resp, _ = s.do("POST", s.url("/charge"), strings.NewReader(large))
	if resp.StatusCode != 429 || resp.Header.Get(HeaderError) != "" {
		t.Errorf("large body: got %d (%s %q), want the vendor's 429: no retry", resp.StatusCode, HeaderError, resp.Header.Get(HeaderError))
	}
	resp, _ = s.do("POST", s.url("/charge"), io.MultiReader(strings.NewReader(large)))
	if resp.StatusCode != 200 {
		t.Errorf("large chunked body: got %d, want 200 (the vendor's second answer)", resp.StatusCode)
	}
	var bodies []string
	for _, a := range s.vendor.Arrivals() {
		bodies = append(bodies, string(a.Body))
	}
	want := []string{"amount=1", "amount=1", "amount=2", "amount=2", large, large}
	if fmt.Sprint(bodies) != fmt.Sprint(want) {
		t.Errorf("vendor saw bodies %q, want %q", bodies, want)
	}
	seen := s.vendorSaw()
	if seen[2].ContentLength != int64(len("amount=2")) {
		t.Errorf("held chunked body sent with length %d, want %d", seen[2].ContentLength, len("amount=2"))
	}
}

func TestBadThrottleHeadersAre400(t *testing.T) {
	t.Parallel()
	s := start(t, wide, nil, Options{})
	for _, h := range [][]string{
		{"Throttle-Cost", "abc"},
		{"Throttle-Cost", "0"},
		{"Throttle-Cost", "-1"},
		{"Throttle-Cost", "99999999999999999999999"},
		{"Throttle-Cost", "1", "Throttle-Cost", "2"},
		{"Throttle-Max-Wait", "-1s"},
		{"Throttle-Max-Wait", "NaN"},
		{"Throttle-Max-Wait", "1e400"},
		{"Throttle-Max-Wait", "forever"},
		{"Throttle-Business", ""},
		{"Throttle-Business", strings.Repeat("a", 300)},
		{"Throttle-Label", "class"},
		{"Throttle-Label", "=batch"},
		{"Throttle-Label", "class=batch, class=web"},
		{"Throttle-Label", "c l=batch"},
		{"Throttle-Limit-Cost", "tokens=many"},
		{"Throttle-Limit-Cost", strings.Repeat("a=1,", 17)},
		{"Throttle-Bussiness", "acme"},
	} {
		resp, body := s.do("GET", s.url("/x"), nil, h...)
		own(t, resp, body, 400, codeBadRequest)
	}
	if n := len(s.vendorSaw()); n != 0 {
		t.Errorf("vendor saw %d requests, want none", n)
	}
	// A cost beyond a limit's capacity is the transport's ErrInvalid: 400.
	resp, body := s.do("GET", s.url("/x"), nil, "Throttle-Cost", "5000")
	own(t, resp, body, 400, codeBadRequest)
}

func TestMaxWaitHeaderOnlyShortensTheWait(t *testing.T) {
	t.Parallel()
	s := start(t, "    max_wait: 50ms\n    limits: [{name: minute, limit: 1/min}]\n", nil, Options{})
	if resp, body := s.do("GET", s.url("/x"), nil); resp.StatusCode != 200 {
		t.Fatalf("first: %d %s", resp.StatusCode, body)
	}
	// An hour would admit the next slot in a minute; the provider's 50ms
	// does not.
	resp, body := s.do("GET", s.url("/x"), nil, headerMaxWait, "1h")
	own(t, resp, body, 429, codeLimited)
}

func TestMissingScopeIs400(t *testing.T) {
	t.Parallel()
	s := start(t, "    limits: [{name: t, limit: 10/s, scope: business, missing: refuse}]\n", nil, Options{})
	resp, body := s.do("GET", s.url("/x"), nil)
	own(t, resp, body, 400, codeMissingScope)
}

func TestStoreUnavailableIs503(t *testing.T) {
	t.Parallel()
	s := start(t, wide, nil, Options{Throttle: []throttle.Option{throttle.WithStore(brokenStore{})}})
	resp, body := s.do("GET", s.url("/x"), nil)
	m := own(t, resp, body, 503, codeStoreUnavailable)
	if m["provider"] != "vendor" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("body %s, Retry-After %q: want the provider and a Retry-After", body, resp.Header.Get("Retry-After"))
	}
}

type brokenStore struct{}

func (brokenStore) Reserve(context.Context, *quota.Request) (*quota.Reservation, error) {
	return nil, quota.ErrStore
}
func (brokenStore) Pause(context.Context, string, string, time.Duration) error { return quota.ErrStore }

func TestUpstreamFailureIs502(t *testing.T) {
	t.Parallel()
	s := start(t, wide, nil, Options{})
	s.vendor.Close()
	resp, body := s.do("GET", s.url("/x"), nil)
	m := own(t, resp, body, 502, codeUpstreamError)
	if msg, _ := m["message"].(string); !strings.Contains(msg, "refused") || strings.Contains(msg, s.vendor.Host()) {
		t.Errorf("message %q: want the kind of failure, without the vendor's address", msg)
	}
}

// An https request to a plain-http server names the flag that makes the
// /<host>/ form speak http to loopback hosts.
func TestHTTPSToAnHTTPServerNamesTheFlag(t *testing.T) {
	t.Parallel()
	s := start(t, wide, nil, Options{})
	base, _ := url.Parse("https://" + s.vendor.Host())
	p, err := New(Options{Registry: s.proxy.reg, Routes: []Route{{Name: "v", URL: base}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest("GET", "/v/x", nil))
	m := own(t, rec.Result(), rec.Body.Bytes(), 502, codeUpstreamError)
	if msg, _ := m["message"].(string); !strings.Contains(msg, "--insecure-upstream-http") {
		t.Errorf("message %q: want the flag named", msg)
	}
}

// The reasons given to clients keep the addresses in an error (a DNS
// server's, a vendor server's) to the log.
func TestUpstreamReasonHidesAddresses(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&net.DNSError{Err: "no such host", Name: "api.vendor.test", Server: "10.255.255.53:53", IsNotFound: true},
		&net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 6421}, Err: errors.New("no route to host")},
		&tls.CertificateVerificationError{Err: errors.New("x509: certificate signed by unknown authority")},
	} {
		msg := upstreamReason(err)
		for _, secret := range []string{"10.255.255.53", "10.1.2.3", "6421"} {
			if strings.Contains(msg, secret) {
				t.Errorf("upstreamReason(%v) = %q: shows %s", err, msg, secret)
			}
		}
		if !strings.Contains(msg, "log") {
			t.Errorf("upstreamReason(%v) = %q: want a pointer to the log", err, msg)
		}
	}
}

// The first event reaches the client while the vendor still holds the
// last one back: the stream is not buffered.
func TestEventStreamIsNotBuffered(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: last\n\n")
	})
	s := start(t, wide, handler, Options{})
	type first struct {
		body  io.ReadCloser
		lines *bufio.Reader
		line  string
		err   error
	}
	got := make(chan first, 1)
	go func() {
		// The response's headers, too, are held back by a buffering proxy.
		resp, err := s.srv.Client().Get(s.url("/stream"))
		if err != nil {
			got <- first{err: err}
			return
		}
		lines := bufio.NewReader(resp.Body)
		l, err := lines.ReadString('\n')
		got <- first{resp.Body, lines, l, err}
	}()
	var f first
	select {
	case f = <-got:
	case <-time.After(10 * time.Second):
		close(release)
		if f := <-got; f.body != nil {
			f.body.Close()
		}
		t.Fatal("the first event did not arrive while the vendor held the last one back")
	}
	close(release)
	if f.err != nil || f.line != "data: first\n" {
		t.Fatalf("first line %q, %v", f.line, f.err)
	}
	defer f.body.Close()
	rest, _ := io.ReadAll(f.lines)
	if string(rest) != "\ndata: last\n\n" {
		t.Errorf("rest of the stream %q", rest)
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	s := start(t, wide, nil, Options{})
	base, _ := url.Parse(s.vendor.URL + "/api/v2/")
	p, err := New(Options{Registry: s.proxy.reg, Routes: []Route{{Name: "vendor", URL: base}}})
	if err != nil {
		t.Fatal(err)
	}
	own := httptest.NewServer(p)
	defer own.Close()
	resp, err := http.Get(own.URL + "/vendor/items?x=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h, err := p.Upstream(base)
	if err != nil {
		t.Fatal(err)
	}
	port := httptest.NewServer(h)
	defer port.Close()
	resp, err = http.Get(port.URL + "/items?x=2")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	seen := s.vendorSaw()
	if len(seen) != 2 || seen[0].URL.String() != "/api/v2/items?x=1" || seen[1].URL.String() != "/api/v2/items?x=2" {
		t.Errorf("vendor saw %v, want /api/v2/items?x=1 and ?x=2", seen)
	}

	for _, r := range []Route{
		{Name: "a.b", URL: base},
		{Name: "", URL: base},
		{Name: "x", URL: &url.URL{Scheme: "https", Host: "unclaimed.example"}},
		{Name: "x", URL: &url.URL{Scheme: "ftp", Host: s.vendor.Host()}},
		{Name: "x", URL: &url.URL{Scheme: "http", Host: s.vendor.Host(), RawQuery: "a=1"}},
	} {
		if _, err := New(Options{Registry: s.proxy.reg, Routes: []Route{r}}); !errors.Is(err, errUsage) {
			t.Errorf("route %s=%v: got %v, want a usage error", r.Name, r.URL, err)
		}
	}
}

// Without LoopbackHTTP the /<host>/ form reaches even a loopback host over
// TLS.
func TestHostFormIsHTTPS(t *testing.T) {
	t.Parallel()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			w.WriteHeader(500)
			return
		}
		io.WriteString(w, "over tls")
	}))
	defer tlsSrv.Close()
	host := strings.TrimPrefix(tlsSrv.URL, "https://")
	cfg, err := providers.Load("t.yaml", []byte(fmt.Sprintf("providers:\n  v:\n    hosts: [%q]\n%s", host, wide)))
	if err != nil {
		t.Fatal(err)
	}
	upstream := NewUpstream(time.Minute)
	upstream.TLSClientConfig = &tls.Config{RootCAs: tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	p, err := New(Options{Registry: providers.NewRegistry(cfg), Upstream: upstream})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/" + host + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "over tls" {
		t.Errorf("got %d %q, want 200 over tls", resp.StatusCode, body)
	}
}

// A client that stalls in the middle of its body gets a 400 after the read
// timeout, not a connection held forever.
func TestStalledBodyTimesOut(t *testing.T) {
	t.Parallel()
	s := start(t, wide, nil, Options{})
	srv := httptest.NewServer(Timeouts(s.proxy, 100*time.Millisecond, time.Second))
	defer srv.Close()
	raw := "POST /" + s.vendor.Host() + "/x HTTP/1.1\r\nHost: p\r\nContent-Length: 10\r\n\r\nhalf"
	if status := rawStatus(t, srv.Listener.Addr().String(), raw); status != 400 {
		t.Errorf("stalled body: status %d, want 400", status)
	}
	if n := len(s.vendorSaw()); n != 0 {
		t.Errorf("vendor saw %d requests, want none", n)
	}
}

func TestParseHeaders(t *testing.T) {
	h := http.Header{}
	h.Set(headerBusiness, " acme ")
	h.Add(headerLabel, "class=batch, tier = gold")
	h.Add(headerLabel, "region=eu")
	h.Set(headerCost, "3")
	h.Set(headerLimitCost, "tokens=1200")
	h.Set(headerMaxWait, "1.5")
	v, err := parseHeaders(h)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s %v %v %v %v", v.business, v.cost, v.labels, v.limitCosts, v.maxWait)
	want := "acme 3 [{class batch 0} {tier gold 0} {region eu 0}] [{tokens 1200 1200}] 1.5s"
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	h.Set(headerMaxWait, "250ms")
	if v, err := parseHeaders(h); err != nil || v.maxWait != 250*time.Millisecond {
		t.Errorf("250ms: %v, %v", v, err)
	}
}

func FuzzParseHeaders(f *testing.F) {
	for _, s := range []string{"", "acme", "1", "1.5s", "a=1,b=2", "=", ",,,", "1e9", "NaN", "-0", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, name := range []string{headerBusiness, headerLabel, headerCost, headerLimitCost, headerMaxWait, "Throttle-X"} {
			v, err := parseHeaders(http.Header{name: {s}})
			if err == nil && v.hasMaxWait && (v.maxWait < 0 || v.maxWait > maxWaitCap) {
				t.Errorf("%s %q: max wait %v out of bounds", name, s, v.maxWait)
			}
			if err != nil && !errors.Is(err, errHeader) {
				t.Errorf("%s %q: %v does not wrap errHeader", name, s, err)
			}
		}
	})
}

// A graceful shutdown lets a request that waits for its slot keep waiting,
// and go: nothing ties a request to the server's life.
func TestShutdownLetsAWaitingRequestGo(t *testing.T) {
	t.Parallel()
	clock := quotatest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	store := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
	s := start(t, "    limits: [{name: peak, limit: 1/s}]\n", nil,
		Options{Throttle: []throttle.Option{throttle.WithStore(store), throttle.WithClock(clock)}})
	if resp, body := s.do("GET", s.url("/first"), nil); resp.StatusCode != 200 {
		t.Fatalf("first: %d %s", resp.StatusCode, body)
	}
	status := make(chan int, 1)
	go func() {
		resp, err := s.srv.Client().Get(s.url("/second"))
		if err != nil {
			t.Error(err)
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	for clock.Timers() == 0 { // the second request waits for its slot
		time.Sleep(time.Millisecond)
	}
	shut := make(chan error, 1)
	go func() { shut <- s.srv.Config.Shutdown(context.Background()) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while a request waited for its slot", err)
	default:
	}
	clock.Advance(time.Second)
	if got := <-status; got != 200 {
		t.Errorf("the waiting request got %d, want 200", got)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if a := s.vendor.Arrivals(); len(a) != 2 || a[1].Path != "/second" {
		t.Errorf("vendor saw %+v, want /first then /second", a)
	}
}

// A vendor's redirect is handed back (never followed by the proxy), with
// its Location pointing back through the proxy where the proxy can forward
// it, so that the client's next request is throttled too.
func TestRedirectsComeBackThroughTheProxy(t *testing.T) {
	t.Parallel()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/moved", "/moved":
			w.Header().Set("Location", r.URL.Query().Get("to"))
			w.WriteHeader(http.StatusMovedPermanently)
		default:
			io.WriteString(w, "at "+r.URL.RequestURI())
		}
	})
	s := start(t, wide, handler, Options{})
	base, _ := url.Parse(s.vendor.URL + "/api")
	p, err := New(Options{Registry: s.proxy.reg, LoopbackHTTP: true, Routes: []Route{{Name: "v", URL: base}}})
	if err != nil {
		t.Fatal(err)
	}
	main := httptest.NewServer(p)
	defer main.Close()
	h, err := p.Upstream(base)
	if err != nil {
		t.Fatal(err)
	}
	port := httptest.NewServer(h)
	defer port.Close()

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	vhost := s.vendor.Host()
	for _, c := range []struct{ from, to, want string }{
		{main.URL + "/" + vhost + "/moved", "/new?x=1#top", main.URL + "/" + vhost + "/new?x=1#top"},
		{main.URL + "/" + vhost + "/moved", s.vendor.URL + "/abs", main.URL + "/" + vhost + "/abs"},
		{main.URL + "/" + vhost + "/moved", "https://unclaimed.example/x", "https://unclaimed.example/x"},
		{main.URL + "/v/moved", "/api/new", main.URL + "/v/new"},
		{main.URL + "/v/moved", "/elsewhere", main.URL + "/" + vhost + "/elsewhere"},
		{port.URL + "/moved", "/api/new", port.URL + "/new"},
		{port.URL + "/moved", "/elsewhere", s.vendor.URL + "/elsewhere"},
	} {
		resp, err := noFollow.Get(c.from + "?to=" + url.QueryEscape(c.to))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Location"); resp.StatusCode != 301 || got != c.want {
			t.Errorf("%s to %s: got %d Location %q, want 301 %q", c.from, c.to, resp.StatusCode, got, c.want)
		}
	}
	// A client that follows redirects stays within the proxy.
	resp, err := http.Get(main.URL + "/v/moved?to=" + url.QueryEscape("/api/new?y=2"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "at /api/new?y=2" {
		t.Errorf("followed: %q", body)
	}
}

// Whatever the path and headers, the proxy answers; it never panics, and
// sends nothing to a host no provider claims.
func FuzzServeHTTP(f *testing.F) {
	for _, s := range []string{"", "api.vendor.test/x", "api.vendor.test:443/a%2Fb?q=1", "v/x", "[::1]:80/x",
		"a..b/x", "-a/x", "api.vendor.test:0/x", "api.vendor.test:65536/x", "%41/x", "x:y:z/", "//x"} {
		f.Add(s, "acme", "2")
	}
	mock := httpmock.NewMockTransport()
	mock.RegisterNoResponder(func(r *http.Request) (*http.Response, error) {
		if r.URL.Hostname() != "api.vendor.test" {
			return nil, fmt.Errorf("sent to %s", r.URL.Host)
		}
		return httpmock.NewStringResponse(200, "ok"), nil
	})
	cfg, err := providers.Load("t.yaml", []byte("providers:\n  v:\n    hosts: [api.vendor.test]\n    on_limit: fail\n"+wide))
	if err != nil {
		f.Fatal(err)
	}
	base, _ := url.Parse("https://api.vendor.test/base")
	p, err := New(Options{Registry: providers.NewRegistry(cfg), Upstream: mock, Log: slog.New(slog.DiscardHandler),
		Routes: []Route{{Name: "v", URL: base}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path, business, cost string) {
		u, err := url.ParseRequestURI("/" + path)
		if err != nil {
			return
		}
		r := &http.Request{Method: "GET", URL: u, Host: "proxy", Header: http.Header{}, RequestURI: u.RequestURI()}
		r.Header.Set(headerBusiness, business)
		r.Header.Set(headerCost, cost)
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r.WithContext(context.Background()))
		if w.Code == http.StatusBadGateway {
			t.Errorf("%q: status %d, body %s", path, w.Code, w.Body)
		}
	})
}
