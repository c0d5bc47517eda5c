package throttle_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

const vendorYAML = `
providers:
  vendor:
    hosts: [api.vendor.test]
    on_limit: wait
    max_wait: 10s
    limits:
      - {name: peak, limit: 1/s, burst: 1}
  slow:
    hosts: [slow.vendor.test]
    on_limit: wait
    max_wait: 10m
    limits:
      - {name: minute, limit: 1/min, burst: 1}
  failfast:
    hosts: [fail.vendor.test]
    on_limit: fail
    limits:
      - {name: peak, limit: 1/s, burst: 1}
      - {name: per-business, limit: 5/min, scope: business, missing: skip}
  shadow:
    hosts: [shadow.vendor.test]
    mode: shadow
    on_limit: fail
    limits:
      - {name: peak, limit: 1/s, burst: 1}
  labelled:
    hosts: [labels.vendor.test]
    on_limit: fail
    limits:
      - {name: batch, limit: 1/min, scope: "label:class", missing: skip, only: [batch]}
`

type recorder struct {
	mu     sync.Mutex
	events []throttle.Event
}

func (r *recorder) Observe(_ context.Context, e throttle.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Items, e.Statuses = nil, nil
	r.events = append(r.events, e)
}

func (r *recorder) snapshot() []throttle.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *recorder) kinds() []throttle.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var k []throttle.EventKind
	for _, e := range r.events {
		k = append(k, e.Kind)
	}
	return k
}

type fixture struct {
	t     *testing.T
	clock *quotatest.Clock
	mock  *httpmock.MockTransport
	rt    *throttle.Transport
	obs   *recorder
}

func newFixture(t *testing.T, yaml string, opts ...throttle.Option) *fixture {
	t.Helper()
	cfg, err := providers.Load("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	f := &fixture{t: t, clock: quotatest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)),
		mock: httpmock.NewMockTransport(), obs: &recorder{}}
	f.mock.RegisterNoResponder(httpmock.NewStringResponder(200, "ok"))
	store := quota.NewMemoryStore(quota.MemoryOptions{Clock: f.clock})
	opts = append([]throttle.Option{
		throttle.WithRegistry(providers.NewRegistry(cfg)),
		throttle.WithStore(store),
		throttle.WithBase(f.mock),
		throttle.WithClock(f.clock),
		throttle.WithObserver(f.obs),
	}, opts...)
	f.rt, err = throttle.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return f
}

func (f *fixture) do(ctx context.Context, method, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	resp, err := f.rt.RoundTrip(req)
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

func TestUnmatchedHostPassesThrough(t *testing.T) {
	t.Parallel()
	f := newFixture(t, vendorYAML)
	for i := 0; i < 10; i++ {
		if _, err := f.do(context.Background(), "GET", "https://elsewhere.test/x"); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.mock.GetTotalCallCount(); got != 10 {
		t.Errorf("sent %d, want 10", got)
	}
	if k := f.obs.kinds(); len(k) != 0 {
		t.Errorf("an unmatched host produced events %v", k)
	}
}

func TestFailFastRefusesWithLimitError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, vendorYAML)
	if _, err := f.do(context.Background(), "GET", "https://fail.vendor.test/x"); err != nil {
		t.Fatal(err)
	}
	body := &trackingBody{Reader: strings.NewReader("payload")}
	req, _ := http.NewRequest("POST", "https://fail.vendor.test/x", body)
	resp, err := f.rt.RoundTrip(req)
	if resp != nil {
		t.Errorf("got a response %v with a refusal", resp.Status)
	}
	var le *throttle.LimitError
	if !errors.As(err, &le) || !errors.Is(err, throttle.ErrLimited) {
		t.Fatalf("got %v, want a *LimitError matching ErrLimited", err)
	}
	if le.Provider != "failfast" || le.Limit != "peak" || le.RetryAfter != time.Second || le.Deadline {
		t.Errorf("got %+v, want provider failfast, limit peak, retry after 1s, not a deadline", le)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Error("a max-wait refusal matches context.DeadlineExceeded")
	}
	if !body.closed {
		t.Error("the refused request's body was not closed")
	}
	if got := f.mock.GetTotalCallCount(); got != 1 {
		t.Errorf("the vendor saw %d requests, want 1", got)
	}
}

type trackingBody struct {
	io.Reader
	closed bool
}

func (b *trackingBody) Close() error { b.closed = true; return nil }

func TestDeadlineShorterThanWaitFailsAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, vendorYAML)
	if _, err := f.do(context.Background(), "GET", "https://slow.vendor.test/x"); err != nil {
		t.Fatal(err)
	}
	// The next slot is a minute away, within max_wait but past the
	// deadline: the transport must refuse at once, not sleep until the
	// deadline and fail then (the fake clock never moves, so a sleeping
	// transport would return the context's own error after 30s).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := f.do(ctx, "GET", "https://slow.vendor.test/x")
	var le *throttle.LimitError
	if !errors.As(err, &le) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, throttle.ErrLimited) {
		t.Fatalf("got %v, want a *LimitError matching ErrLimited and context.DeadlineExceeded", err)
	}
	if !le.Deadline || le.RetryAfter != time.Minute {
		t.Errorf("got %+v, want Deadline and RetryAfter 1m", le)
	}
}

// startRequest runs a request in the background and returns its result.
func (f *fixture) startRequest(ctx context.Context, url string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := f.do(ctx, "GET", url)
		done <- err
	}()
	return done
}

// waitForTimers blocks until n requests are waiting on the clock.
func (f *fixture) waitForTimers(n int) {
	for f.clock.Timers() < n {
		time.Sleep(time.Millisecond)
	}
}

func TestWaitsForTheReservedSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, vendorYAML)
	if _, err := f.do(context.Background(), "GET", "https://api.vendor.test/x"); err != nil {
		t.Fatal(err)
	}
	done := f.startRequest(context.Background(), "https://api.vendor.test/x")
	f.waitForTimers(1)
	if got := f.mock.GetTotalCallCount(); got != 1 {
		t.Fatalf("sent %d before the slot, want 1", got)
	}
	f.clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.mock.GetTotalCallCount(); got != 2 {
		t.Errorf("sent %d after the slot, want 2", got)
	}
}

func TestCancelledWaitGivesTheSlotBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t, vendorYAML)
	if _, err := f.do(context.Background(), "GET", "https://api.vendor.test/x"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := f.startRequest(ctx, "https://api.vendor.test/x")
	f.waitForTimers(1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	// The slot at +1s is free again: the next request waits 1s, not 2s.
	ctx2 := throttle.WithMaxWait(context.Background(), time.Second)
	done = f.startRequest(ctx2, "https://api.vendor.test/x")
	f.waitForTimers(1)
	f.clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("after the cancel, a request with max wait 1s: %v", err)
	}
	if got := f.mock.GetTotalCallCount(); got != 2 {
		t.Errorf("sent %d, want 2 (the cancelled one never went)", got)
	}
	assertHas(t, f.obs.kinds(), throttle.Cancelled)
}

func assertHas(t *testing.T, kinds []throttle.EventKind, want throttle.EventKind) {
	t.Helper()
	for _, k := range kinds {
		if k == want {
			return
		}
	}
	t.Errorf("events %v lack %v", kinds, want)
}

func TestShadowModeNeverDelaysNorRefuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t, vendorYAML)
	for i := 0; i < 5; i++ {
		if _, err := f.do(context.Background(), "GET", "https://shadow.vendor.test/x"); err != nil {
			t.Fatalf("shadow request %d: %v", i, err)
		}
	}
	if got := f.mock.GetTotalCallCount(); got != 5 {
		t.Errorf("sent %d, want 5", got)
	}
	refused := 0
	for _, e := range f.obs.events {
		if e.Kind == throttle.Refused {
			refused++
			if !e.Shadow {
				t.Errorf("refusal event %+v not marked shadow", e)
			}
		}
	}
	if refused != 4 {
		t.Errorf("recorded %d shadow refusals, want 4", refused)
	}
}

func TestUpstream429PausesTheProvider(t *testing.T) {
	t.Parallel()
	f := newFixture(t, vendorYAML)
	f.mock.RegisterResponder("GET", "https://fail.vendor.test/busy", func(*http.Request) (*http.Response, error) {
		r := httpmock.NewStringResponse(429, `{"error":"rate limited"}`)
		r.Header.Set("Retry-After", "5")
		return r, nil
	})
	resp, err := f.do(context.Background(), "GET", "https://fail.vendor.test/busy")
	if err != nil || resp.StatusCode != 429 {
		t.Fatalf("got (%v, %v), want the 429 response itself", resp, err)
	}
	f.clock.Advance(2 * time.Second) // the peak limit is free again; the pause is not
	_, err = f.do(context.Background(), "GET", "https://fail.vendor.test/x")
	var le *throttle.LimitError
	if !errors.As(err, &le) || le.Limit != "pause" || le.RetryAfter != 3*time.Second {
		t.Fatalf("got %v, want a refusal by the pause, retry after 3s", err)
	}
	assertHas(t, f.obs.kinds(), throttle.UpstreamThrottled)
	assertHas(t, f.obs.kinds(), throttle.Paused)
}

func TestBusinessesHaveTheirOwnLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, vendorYAML)
	for i := 0; i < 5; i++ {
		f.clock.Advance(time.Second)
		if _, err := f.do(throttle.WithBusiness(context.Background(), "acme"), "GET", "https://fail.vendor.test/x"); err != nil {
			t.Fatalf("acme request %d: %v", i, err)
		}
	}
	f.clock.Advance(time.Second)
	_, err := f.do(throttle.WithBusiness(context.Background(), "acme"), "GET", "https://fail.vendor.test/x")
	var le *throttle.LimitError
	if !errors.As(err, &le) || le.Limit != "per-business" || le.Scope != "acme" {
		t.Fatalf("acme's 6th request in a minute: got %v, want a refusal by per-business for acme", err)
	}
	if _, err := f.do(throttle.WithBusiness(context.Background(), "globex"), "GET", "https://fail.vendor.test/x"); err != nil {
		t.Fatalf("globex's first request: %v", err)
	}
}

func TestLabelScopedLimitAppliesOnlyToItsClass(t *testing.T) {
	t.Parallel()
	f := newFixture(t, vendorYAML)
	batch := throttle.WithLabel(context.Background(), "class", "batch")
	if _, err := f.do(batch, "GET", "https://labels.vendor.test/x"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.do(batch, "GET", "https://labels.vendor.test/x"); !errors.Is(err, throttle.ErrLimited) {
		t.Fatalf("second batch request in a minute: got %v, want ErrLimited", err)
	}
	for i := 0; i < 3; i++ {
		interactive := throttle.WithLabel(context.Background(), "class", "interactive")
		if _, err := f.do(interactive, "GET", "https://labels.vendor.test/x"); err != nil {
			t.Fatalf("interactive request %d: %v", i, err)
		}
	}
}

func TestRequestIsNotModified(t *testing.T) {
	t.Parallel()
	f := newFixture(t, vendorYAML)
	req, _ := http.NewRequest("POST", "https://api.vendor.test/x?a=1", strings.NewReader("body"))
	req.Header.Set("X-Test", "1")
	before := req.Clone(context.Background())
	resp, err := f.rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.URL.String() != before.URL.String() || req.Method != before.Method || len(req.Header) != len(before.Header) ||
		req.Header.Get("X-Test") != "1" || req.Host != before.Host {
		t.Errorf("request changed: %+v, was %+v", req, before)
	}
}

func TestInvalidCostIsAnErrorNotASend(t *testing.T) {
	t.Parallel()
	f := newFixture(t, vendorYAML)
	_, err := f.do(throttle.WithCost(context.Background(), 50), "GET", "https://api.vendor.test/x")
	if !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("cost above the burst: got %v, want quota.ErrInvalid", err)
	}
	if got := f.mock.GetTotalCallCount(); got != 0 {
		t.Errorf("sent %d, want 0", got)
	}
}

func TestFailingStorePolicies(t *testing.T) {
	t.Parallel()
	yaml := `
providers:
  closed:
    hosts: [closed.test]
    on_store_error: fail_closed
    limits: [{name: peak, limit: 10/s}]
  open:
    hosts: [open.test]
    on_store_error: fail_open
    limits: [{name: peak, limit: 1/s, burst: 1}]
  local:
    hosts: [local.test]
    on_store_error: local
    local_share: 50%
    on_limit: fail
    limits: [{name: peak, limit: 4/s}]
`
	f := newFixture(t, yaml, throttle.WithStore(brokenStore{}))
	if _, err := f.do(context.Background(), "GET", "https://closed.test/x"); !errors.Is(err, throttle.ErrStoreUnavailable) || !errors.Is(err, quota.ErrStore) {
		t.Errorf("fail_closed: got %v, want ErrStoreUnavailable wrapping the store's error", err)
	}
	for i := 0; i < 3; i++ {
		if _, err := f.do(context.Background(), "GET", "https://open.test/x"); err != nil {
			t.Errorf("fail_open request %d: %v", i, err)
		}
	}
	// local: half of 4/s is a burst of 2 in this process.
	for i := 0; i < 2; i++ {
		if _, err := f.do(context.Background(), "GET", "https://local.test/x"); err != nil {
			t.Fatalf("local request %d: %v", i, err)
		}
	}
	if _, err := f.do(context.Background(), "GET", "https://local.test/x"); !errors.Is(err, throttle.ErrLimited) {
		t.Errorf("local request beyond the share: got %v, want ErrLimited", err)
	}
	assertHas(t, f.obs.kinds(), throttle.StoreError)
	assertHas(t, f.obs.kinds(), throttle.FellBack)
}

type brokenStore struct{}

func (brokenStore) Reserve(context.Context, *quota.Request) (*quota.Reservation, error) {
	return nil, quota.ErrStore
}
func (brokenStore) Pause(context.Context, string, string, time.Duration) error { return quota.ErrStore }

func TestNewClientRetriesThrottledThenSucceeds(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		calls++
		bodies = append(bodies, string(b))
		if calls == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write([]byte("done"))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	cfg, err := providers.Load("t.yaml", []byte("providers:\n  v:\n    hosts: [\""+host+"\"]\n    limits: [{name: peak, limit: 100/s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := throttle.NewClient(throttle.WithRegistry(providers.NewRegistry(cfg)),
		throttle.WithRetries(2, time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post(srv.URL+"/charge", "text/plain", bytes.NewBufferString("amount=1"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != "done" {
		t.Errorf("got %d %q, want 200 done", resp.StatusCode, got)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 || bodies[0] != "amount=1" || bodies[1] != "amount=1" {
		t.Errorf("vendor saw %d calls with bodies %q, want 2 with the body replayed", calls, bodies)
	}
}

// TestRetryAfterZeroRetriesAtOnce (D13): Retry-After: 0 means "now", so a
// throttled response that says it pauses nothing and the retry goes at
// once. The requests may not wait at all (max wait 0): a pause of any
// length, as the 1 s DefaultPause once was, would refuse the retry.
func TestRetryAfterZeroRetriesAtOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls <= 2 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write([]byte("done"))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	cfg, err := providers.Load("t.yaml", []byte("providers:\n  v:\n    hosts: [\""+host+"\"]\n    limits: [{name: peak, limit: 100/s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	obs := &recorder{}
	client, err := throttle.NewClient(throttle.WithRegistry(providers.NewRegistry(cfg)), throttle.WithObserver(obs),
		throttle.WithRetries(4, time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(throttle.WithMaxWait(context.Background(), 0), "GET", srv.URL+"/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("Do: %v; want the retries to go at once", err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != "done" {
		t.Errorf("got %d %q, want 200 done", resp.StatusCode, got)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 3 {
		t.Errorf("the vendor saw %d calls, want 3", calls)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	throttled := 0
	for _, e := range obs.events {
		switch {
		case e.Kind == throttle.UpstreamThrottled:
			throttled++
			if e.Wait != 0 {
				t.Errorf("UpstreamThrottled with Wait %v, want 0", e.Wait)
			}
		case e.Kind == throttle.Paused || e.Kind == throttle.Waited || e.Kind == throttle.Refused:
			t.Errorf("%v event (wait %v): Retry-After: 0 pauses nothing", e.Kind, e.Wait)
		}
	}
	if throttled != 2 {
		t.Errorf("%d UpstreamThrottled events, want 2", throttled)
	}
}

// TestRetriesReuseTheConnection (D14): a throttled response whose body is
// over go-retryablehttp's 4 KiB drain still leaves its connection open for
// the retry: one connection for the whole exchange, not one per attempt.
func TestRetriesReuseTheConnection(t *testing.T) {
	t.Parallel()
	const throttles = 5
	var mu sync.Mutex
	calls, conns := 0, 0
	page := strings.Repeat("<p>Too many requests. Please slow down.</p>\n", 10<<10/45) // 10 KB
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n <= throttles {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, page)
			return
		}
		io.WriteString(w, "done")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	host := strings.TrimPrefix(srv.URL, "http://")
	cfg, err := providers.Load("t.yaml", []byte("providers:\n  v:\n    hosts: [\""+host+"\"]\n    limits: [{name: peak, limit: 100/s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := throttle.NewClient(throttle.WithRegistry(providers.NewRegistry(cfg)), throttle.WithBase(base),
		throttle.WithRetries(throttles, time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != "done" {
		t.Fatalf("got %d %q, want 200 done", resp.StatusCode, got)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != throttles+1 || conns != 1 {
		t.Errorf("%d attempts opened %d connections, want %d attempts on 1", calls, conns, throttles+1)
	}
}

// A POST is retried after a connection failure only when it carries an
// Idempotency-Key: the policy must see the request's headers.
func TestNewClientRetriesPostOnlyWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"", "key-1"} {
		mock := httpmock.NewMockTransport()
		calls := 0
		mock.RegisterNoResponder(func(*http.Request) (*http.Response, error) {
			calls++
			if calls == 1 {
				return nil, io.ErrUnexpectedEOF
			}
			return httpmock.NewStringResponse(200, "ok"), nil
		})
		cfg, err := providers.Load("t.yaml", []byte("providers:\n  v:\n    hosts: [api.vendor.test]\n    limits: [{name: peak, limit: 100/s}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		client, err := throttle.NewClient(throttle.WithRegistry(providers.NewRegistry(cfg)), throttle.WithBase(mock),
			throttle.WithRetries(2, time.Millisecond, time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", "https://api.vendor.test/charges", strings.NewReader("x"))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		if resp != nil {
			resp.Body.Close()
		}
		if key == "" && (err == nil || calls != 1) {
			t.Errorf("POST without a key: %d calls, err %v; want 1 call and the error", calls, err)
		}
		if key != "" && (err != nil || calls != 2) {
			t.Errorf("POST with a key: %d calls, err %v; want a retry that succeeds", calls, err)
		}
	}
}

// A model API limits requests and tokens per minute: one decision charges
// the request 1 and its tokens n, so a large prompt waits for tokens
// while small ones keep flowing.
func TestLimitCostChargesOneLimitDifferently(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `
providers:
  model:
    hosts: [api.model.test]
    on_limit: fail
    limits:
      - {name: rpm, limit: 10/min}
      - {name: tpm, limit: 1000/min}
`)
	big := throttle.WithLimitCost(context.Background(), "tpm", 900)
	if _, err := f.do(big, "POST", "https://api.model.test/v1/chat"); err != nil {
		t.Fatal(err)
	}
	_, err := f.do(throttle.WithLimitCost(context.Background(), "tpm", 200), "POST", "https://api.model.test/v1/chat")
	var le *throttle.LimitError
	if !errors.As(err, &le) || le.Limit != "tpm" {
		t.Fatalf("200 more tokens: got %v, want a refusal by tpm", err)
	}
	for i := 0; i < 5; i++ { // small requests still fit: 1 token each
		if _, err := f.do(throttle.WithLimitCost(context.Background(), "tpm", 1), "POST", "https://api.model.test/v1/chat"); err != nil {
			t.Fatalf("small request %d: %v", i, err)
		}
	}
	if _, err := f.do(throttle.WithLimitCost(context.Background(), "tpm", 2000), "POST", "https://api.model.test/v1/chat"); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("more tokens than the limit holds: got %v, want quota.ErrInvalid", err)
	}
}

// While the store is down, the in-process limiter charges each limit its
// own cost, as the store would: a request's tokens still count in full.
func TestLocalFallbackKeepsPerLimitCosts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `
providers:
  model:
    hosts: [api.model.test]
    on_limit: fail
    on_store_error: local
    local_share: 50%
    limits:
      - {name: rpm, limit: 100/min}
      - {name: tpm, limit: 2000/min}
`, throttle.WithStore(brokenStore{}))
	tokens := throttle.WithLimitCost(context.Background(), "tpm", 600) // the local share of tpm holds 1,000
	if _, err := f.do(tokens, "POST", "https://api.model.test/v1/chat"); err != nil {
		t.Fatal(err)
	}
	_, err := f.do(tokens, "POST", "https://api.model.test/v1/chat")
	var le *throttle.LimitError
	if !errors.As(err, &le) || le.Limit != "tpm" {
		t.Fatalf("1,200 tokens against a local share of 1,000: got %v, want a refusal by tpm", err)
	}
}

// The client's CheckRedirect decides about redirects: the retrying layer
// inside must hand a 3xx back rather than follow it itself (a proxy built on
// the client passes redirects to its caller, and a caller who turned
// redirects off must get the 3xx).
func TestClientLeavesRedirectsToItsCheckRedirect(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			w.Write([]byte("followed"))
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	cfg, err := providers.Load("t.yaml", []byte("providers:\n  v:\n    hosts: [\""+host+"\"]\n    limits: [{name: peak, limit: 100/s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := throttle.NewClient(throttle.WithRegistry(providers.NewRegistry(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Get(srv.URL + "/start")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Errorf("got %d %q, want the 302 itself: redirects are the caller's CheckRedirect's to follow", resp.StatusCode, body)
	}

	// With the default CheckRedirect the client still follows them.
	client.CheckRedirect = nil
	resp, err = client.Get(srv.URL + "/start")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "followed" {
		t.Errorf("default CheckRedirect: got %d %q, want 200 followed", resp.StatusCode, body)
	}
}

// A Transport not made by New fails every request with a clear error
// instead of panicking, and closes the request's body.
func TestZeroTransportFailsClearly(t *testing.T) {
	t.Parallel()
	var zero throttle.Transport
	body := &closeRecorder{Reader: strings.NewReader("x")}
	req := httptest.NewRequest("POST", "https://api.example.test/", body)
	if _, err := zero.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "throttle.New") {
		t.Errorf("RoundTrip on a zero Transport = %v, want an error naming throttle.New", err)
	}
	if !body.closed {
		t.Error("the request's body was not closed")
	}
	if _, err := zero.Client().Get("https://api.example.test/"); err == nil || !strings.Contains(err.Error(), "throttle.New") {
		t.Errorf("Client().Get on a zero Transport = %v, want an error naming throttle.New", err)
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }
