package throttle_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

// leaseYAML caps the vendor at 2 requests in flight.
const leaseYAML = `
providers:
  vendor:
    hosts: ["HOST"]
    max_wait: 10s
    limits: [{name: streams, limit: 2 concurrent lease 10s}]
`

// slowHandler answers after a pause, so that requests overlap.
var slowHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	time.Sleep(3 * time.Millisecond)
	_, _ = io.WriteString(w, `{"ok":true}`)
})

// leaseDrive sends n requests per client from workers goroutines each, and
// returns how many were refused: none should be, since a request that
// finds every lease held waits for one.
func leaseDrive(t *testing.T, clients []*http.Client, url string, workers, n int) int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for _, c := range clients {
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for sent := 0; sent < n; sent++ {
					resp, err := e2eDo(context.Background(), c, "GET", url, "")
					if errors.Is(err, throttle.ErrLimited) {
						mu.Lock()
						refused++
						mu.Unlock()
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
	}
	wg.Wait()
	return refused
}

// TestLeasesCapInFlight: the vendor never serves more requests at once
// than the concurrency limit, with one transport on the memory store and
// with four transports (each its own Redis client and store, as four
// processes) sharing a real Redis. Four times as many goroutines as
// leases send: a request that finds every lease held waits for one
// (within its max wait), so none is refused and all are served.
func TestLeasesCapInFlight(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name       string
		transports int
	}{{"memory", 1}, {"redis fleet", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			v := e2eVendor(t, throttletest.Options{MaxInFlight: 2, Handler: slowHandler})
			var waited atomic.Int64
			count := throttle.WithObserver(observerFunc(func(e throttle.Event) {
				if e.Kind == throttle.Waited && e.Limit == "streams" {
					waited.Add(1)
				}
			}))
			var clients []*http.Client
			for i := 0; i < tc.transports; i++ {
				opts := []throttle.Option{count}
				if tc.transports > 1 {
					store, err := redisstore.New(srv.Client(t), redisstore.Options{Timeout: fleetStoreTimeout})
					if err != nil {
						t.Fatal(err)
					}
					opts = append(opts, throttle.WithStore(store))
				}
				_, c := e2eTransport(t, leaseYAML, v.Host(), opts...)
				clients = append(clients, c)
			}
			const perWorker = 10
			refused := leaseDrive(t, clients, v.URL+"/v1/chat", 8/tc.transports, perWorker)
			served, throttled := v.Counts()
			t.Logf("served %d, %d waited for a lease, at most %d in flight", served, waited.Load(), v.PeakInFlight())
			if throttled != 0 || v.PeakInFlight() > 2 {
				t.Errorf("the vendor saw %d requests in flight at once and throttled %d; the cap is 2", v.PeakInFlight(), throttled)
			}
			if refused != 0 || served != 8*perWorker {
				t.Errorf("%d refused, %d served; want none refused and all %d served", refused, served, 8*perWorker)
			}
			if waited.Load() == 0 {
				t.Errorf("no request waited for a lease: the test did not test the cap")
			}
		})
	}
}

// TestLeaseReleased: a lease comes back when the body is read to EOF
// (without Close), when it is closed unread, when the vendor's answer is
// an error, and when the round trip fails.
func TestLeaseReleased(t *testing.T) {
	t.Parallel()
	const yaml = `
providers:
  vendor:
    hosts: ["HOST"]
    on_limit: fail
    limits: [{name: one, limit: 1 concurrent}]
`
	v := e2eVendor(t, throttletest.Options{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/error" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})})
	tr, _ := e2eTransport(t, yaml, v.Host())
	get := func(path string) (*http.Response, error) {
		req, _ := http.NewRequest("GET", v.URL+path, nil)
		return tr.RoundTrip(req)
	}
	mustGet := func(what, path string) *http.Response {
		t.Helper()
		resp, err := get(path)
		if err != nil {
			t.Fatalf("%s: %v: the lease was not given back", what, err)
		}
		return resp
	}
	resp := mustGet("first", "/x")
	if _, err := get("/x"); !errors.Is(err, throttle.ErrLimited) {
		t.Fatalf("a second request while the first body is open: %v, want refused", err)
	}
	_, _ = io.ReadAll(resp.Body) // to EOF, not closed
	resp = mustGet("after EOF", "/error")
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", resp.StatusCode)
	}
	resp.Body.Close() // unread
	resp = mustGet("after an error response closed unread", "/x")
	resp.Body.Close()

	failing, _ := e2eTransport(t, yaml, v.Host(), throttle.WithBase(roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("connection refused")
	})))
	req, _ := http.NewRequest("GET", v.URL+"/x", nil)
	for i := 0; i < 2; i++ {
		if _, err := failing.RoundTrip(req); err == nil || errors.Is(err, throttle.ErrLimited) {
			t.Fatalf("round trip %d: %v, want the base's error: the failed request kept its lease", i, err)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestLeaseRenewed: on a stepped clock, a request in flight longer than
// its lease TTL keeps its lease (the transport renews it every half TTL),
// while a response body nobody reads or closes loses it a TTL after its
// last renewal.
func TestLeaseRenewed(t *testing.T) {
	t.Parallel()
	const yaml = `
providers:
  vendor:
    hosts: ["HOST"]
    on_limit: fail
    limits: [{name: one, limit: 1 concurrent lease 2s}]
`
	clock := quotatest.NewClock(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC))
	store := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
	arrived, finish := make(chan struct{}, 1), make(chan struct{})
	var finished sync.Once
	release := func() { finished.Do(func() { close(finish) }) }
	v := e2eVendor(t, throttletest.Options{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-finish
		}
	})})
	t.Cleanup(release) // before the vendor's Close, which waits for the handler
	tr, _ := e2eTransport(t, yaml, v.Host(), throttle.WithStore(store), throttle.WithClock(clock))
	get := func(path string) (*http.Response, error) {
		req, _ := http.NewRequest("GET", v.URL+path, nil)
		return tr.RoundTrip(req)
	}
	waitTimers := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); clock.Timers() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the renewal timer was never set")
			}
		}
	}

	done := make(chan error, 1)
	go func() {
		resp, err := get("/slow")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-arrived
	for i := 0; i < 3; i++ { // 3s in flight, past the 2s TTL
		waitTimers(1)
		clock.Advance(time.Second)
	}
	waitTimers(1)
	if _, err := get("/x"); !errors.Is(err, throttle.ErrLimited) {
		t.Fatalf("3s into a request with a 2s lease: another request got %v, want refused: the lease was not renewed", err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Never read nor closed: two ticks without a read, and the lease
	// expires a TTL after the last renewal.
	resp, err := get("/x")
	if err != nil {
		t.Fatalf("after the slow one: %v", err)
	}
	defer resp.Body.Close()
	for i := 0; i < 2; i++ {
		waitTimers(1)
		clock.Advance(time.Second)
	}
	if _, err := get("/x"); err != nil {
		t.Fatalf("2s after an abandoned body's lease was taken: %v, want its lease expired", err)
	}
}

// TestLeaseEvents: the observer is told when a request takes its leases
// and when it gives them back (its body read to EOF, or its round trip
// failed), and, once, when a body neither read nor closed lets them
// expire: a later Close reports nothing more.
func TestLeaseEvents(t *testing.T) {
	t.Parallel()
	const yaml = `
providers:
  vendor:
    hosts: ["HOST"]
    on_limit: fail
    limits: [{name: one, limit: 1 concurrent lease 2s}]
`
	clock := quotatest.NewClock(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC))
	obs := &recorder{}
	v := e2eVendor(t, throttletest.Options{})
	tr, _ := e2eTransport(t, yaml, v.Host(), throttle.WithObserver(obs), throttle.WithClock(clock),
		throttle.WithStore(quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})))
	req, _ := http.NewRequest("GET", v.URL+"/x", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	failing, _ := e2eTransport(t, yaml, v.Host(), throttle.WithObserver(obs), throttle.WithBase(roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("connection refused")
	})))
	if _, err := failing.RoundTrip(req); err == nil {
		t.Fatal("the failing base's round trip succeeded")
	}
	leases := func() []throttle.EventKind {
		var k []throttle.EventKind
		for _, e := range obs.snapshot() {
			switch e.Kind {
			case throttle.Leased, throttle.Released, throttle.LeaseExpired:
				if e.Provider != "vendor" {
					t.Errorf("%v event of provider %q", e.Kind, e.Provider)
				}
				k = append(k, e.Kind)
			}
		}
		return k
	}
	want := []throttle.EventKind{throttle.Leased, throttle.Released, throttle.Leased, throttle.Released}
	if got := leases(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}

	resp, err = tr.RoundTrip(req) // never read: after two idle renewal ticks the leases expire
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		for deadline := time.Now().Add(10 * time.Second); clock.Timers() < 1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the renewal timer was never set")
			}
		}
		clock.Advance(time.Second)
	}
	want = append(want, throttle.Leased, throttle.LeaseExpired)
	for deadline := time.Now().Add(10 * time.Second); !slices.Equal(leases(), want); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("events %v, want %v", leases(), want)
		}
	}
	resp.Body.Close()
	if got := leases(); !slices.Equal(got, want) {
		t.Errorf("after closing the abandoned body: %v, want no more than %v", got, want)
	}
}

// TestLeaseKeptWhileVendorServesAbandoned: a request whose caller gives
// up (its context ends) while the vendor is serving it keeps its lease:
// the vendor counts it until its handler ends, so a lease given back at
// once let one more request reach it than the cap. The lease is left to
// expire instead.
func TestLeaseKeptWhileVendorServesAbandoned(t *testing.T) {
	t.Parallel()
	const yaml = `
providers:
  vendor:
    hosts: ["HOST"]
    on_limit: fail
    limits: [{name: one, limit: 1 concurrent}]
`
	arrived, finish := make(chan struct{}, 2), make(chan struct{})
	v := e2eVendor(t, throttletest.Options{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-finish // serving, whatever the client does
	})})
	t.Cleanup(func() { close(finish) })
	obs := &recorder{}
	tr, _ := e2eTransport(t, yaml, v.Host(), throttle.WithObserver(obs))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", v.URL+"/x", nil)
	errc := make(chan error, 1)
	go func() {
		_, err := tr.RoundTrip(req)
		errc <- err
	}()
	<-arrived
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the abandoned round trip: %v, want context.Canceled", err)
	}
	// Bounded, so that a request wrongly admitted (held by the handler)
	// fails the test rather than hanging it; a refusal comes at once.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	req2, _ := http.NewRequestWithContext(ctx2, "GET", v.URL+"/x", nil)
	if resp, err := tr.RoundTrip(req2); !errors.Is(err, throttle.ErrLimited) {
		if err == nil {
			resp.Body.Close()
		}
		t.Fatalf("a request while the vendor still serves the abandoned one: %v, want refused", err)
	}
	var kinds []throttle.EventKind
	for _, e := range obs.snapshot() {
		if e.Kind == throttle.Leased || e.Kind == throttle.Released || e.Kind == throttle.LeaseExpired {
			kinds = append(kinds, e.Kind)
		}
	}
	if want := []throttle.EventKind{throttle.Leased, throttle.LeaseExpired}; !slices.Equal(kinds, want) {
		t.Errorf("events %v, want %v", kinds, want)
	}
}
