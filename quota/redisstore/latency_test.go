package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
)

// These tests put a real Redis behind a delaying proxy: a Redis in
// another region. The delays are hundreds of milliseconds and the
// timeouts leave a decision that goes alone a margin of as much, so that
// a loaded machine's scheduling cannot flip a result.

// farStore returns a store with timeout on a Redis delay away each way,
// through client options opts (Addr is set), and the client.
func farStore(t *testing.T, delay, timeout time.Duration, opts redis.Options) (*Store, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	opts.Addr = redistest.StartDelay(t, srv.Addr, delay).Addr
	opts.MaxRetries = -1
	client := redis.NewClient(&opts)
	t.Cleanup(func() { _ = client.Close() })
	st, err := New(client, Options{Prefix: uniquePrefix(), Timeout: timeout, AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	return st, client
}

// TestFarRedisNoReconnectLoop: with ContextTimeoutEnabled (the client the
// docs recommend), a call the timeout cut used to drop its connection,
// and the next decision paid a new one (dial, HELLO, CLIENT SETINFO, the
// script: about 4 round trips) within its timeout: with a round trip of
// more than a quarter of the timeout no decision ever succeeded. The
// abandoned call now finishes in the background and leaves its
// connection warm, so decisions succeed after the first few.
func TestFarRedisNoReconnectLoop(t *testing.T) {
	t.Parallel()
	const delay, timeout = 100 * time.Millisecond, 500 * time.Millisecond // a round trip of 200 ms
	st, _ := farStore(t, delay, timeout, redis.Options{ContextTimeoutEnabled: true})
	req := stack("far", gcra("peak", 1_000_000, time.Second, 0))
	var errs []error
	for i := range 10 {
		_, err := st.Reserve(context.Background(), &req)
		if err != nil {
			errs = append(errs, err)
		}
		if i >= 7 && err != nil {
			t.Errorf("decision %d of 10 in a row through a %v round trip, timeout %v: %v", i+1, 2*delay, timeout, err)
		}
	}
	if len(errs) > 4 {
		t.Errorf("%d of 10 decisions in a row failed, want the first few at most: %v", len(errs), errs)
	}
}

// TestFarRedisCoalescingCostsNothing: decisions of one tag from many
// goroutines, through a round trip of 60% of the timeout, so that a
// decision fits alone but not behind a call in flight. Coalescing used
// to queue every decision behind the call in flight and a third of the
// queued ones timed out; now a decision that would not fit goes alone,
// and none fails.
func TestFarRedisCoalescingCostsNothing(t *testing.T) {
	t.Parallel()
	const delay, timeout = 450 * time.Millisecond, 1500 * time.Millisecond // a round trip of 900 ms
	const goroutines, rounds = 16, 3
	st, client := farStore(t, delay, timeout, redis.Options{PoolSize: 4 * goroutines})
	ctx := context.Background()
	// Warm: connections for every goroutine, the script cached, and a
	// decision alone, so the store has seen a round trip.
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() { _ = client.Ping(ctx).Err() })
	}
	wg.Wait()
	for _, sc := range []*redis.Script{reserveScript, loneScript} {
		if err := sc.Load(ctx, client).Err(); err != nil {
			t.Fatal(err)
		}
	}
	req := stack("far", gcra("peak", 1_000_000, time.Second, 0))
	if _, err := st.Reserve(ctx, &req); err != nil {
		t.Fatalf("a decision alone: %v", err)
	}
	var failed atomic.Int64
	var first atomic.Value
	for g := range goroutines {
		wg.Go(func() {
			// Staggered, so that decisions find calls in flight at
			// every stage.
			time.Sleep(time.Duration(g) * 2 * delay / goroutines)
			for range rounds {
				r := stack("far", gcra("peak", 1_000_000, time.Second, 0))
				if _, err := st.Reserve(ctx, &r); err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d decisions failed through a %v round trip with timeout %v; first: %v",
			n, goroutines*rounds, 2*delay, timeout, first.Load())
	}
}
