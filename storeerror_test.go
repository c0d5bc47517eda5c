package throttle_test

// What the transport does while its store fails, on an injected clock:
// one probe per retry interval.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
