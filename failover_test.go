package throttle_test

// Failure tests against a real redis-server that is stopped and restarted
// in the middle of the test, and pauses that travel across a fleet
// through Redis.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

// failoverStoreRetry is how long the transport leaves a failed store
// alone before trying it again.
const failoverStoreRetry = 50 * time.Millisecond

// failoverDeadline bounds every request of these tests. No store call
// may come near it: a request that returns with its context still alive
// did not hang on the store.
const failoverDeadline = 10 * time.Second

// failoverDo sends a GET through client under failoverDeadline and
// returns the status (0 with an error) and the error; it fails the test
// when the request outlived its context.
func failoverDo(t *testing.T, ctx context.Context, client *http.Client, url string) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, failoverDeadline)
	defer cancel()
	resp, err := e2eDo(ctx, client, "GET", url, "")
	if ctx.Err() != nil {
		t.Fatalf("GET %s: the request ran until its context ended (%v): it hung", url, err)
	}
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestFailoverStorePolicies stops the real Redis under a transport and
// starts it again: fail_closed refuses with ErrStoreUnavailable while it
// is down and admits again once it is back; fail_open sends; local
// limits in process at local_share, and goes back to the shared quota
// after the restart.
func TestFailoverStorePolicies(t *testing.T) {
	t.Parallel()
	closed := e2eVendor(t, throttletest.Options{})
	open := e2eVendor(t, throttletest.Options{})
	local := e2eVendor(t, throttletest.Options{})
	yaml := `
providers:
  closed:
    hosts: ["` + closed.Host() + `"]
    on_store_error: fail_closed
    limits: [{name: peak, limit: 100/s}]
  open:
    hosts: ["` + open.Host() + `"]
    on_store_error: fail_open
    limits: [{name: peak, limit: 100/s}]
  local:
    hosts: ["` + local.Host() + `"]
    on_store_error: local
    local_share: 50%
    on_limit: fail
    limits: [{name: hourly, limit: 10/h, burst: 10}]
`
	srv := redistest.Start(t)
	store, err := redisstore.New(srv.Client(t), redisstore.Options{Timeout: fleetStoreTimeout})
	if err != nil {
		t.Fatal(err)
	}
	events := &e2eEvents{}
	_, client := e2eTransport(t, yaml, "", throttle.WithStore(store),
		throttle.WithStoreRetry(failoverStoreRetry), throttle.WithObserver(events))
	bg := context.Background()

	for _, v := range []*throttletest.Vendor{closed, open, local} {
		if status, err := failoverDo(t, bg, client, v.URL); status != 200 {
			t.Fatalf("%s with Redis up: (%d, %v), want 200", v.Host(), status, err)
		}
	}

	srv.Stop(t)

	// fail_closed: refused, with the store's error, and never sent.
	for i := 0; i < 3; i++ {
		_, err := failoverDo(t, bg, client, closed.URL)
		if !errors.Is(err, throttle.ErrStoreUnavailable) {
			t.Errorf("fail_closed, Redis down, request %d: got %v, want ErrStoreUnavailable", i, err)
		}
	}
	if served, _ := closed.Counts(); served != 1 {
		t.Errorf("fail_closed: the vendor served %d, want only the one before Redis stopped", served)
	}
	// fail_open: sent.
	for i := 0; i < 3; i++ {
		if status, err := failoverDo(t, bg, client, open.URL); status != 200 {
			t.Errorf("fail_open, Redis down, request %d: (%d, %v), want 200", i, status, err)
		}
	}
	// local: half of the hourly 10 in this process; the one spent in
	// Redis before it stopped is not known here.
	for i := 0; i < 5; i++ {
		if status, err := failoverDo(t, bg, client, local.URL); status != 200 {
			t.Errorf("local, Redis down, request %d: (%d, %v), want 200", i, status, err)
		}
	}
	if _, err := failoverDo(t, bg, client, local.URL); !errors.Is(err, throttle.ErrLimited) {
		t.Errorf("local, Redis down, beyond the local share: got %v, want ErrLimited", err)
	}

	srv.Restart(t)

	// Back: after at most the retry interval, the store decides again.
	deadline := time.Now().Add(failoverDeadline)
	for {
		status, err := failoverDo(t, bg, client, closed.URL)
		if status == 200 {
			break
		}
		if !errors.Is(err, throttle.ErrStoreUnavailable) || time.Now().After(deadline) {
			t.Fatalf("fail_closed after the restart: (%d, %v), want 200 once the store answers", status, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// local is decided by Redis again: its state, empty after the
	// restart, admits the whole burst of 10, not the local share's 5.
	for i := 0; i < 10; i++ {
		if status, err := failoverDo(t, bg, client, local.URL); status != 200 {
			t.Errorf("local after the restart, request %d: (%d, %v), want 200", i, status, err)
		}
	}
	if _, err := failoverDo(t, bg, client, local.URL); !errors.Is(err, throttle.ErrLimited) {
		t.Errorf("local after the restart, beyond the burst of 10: got %v, want ErrLimited", err)
	}

	kinds := events.kinds()
	for _, want := range []throttle.EventKind{throttle.StoreError, throttle.FellBack} {
		found := false
		for _, k := range kinds {
			found = found || k == want
		}
		if !found {
			t.Errorf("no %v event while Redis was down", want)
		}
	}
}

// TestFailoverHungRedisNeverHangsARequest: a Redis that accepts
// connections and never answers (hung, or a network that drops replies)
// costs a request at most the store's timeout: fail_closed refuses with
// ErrStoreUnavailable wrapping quota.ErrStore, long before the request's
// own deadline.
func TestFailoverHungRedisNeverHangsARequest(t *testing.T) {
	t.Parallel()
	addr := failoverBlackHole(t)
	v := e2eVendor(t, throttletest.Options{})
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	store, err := redisstore.New(rc, redisstore.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, client := e2eTransport(t, `
providers:
  vendor:
    hosts: ["HOST"]
    on_store_error: fail_closed
    limits: [{name: peak, limit: 100/s}]
`, v.Host(), throttle.WithStore(store), throttle.WithStoreRetry(failoverStoreRetry))
	for i := 0; i < 3; i++ {
		_, err := failoverDo(t, context.Background(), client, v.URL)
		if !errors.Is(err, throttle.ErrStoreUnavailable) || !errors.Is(err, quota.ErrStore) {
			t.Errorf("request %d: got %v, want ErrStoreUnavailable wrapping quota.ErrStore", i, err)
		}
		time.Sleep(failoverStoreRetry)
	}
	if served, _ := v.Counts(); served != 0 {
		t.Errorf("the vendor served %d, want none", served)
	}
}

// failoverBlackHole listens on a loopback port, accepts connections, reads
// whatever comes and never answers. It stops when the test ends.
func failoverBlackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// TestFailoverPausePropagatesAcrossTheFleet: transport A receives a 429
// with Retry-After: 2 and pauses the provider in Redis; transport B, with
// its own Redis client, is refused at once by the pause (its provider
// fails rather than waits), and transport C, which waits, sends only
// after the pause.
func TestFailoverPausePropagatesAcrossTheFleet(t *testing.T) {
	t.Parallel()
	v := e2eVendor(t, throttletest.Options{RetryAfter: 2 * time.Second})
	const yaml = `
providers:
  vendor:
    hosts: ["HOST"]
    on_limit: ONLIMIT
    signals:
      throttled: [{status: 429}]
      max_delay: 1m
    limits: [{name: peak, limit: 100/s}]
`
	srv := redistest.Start(t)
	member := func(onLimit string, opts ...throttle.Option) *http.Client {
		store, err := redisstore.New(srv.Client(t), redisstore.Options{Timeout: fleetStoreTimeout})
		if err != nil {
			t.Fatal(err)
		}
		_, client := e2eTransport(t, strings.ReplaceAll(yaml, "ONLIMIT", onLimit), v.Host(),
			append([]throttle.Option{throttle.WithStore(store)}, opts...)...)
		return client
	}
	a := member("wait", throttle.WithRetries(0, time.Millisecond, time.Millisecond))
	b := member("fail")
	c := member("wait")

	v.ThrottleNext(1)
	if status, err := failoverDo(t, context.Background(), a, v.URL+"/a"); status != http.StatusTooManyRequests {
		t.Fatalf("A: (%d, %v), want the vendor's 429 (no retries)", status, err)
	}
	_, err := failoverDo(t, context.Background(), b, v.URL+"/b")
	var le *throttle.LimitError
	if !errors.As(err, &le) || le.Limit != "pause" || le.Provider != "vendor" || le.RetryAfter <= 0 || le.RetryAfter > 2*time.Second {
		t.Fatalf("B during A's pause: got %v, want a *LimitError by the pause, retry after at most 2s", err)
	}
	if status, err := failoverDo(t, context.Background(), c, v.URL+"/c"); status != 200 {
		t.Fatalf("C: (%d, %v), want 200 after the pause", status, err)
	}
	var hit, sent time.Time
	for _, a := range v.Arrivals() {
		switch a.Path {
		case "/a":
			hit = a.At
		case "/c":
			sent = a.At
		case "/b":
			t.Errorf("B's request reached the vendor during the pause")
		}
	}
	if gap := sent.Sub(hit); gap < 2*time.Second {
		t.Errorf("C was sent %v after A's 429, within the 2s pause", gap)
	}
}

// TestFailoverLocalFallbackHonoursUpstreamPauses: while the store is
// down, a provider with on_store_error: local is decided by the
// in-process limiter, and an upstream 429 must pause that limiter too, or
// this process would go on sending through the vendor's Retry-After.
func TestFailoverLocalFallbackHonoursUpstreamPauses(t *testing.T) {
	t.Parallel()
	v := e2eVendor(t, throttletest.Options{RetryAfter: 2 * time.Second})
	srv := redistest.Start(t)
	store, err := redisstore.New(srv.Client(t), redisstore.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, client := e2eTransport(t, `
providers:
  vendor:
    hosts: ["HOST"]
    on_store_error: local
    local_share: 50%
    limits: [{name: peak, limit: 100/s}]
`, v.Host(), throttle.WithStore(store), throttle.WithRetries(0, time.Millisecond, time.Millisecond))
	srv.Stop(t)

	v.ThrottleNext(1)
	if status, err := failoverDo(t, context.Background(), client, v.URL); status != http.StatusTooManyRequests {
		t.Fatalf("the throttled request: (%d, %v), want the vendor's 429", status, err)
	}
	// Within the vendor's 2 s, a request that will not wait:
	status, err := failoverDo(t, throttle.WithMaxWait(context.Background(), 0), client, v.URL)
	var le *throttle.LimitError
	if !errors.As(err, &le) || le.Limit != "pause" {
		t.Fatalf("a request within the vendor's Retry-After during the outage: got (%d, %v), want a *LimitError by the pause", status, err)
	}
}

// TestFailoverOneRequestsStateFailsItAlone: a request the store answers
// with an error for its own keys (here another program's list under the
// provider's key, so Redis replies WRONGTYPE; a daily window the script
// cannot place fails alike) fails alone, with an error that says so. It
// must not rest the store: a healthy provider on the same transport is
// never refused, and the failing provider's next request asks Redis again.
func TestFailoverOneRequestsStateFailsItAlone(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := srv.Client(t)
	clk := quotatest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	store, err := redisstore.New(rc, redisstore.Options{Prefix: "state:", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.RPush(context.Background(), store.Key("broken", "daily"), "not a quota").Err(); err != nil {
		t.Fatal(err)
	}
	cfg, err := providers.Load("t.yaml", []byte(`
providers:
  broken:
    hosts: [api.broken.test]
    limits: [{name: daily, limit: 1000/day}]
  healthy:
    hosts: [api.healthy.test]
    limits: [{name: peak, limit: 1000/s}]
`))
	if err != nil {
		t.Fatal(err)
	}
	mock := httpmock.NewMockTransport()
	mock.RegisterNoResponder(httpmock.NewStringResponder(200, "ok"))
	obs := &recorder{}
	tr, err := throttle.New(throttle.WithStore(store), throttle.WithRegistry(providers.NewRegistry(cfg)),
		throttle.WithBase(mock), throttle.WithClock(clk), throttle.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	get := func(url string) error {
		req, _ := http.NewRequest("GET", url, nil)
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		return err
	}
	refused := 0
	for i := 0; i < 100; i++ {
		if i%10 == 0 {
			err := get("https://api.broken.test/")
			if err == nil || !errors.Is(err, quota.ErrState) || errors.Is(err, quota.ErrStore) || errors.Is(err, throttle.ErrStoreUnavailable) ||
				!strings.Contains(err.Error(), "broken") || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Errorf("broken, request %d: got %v, want an error naming the provider and Redis's WRONGTYPE, "+
					"matching quota.ErrState and not the store's failure", i, err)
			}
		}
		if err := get("https://api.healthy.test/"); err != nil {
			refused++
			if refused == 1 {
				t.Errorf("healthy, request %d: %v", i, err)
			}
		}
		clk.Advance(100 * time.Millisecond)
	}
	if refused > 0 {
		t.Errorf("the healthy provider was refused %d times of 100, want none", refused)
	}
	if n := mock.GetCallCountInfo()["GET https://api.broken.test/"]; n != 0 {
		t.Errorf("the broken provider's requests were sent %d times, want none", n)
	}
	errorsSeen := 0
	for _, e := range obs.events {
		switch e.Kind {
		case throttle.StoreError:
			errorsSeen++
		case throttle.FellBack:
			t.Errorf("event %+v: no request fell back, the store never failed", e)
		}
	}
	if errorsSeen != 10 {
		t.Errorf("%d StoreError events, want one per failed request (10)", errorsSeen)
	}
}
