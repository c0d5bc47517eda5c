package throttle_test

// What the transport does while its store fails, on an injected clock:
// one probe per retry interval, and the local fallback's bounds on cost
// and at recovery.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/quota"
)

// gateStore is a Store that fails, hangs or decides in a MemoryStore, as
// the test says, and counts the calls it gets.
type gateStore struct {
	mem   *quota.MemoryStore
	calls atomic.Int64
	fail  atomic.Bool
	// hold, when set, blocks every call until it is closed.
	hold atomic.Pointer[chan struct{}]
}

func (g *gateStore) Reserve(ctx context.Context, req *quota.Request) (*quota.Reservation, error) {
	if err := g.call(); err != nil {
		return nil, err
	}
	return g.mem.Reserve(ctx, req)
}

func (g *gateStore) Pause(ctx context.Context, tag, key string, d time.Duration) error {
	if err := g.call(); err != nil {
		return err
	}
	return g.mem.Pause(ctx, tag, key, d)
}

func (g *gateStore) call() error {
	g.calls.Add(1)
	if h := g.hold.Load(); h != nil {
		<-*h
	}
	if g.fail.Load() {
		return fmt.Errorf("gate: %w", quota.ErrStore)
	}
	return nil
}

// waitFor polls cond until it holds or a generous real-time bound passes;
// the bound only keeps a broken transport from hanging the test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestStoreRestLetsOneProbeThrough: while a failed store rests, requests
// fall back without calling it; once the retry interval has passed, one
// request probes it and the others keep falling back until it answers,
// however many are in flight and however long a hung store holds the
// probe. A failed probe starts the next rest; a probe that succeeds ends
// it.
func TestStoreRestLetsOneProbeThrough(t *testing.T) {
	t.Parallel()
	gate := &gateStore{}
	f := newFixture(t, `
providers:
  open:
    hosts: [open.test]
    on_store_error: fail_open
    limits: [{name: peak, limit: 1000/s}]
`, throttle.WithStore(gate), throttle.WithStoreRetry(time.Second))
	gate.mem = quota.NewMemoryStore(quota.MemoryOptions{Clock: f.clock})
	const n = 20
	var done atomic.Int64
	burst := func() *sync.WaitGroup {
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer done.Add(1)
				if _, err := f.do(context.Background(), "GET", "https://open.test/x"); err != nil {
					t.Errorf("fail_open: %v", err)
				}
			}()
		}
		return &wg
	}

	gate.fail.Store(true)
	if _, err := f.do(context.Background(), "GET", "https://open.test/x"); err != nil {
		t.Fatal(err)
	}
	if got := gate.calls.Load(); got != 1 {
		t.Fatalf("first request: %d store calls, want 1", got)
	}
	f.clock.Advance(500 * time.Millisecond)
	burst().Wait()
	if got := gate.calls.Load(); got != 1 {
		t.Errorf("%d requests during the rest: %d store calls in all, want still 1", n, got)
	}

	// The interval has passed and the store hangs: one probe, held; the
	// others fall back and are sent.
	f.clock.Advance(500 * time.Millisecond)
	hold := make(chan struct{})
	gate.hold.Store(&hold)
	done.Store(0)
	wg := burst()
	waitFor(t, "the requests that are not the probe", func() bool { return done.Load() == n-1 || gate.calls.Load() > 2 })
	if got := gate.calls.Load(); got != 2 {
		t.Errorf("%d requests after the interval, store hung: %d store calls in all, want 2 (one probe)", n, got)
	}
	// However long the probe hangs, no second one.
	f.clock.Advance(5 * time.Second)
	wg2 := burst()
	waitFor(t, "the requests while the probe hangs", func() bool { return done.Load() == 2*n-1 || gate.calls.Load() > 2 })
	if got := gate.calls.Load(); got != 2 {
		t.Errorf("while the probe hangs: %d store calls in all, want 2", got)
	}
	gate.hold.Store(nil)
	close(hold)
	wg.Wait()
	wg2.Wait()

	// The probe failed: a new rest from its answer.
	burst().Wait()
	if got := gate.calls.Load(); got != 2 {
		t.Errorf("after the failed probe: %d store calls in all, want 2", got)
	}
	f.clock.Advance(time.Second)
	burst().Wait()
	if got := gate.calls.Load(); got != 3 {
		t.Errorf("the next interval: %d store calls in all, want 3", got)
	}

	// The store is back: the next probe ends the rest.
	gate.fail.Store(false)
	f.clock.Advance(time.Second)
	if _, err := f.do(context.Background(), "GET", "https://open.test/x"); err != nil {
		t.Fatal(err)
	}
	burst().Wait()
	if got := gate.calls.Load(); got != 4+n {
		t.Errorf("after a successful probe: %d store calls in all, want %d (every request)", got, 4+n)
	}
}

// TestLocalFallbackChargesCostsInFull: with a store that always fails, a
// process at local_share 10% of 100,000 tokens a minute sends about
// 10,000 tokens a minute, within one request, whatever the size of its
// requests: a request above the local share's burst is admitted when the
// local limiter is idle and charged in full, not cut down to the share.
func TestLocalFallbackChargesCostsInFull(t *testing.T) {
	t.Parallel()
	for _, tokens := range []int64{50_000, 100_000} {
		f := newFixture(t, `
providers:
  llm:
    hosts: [api.llm.test]
    on_limit: fail
    on_store_error: local
    local_share: 10%
    limits: [{name: requests, limit: 1000/min}, {name: tokens, limit: 100000/min}]
`, throttle.WithStore(brokenStore{}))
		const share, minutes = 10_000, 10
		var perMinute [minutes]int64
		total := int64(0)
		for s := 0; s < minutes*60; s++ {
			_, err := f.do(throttle.WithLimitCost(context.Background(), "tokens", tokens), "POST", "https://api.llm.test/v1/chat")
			var le *throttle.LimitError
			switch {
			case err == nil:
				perMinute[s/60] += tokens
				total += tokens
			case !errors.As(err, &le) || le.Limit != "tokens" || le.RetryAfter <= 0:
				t.Fatalf("%d tokens, second %d: got %v, want sent or refused by the tokens limit", tokens, s, err)
			}
			f.clock.Advance(time.Second)
		}
		t.Logf("%d-token requests: %d tokens in %d minutes, by minute %v", tokens, total, minutes, perMinute)
		for m, sent := range perMinute {
			if sent > share+tokens {
				t.Errorf("%d-token requests, minute %d: sent %d tokens, want at most the share %d and one request", tokens, m, sent, share)
			}
		}
		if total > minutes*share+tokens || total == 0 {
			t.Errorf("%d-token requests: sent %d tokens in %d minutes, want some and at most %d and one request",
				tokens, total, minutes, minutes*share)
		}
	}
}

// TestLocalFallbackRefusesAWindowCostAboveItsShare: a calendar window
// cannot carry a debt into the next window, so a request costing more
// than the local share of a window is refused, by that limit, until the
// store is back.
func TestLocalFallbackRefusesAWindowCostAboveItsShare(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `
providers:
  llm:
    hosts: [api.llm.test]
    on_store_error: local
    local_share: 10%
    limits: [{name: requests, limit: 1000/min}, {name: daily-tokens, limit: 100000/day}]
`, throttle.WithStore(brokenStore{}), throttle.WithStoreRetry(time.Second))
	_, err := f.do(throttle.WithLimitCost(context.Background(), "daily-tokens", 20_000), "POST", "https://api.llm.test/v1/chat")
	var le *throttle.LimitError
	if !errors.As(err, &le) || le.Limit != "daily-tokens" || le.RetryAfter != time.Second {
		t.Fatalf("20,000 tokens against a local share of 10,000 a day: got %v, want a refusal by daily-tokens, retry after the store's retry interval", err)
	}
	if _, err := f.do(throttle.WithLimitCost(context.Background(), "daily-tokens", 10_000), "POST", "https://api.llm.test/v1/chat"); err != nil {
		t.Errorf("10,000 tokens, the local share: %v", err)
	}
	if n := f.mock.GetTotalCallCount(); n != 1 {
		t.Errorf("sent %d, want 1", n)
	}
}

// TestLocalFallbackEndsBeforeTheStoreIsBack: the local limiter's
// reservations are all due by the end of the rest, so none goes out on
// top of what the store admits once it is back. A process at
// local_share 34% of 100/s burst 10, with 60 requests waiting when the
// store fails and 110 when it is back, sends at most the store's 110 in
// any second plus the local burst of 3.
func TestLocalFallbackEndsBeforeTheStoreIsBack(t *testing.T) {
	t.Parallel()
	gate := &gateStore{}
	f := newFixture(t, `
providers:
  vendor:
    hosts: [api.vendor.test]
    on_limit: wait
    max_wait: 10s
    on_store_error: local
    local_share: 34%
    limits: [{name: peak, limit: 100/s, burst: 10}]
`, throttle.WithStore(gate), throttle.WithStoreRetry(time.Second))
	gate.mem = quota.NewMemoryStore(quota.MemoryOptions{Clock: f.clock})
	var mu sync.Mutex
	sent := map[string][]time.Time{}
	f.mock.RegisterNoResponder(func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		phase := strings.Split(req.URL.Path, "/")[1]
		sent[phase] = append(sent[phase], f.clock.Now())
		return httpmock.NewStringResponse(200, "ok"), nil
	})

	var launched, done atomic.Int64
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	// settled: every request launched has returned or waits for its slot.
	settled := func() {
		waitFor(t, "the requests to settle", func() bool { return done.Load()+int64(f.clock.Timers()) == launched.Load() })
	}
	launch := func(phase string, n int) {
		for i := 0; i < n; i++ {
			launched.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer done.Add(1)
				_, err := f.do(context.Background(), "GET", "https://api.vendor.test/"+phase)
				if err != nil && !errors.Is(err, throttle.ErrLimited) {
					t.Errorf("%s: %v", phase, err)
				}
			}()
			settled()
		}
	}

	t0 := f.clock.Now()
	gate.fail.Store(true)
	launch("local", 60)
	gate.fail.Store(false)
	for step := 0; step < 300; step++ {
		f.clock.Advance(10 * time.Millisecond)
		settled()
		if step == 99 { // the rest is over: the store decides again
			launch("store", 110)
		}
	}
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(sent["local"]) == 0 || len(sent["store"]) != 110 {
		t.Fatalf("sent %d while the store was down and %d after, want some and 110", len(sent["local"]), len(sent["store"]))
	}
	for _, at := range sent["local"] {
		if at.After(t0.Add(time.Second)) {
			t.Errorf("a request the local limiter admitted went out at +%v, after the rest ended at +1s", at.Sub(t0))
			break
		}
	}
	all := append(append([]time.Time(nil), sent["local"]...), sent["store"]...)
	sort.Slice(all, func(i, j int) bool { return all[i].Before(all[j]) })
	most := 0
	for i := range all {
		j := sort.Search(len(all), func(j int) bool { return !all[j].Before(all[i].Add(time.Second)) })
		most = max(most, j-i)
	}
	t.Logf("sent %d while the store was down, %d after; at most %d in one second", len(sent["local"]), len(sent["store"]), most)
	if most > 113 {
		t.Errorf("%d sends in one second, want at most 113 (100/s for 1s, the store's burst 10, the local burst 3)", most)
	}
}

// TestLocalFallbackCountsLeasesHeldInTheStore: a process that holds
// leases in the store when it fails still has those requests in flight,
// so its in-process limiter counts them against its local share of a
// concurrency cap: with 2 of a share of 2 held, it admits none until one
// of them is done. (Before, it admitted its whole share on top: 4 in
// flight against a share of 2, and the fleet over its cap.)
func TestLocalFallbackCountsLeasesHeldInTheStore(t *testing.T) {
	t.Parallel()
	gate := &gateStore{}
	f := newFixture(t, `
providers:
  llm:
    hosts: [api.llm.test]
    on_limit: fail
    on_store_error: local
    local_share: 50%
    limits: [{name: streams, limit: 4 concurrent lease 1m}]
`, throttle.WithStore(gate))
	gate.mem = quota.NewMemoryStore(quota.MemoryOptions{Clock: f.clock})
	send := func() (*http.Response, error) {
		req, err := http.NewRequest("GET", "https://api.llm.test/v1/stream", nil)
		if err != nil {
			t.Fatal(err)
		}
		return f.rt.RoundTrip(req)
	}
	var held []*http.Response
	for range 2 {
		resp, err := send()
		if err != nil {
			t.Fatalf("with the store: %v", err)
		}
		held = append(held, resp) // in flight: the body is not read yet
	}
	gate.fail.Store(true)
	admitted := func(n int) int {
		got := 0
		for range n {
			resp, err := send()
			var le *throttle.LimitError
			switch {
			case err == nil:
				got++
				held = append(held, resp)
			case !errors.As(err, &le) || le.Limit != "streams":
				t.Fatalf("local: got %v, want sent or refused by streams", err)
			}
		}
		return got
	}
	if got := admitted(3); got != 0 {
		t.Errorf("with 2 leases held in the store, the local share of 2 admitted %d more, want none", got)
	}
	_ = held[0].Body.Close()
	if got := admitted(3); got != 1 {
		t.Errorf("with 1 lease held in the store, the local share of 2 admitted %d more, want 1", got)
	}
	for _, resp := range held[1:] {
		_ = resp.Body.Close()
	}
}

// ctxBody is a response body whose Read waits for its request's context
// to end and fails with its error: a client that gives up mid-body.
type ctxBody struct{ ctx context.Context }

func (b ctxBody) Read([]byte) (int, error) { <-b.ctx.Done(); return 0, b.ctx.Err() }
func (b ctxBody) Close() error             { return nil }

// TestLocalFallbackForgetsAbandonedLeases: a request whose caller gave
// up mid-body leaves its lease in the store to expire (the vendor may
// still serve it), and stops counting against the in-process limiter's
// share once it has done so: a leak there would shrink the share for
// good, one abandoned request at a time.
func TestLocalFallbackForgetsAbandonedLeases(t *testing.T) {
	t.Parallel()
	gate := &gateStore{}
	f := newFixture(t, `
providers:
  llm:
    hosts: [api.llm.test]
    on_limit: fail
    on_store_error: local
    local_share: 50%
    limits: [{name: streams, limit: 4 concurrent lease 1m}]
`, throttle.WithStore(gate))
	gate.mem = quota.NewMemoryStore(quota.MemoryOptions{Clock: f.clock})
	f.mock.RegisterResponder("GET", "https://api.llm.test/v1/abandoned", func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: ctxBody{req.Context()}, Header: http.Header{}, Request: req}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", "https://api.llm.test/v1/abandoned", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("with the store: %v", err)
	}
	cancel()
	if _, err := resp.Body.Read(make([]byte, 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("reading the abandoned body: %v, want context.Canceled", err)
	}
	gate.fail.Store(true)
	var held []*http.Response
	for range 3 {
		req, err := http.NewRequest("GET", "https://api.llm.test/v1/stream", nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := f.rt.RoundTrip(req); err == nil {
			held = append(held, resp)
		}
	}
	if len(held) != 2 {
		t.Errorf("local share of 2 after an abandoned request: admitted %d, want 2", len(held))
	}
	for _, resp := range held {
		_ = resp.Body.Close()
	}
}
