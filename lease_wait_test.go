package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

// waitYAML: one lease with a TTL of ten minutes, and an hour's max wait.
// A waiter that ends within a test's seconds was woken by a release: no
// lease expires, and the wait does not run out.
const waitYAML = `
providers:
  vendor:
    hosts: ["HOST"]
    max_wait: 1h
    limits: [{name: streams, limit: 1 concurrent lease 10m}]
`

// wokenWithin bounds, in real time, how long a waiter may take to get the
// lease once it is released: far below the lease TTL and the max wait.
const wokenWithin = 20 * time.Second

// refusals is a Store that reports each refused decision, so that a test
// knows when a request has found the lease held (twice: before it joins
// the queue and once queued, after which it sleeps). It passes
// WatchLeases on.
type refusals struct {
	quota.Store
	n       quota.LeaseNotifier
	refused chan struct{}
}

func newRefusals(s quota.Store) *refusals {
	return &refusals{Store: s, n: s.(quota.LeaseNotifier), refused: make(chan struct{}, 64)}
}

func (r *refusals) Reserve(ctx context.Context, req *quota.Request) (*quota.Reservation, error) {
	rsv, err := r.Store.Reserve(ctx, req)
	if err == nil && !rsv.Allowed {
		r.refused <- struct{}{}
	}
	return rsv, err
}

func (r *refusals) WatchLeases(ctx context.Context, tag, key string) (*quota.LeaseWaiter, error) {
	return r.n.WatchLeases(ctx, tag, key)
}

// queued returns once n more requests have found the lease held twice:
// they are asleep in the queue, in that order.
func (r *refusals) queued(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < 2*n; i++ {
		select {
		case <-r.refused:
		case <-time.After(wokenWithin):
			t.Fatalf("a request did not find the lease held")
		}
	}
}

// holder is a vendor whose /hold requests block until released, and
// which records the order requests arrive in.
type holder struct {
	v       *throttletest.Vendor
	arrived chan string
	release chan struct{}
	once    sync.Once
}

func newHolder(t *testing.T) *holder {
	h := &holder{arrived: make(chan string, 64), release: make(chan struct{})}
	h.v = e2eVendor(t, throttletest.Options{MaxInFlight: 1, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.arrived <- r.URL.Path
		if r.URL.Path == "/hold" {
			<-h.release
		}
	})})
	t.Cleanup(h.free) // before the vendor's Close, which waits for the handler
	return h
}

func (h *holder) free() { h.once.Do(func() { close(h.release) }) }

// send sends GET path through tr in a goroutine and returns where its
// outcome goes; the body is read and closed (the lease released).
func send(ctx context.Context, tr *throttle.Transport, url string) <-chan error {
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	return done
}

func outcome(t *testing.T, what string, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(wokenWithin):
		t.Fatalf("%s: still waiting %v after the release (lease TTL 10m, max wait 1h): no wake", what, wokenWithin)
	}
	return nil
}

// TestLeaseWaitWokenByRelease: a request that finds the one lease held
// waits, and goes when the holder's response is done, long before the
// lease could expire or the wait run out: with the memory store, and
// with two Redis stores (two processes' worth) where the holder is in
// one and the waiter in the other.
func TestLeaseWaitWokenByRelease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name  string
		store func() (holder, waiter quota.Store)
	}{
		{"memory", func() (quota.Store, quota.Store) {
			m := quota.NewMemoryStore(quota.MemoryOptions{})
			return m, m
		}},
		{"redis, two stores", func() (quota.Store, quota.Store) {
			var s [2]quota.Store
			for i := range s {
				st, err := redisstore.New(srv.Client(t), redisstore.Options{Timeout: fleetStoreTimeout})
				if err != nil {
					t.Fatal(err)
				}
				s[i] = st
			}
			return s[0], s[1]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHolder(t)
			hs, ws := tc.store()
			w := newRefusals(ws)
			first, _ := e2eTransport(t, waitYAML, h.v.Host(), throttle.WithStore(hs))
			second, _ := e2eTransport(t, waitYAML, h.v.Host(), throttle.WithStore(w))
			held := send(context.Background(), first, h.v.URL+"/hold")
			<-h.arrived
			waiting := send(context.Background(), second, h.v.URL+"/next")
			w.queued(t, 1)
			h.free()
			if err := outcome(t, "the holder", held); err != nil {
				t.Fatal(err)
			}
			if err := outcome(t, "the waiter", waiting); err != nil {
				t.Fatalf("the waiter: %v, want admitted once the lease came back", err)
			}
			if p := h.v.PeakInFlight(); p > 1 {
				t.Fatalf("%d requests in flight at once, cap 1", p)
			}
		})
	}
}

// TestLeaseWaitFIFO: the requests of a process waiting for a lease get it
// in the order they asked, one per release; a waiter whose context ends
// leaves the queue without taking the wake meant for the one behind it.
func TestLeaseWaitFIFO(t *testing.T) {
	t.Parallel()
	h := newHolder(t)
	store := newRefusals(quota.NewMemoryStore(quota.MemoryOptions{}))
	tr, _ := e2eTransport(t, waitYAML, h.v.Host(), throttle.WithStore(store))
	held := send(context.Background(), tr, h.v.URL+"/hold")
	<-h.arrived
	paths := []string{"/1", "/gone", "/2", "/3", "/4"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := make([]<-chan error, len(paths))
	for i, p := range paths {
		c := context.Background()
		if p == "/gone" {
			c = ctx
		}
		waiting[i] = send(c, tr, h.v.URL+p)
		store.queued(t, 1)
	}
	cancel()
	if err := outcome(t, "the cancelled waiter", waiting[1]); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled waiter: %v, want context.Canceled", err)
	}
	h.free()
	for i, p := range paths {
		if p == "/gone" {
			continue
		}
		if err := outcome(t, p, waiting[i]); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if err := outcome(t, "the holder", held); err != nil {
		t.Fatal(err)
	}
	var order []string
	for len(h.arrived) > 0 {
		order = append(order, <-h.arrived)
	}
	if want := []string{"/1", "/2", "/3", "/4"}; !equal(order, want) {
		t.Fatalf("the waiters went in the order %v, want %v (their arrival order)", order, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLeaseWaitRunsOut: on a stepped clock, a request that gets no lease
// within its max wait is refused with a LimitError naming the concurrency
// limit, at the end of its max wait (not before: the lease's expiry is
// later).
func TestLeaseWaitRunsOut(t *testing.T) {
	t.Parallel()
	const yaml = `
providers:
  vendor:
    hosts: ["HOST"]
    max_wait: 30s
    limits: [{name: streams, limit: 1 concurrent lease 10m}]
`
	clock := quotatest.NewClock(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC))
	h := newHolder(t)
	store := newRefusals(quota.NewMemoryStore(quota.MemoryOptions{Clock: clock}))
	tr, _ := e2eTransport(t, yaml, h.v.Host(), throttle.WithStore(store), throttle.WithClock(clock))
	held := send(context.Background(), tr, h.v.URL+"/hold")
	<-h.arrived
	waiting := send(context.Background(), tr, h.v.URL+"/next")
	store.queued(t, 1)
	// The holder's renewal timer and the waiter's.
	for deadline := time.Now().Add(wokenWithin); clock.Timers() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the waiter set no timer")
		}
	}
	clock.Advance(29 * time.Second)
	select {
	case err := <-waiting:
		t.Fatalf("29s into a 30s max wait: %v, want still waiting", err)
	default:
	}
	clock.Advance(time.Second)
	err := outcome(t, "the waiter", waiting)
	var le *throttle.LimitError
	if !errors.As(err, &le) || !errors.Is(err, throttle.ErrLimited) || le.Limit != "streams" || le.Deadline {
		t.Fatalf("after the max wait: %v, want a LimitError naming streams (not the deadline)", err)
	}
	h.free()
	if err := outcome(t, "the holder", held); err != nil {
		t.Fatal(err)
	}
}

// leaseWaiterEnv makes the test binary a member of TestLeaseWaitFleet's
// fleet: the Redis address (the vendor's URL is in leaseVendorEnv).
const leaseWaiterEnv = "THROTTLE_LEASE_WAITER"

// fleetYAML: 3 leases, a minute's wait.
const fleetYAML = `
providers:
  vendor:
    hosts: ["HOST"]
    max_wait: 1m
    limits: [{name: streams, limit: 3 concurrent lease 1m}]
`

// The fleet's size: processes, goroutines per process, requests per
// goroutine. 24 goroutines for 3 leases.
const fleetProcs, fleetGoroutines, fleetRequests = 4, 6, 8

// leaseWaiter is one process of TestLeaseWaitFleet: fleetGoroutines
// goroutines send fleetRequests requests each through one Redis store.
// It prints how many requests waited for a lease and exits 0 when every
// request was served, 1 at the first error (a refusal included).
func leaseWaiter(addr, vendor string) int {
	store, err := redisstore.New(redis.NewClient(&redis.Options{Addr: addr}), redisstore.Options{Timeout: 2 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg, err := providers.Load("fleet.yaml", []byte(strings.ReplaceAll(fleetYAML, "HOST", strings.TrimPrefix(vendor, "http://"))))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var waited atomic.Int64
	tr, err := throttle.New(throttle.WithRegistry(providers.NewRegistry(cfg)), throttle.WithStore(store),
		throttle.WithObserver(observerFunc(func(e throttle.Event) {
			if e.Kind == throttle.Waited && e.Limit == "streams" {
				waited.Add(1)
			}
		})))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	errs := make(chan error, fleetGoroutines)
	for g := 0; g < fleetGoroutines; g++ {
		go func() {
			for i := 0; i < fleetRequests; i++ {
				if err := <-send(context.Background(), tr, vendor+"/v1/chat"); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < fleetGoroutines; g++ {
		if err := <-errs; err != nil {
			fmt.Fprintln(os.Stderr, "lease waiter:", err)
			return 1
		}
	}
	fmt.Println(waited.Load())
	return 0
}

// TestLeaseWaitFleet: four processes, 24 goroutines, 3 leases shared
// through one Redis, and a vendor that counts its requests in flight: it
// never serves more than 3 at once, no request is refused (each waits for
// a lease within its minute), and every request is served.
func TestLeaseWaitFleet(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	v := e2eVendor(t, throttletest.Options{MaxInFlight: 3, Handler: slowHandler})
	type result struct {
		out    string
		stderr string
		err    error
	}
	results := make(chan result, fleetProcs)
	for p := 0; p < fleetProcs; p++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), leaseWaiterEnv+"="+srv.Addr, leaseVendorEnv+"="+v.URL)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		go func() {
			err := cmd.Run()
			results <- result{stdout.String(), stderr.String(), err}
		}()
	}
	waited := 0
	for p := 0; p < fleetProcs; p++ {
		r := <-results
		if r.err != nil {
			t.Fatalf("a process failed: %v; its stderr:\n%s", r.err, r.stderr)
		}
		n, err := strconv.Atoi(strings.TrimSpace(r.out))
		if err != nil {
			t.Fatalf("a process said %q: %v", r.out, err)
		}
		waited += n
	}
	served, throttled := v.Counts()
	t.Logf("served %d, %d waited for a lease, at most %d in flight", served, waited, v.PeakInFlight())
	if want := fleetProcs * fleetGoroutines * fleetRequests; served != want || throttled != 0 {
		t.Errorf("served %d, throttled %d; want all %d served", served, throttled, want)
	}
	if v.PeakInFlight() > 3 {
		t.Errorf("the vendor saw %d requests in flight at once; the cap is 3", v.PeakInFlight())
	}
	if waited == 0 {
		t.Errorf("no request waited for a lease: the test did not test the cap")
	}
}
