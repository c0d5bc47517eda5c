package redisstore

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
)

// benchStacks are admitted on every call (their rates are far above what
// one redis-server decides per second), so the benchmarks time the
// admitting path, which writes.
func benchStacks() map[string]quota.Request {
	peak := gcra("peak", 1_000_000, time.Second, 0)
	minute := gcra("minute", 60_000_000, time.Minute, 0)
	daily := window("daily", 1<<40, quota.Day, nil)
	// A tenant's request of a provider tagged per tenant: its own pause,
	// and with "over" the provider's, one more key in the same MGET.
	tenant := stack("vendor:acme", peak)
	tenant.Pauses = []string{"pause:acme"}
	over := tenant
	over.Over = quota.PauseKey{Tag: "vendor", Key: "pause"}
	return map[string]quota.Request{
		"limits=1":             stack("vendor", peak),
		"limits=3":             stack("vendor", peak, minute, daily),
		"limits=1/tenant":      tenant,
		"limits=1/tenant+over": over,
	}
}

// BenchmarkReserve times one decision on a real redis-server on loopback,
// with 1 and 64 goroutines sharing one client (pool of 64 connections).
//
//	go test -run '^$' -bench Reserve -benchmem ./quota/redisstore/
func BenchmarkReserve(b *testing.B) {
	srv := redistest.Start(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	b.Cleanup(func() { _ = client.Close() })
	// A generous timeout: on a loaded 2-core machine 64 goroutines can
	// wait long for the CPU, which is no failure of the store.
	st, err := New(client, Options{Timeout: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	stacks := benchStacks()
	for _, name := range []string{"limits=1", "limits=3", "limits=1/tenant", "limits=1/tenant+over"} {
		req := stacks[name]
		for _, g := range []int{1, 64} {
			b.Run(name+"/goroutines="+strconv.Itoa(g), func(b *testing.B) {
				// Load the script and open g connections before the clock
				// starts, so that no run times a storm of dials.
				var wg sync.WaitGroup
				for i := 0; i < g; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := req
						if _, err := st.Reserve(ctx, &r); err != nil {
							b.Error(err)
						}
					}()
				}
				wg.Wait()
				b.ReportAllocs()
				b.ResetTimer()
				if g == 1 {
					for i := 0; i < b.N; i++ {
						if res, err := st.Reserve(ctx, &req); err != nil || !res.Allowed {
							b.Fatalf("Reserve: %v, %v", res, err)
						}
					}
					return
				}
				b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					r := req
					for pb.Next() {
						if res, err := st.Reserve(ctx, &r); err != nil || !res.Allowed {
							b.Errorf("Reserve: %v, %v", res, err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkKeysAndArgs times what Reserve does in Go before the round
// trip, for a three-limit stack with an unsafe scope value.
func BenchmarkKeysAndArgs(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	b.Cleanup(func() { _ = client.Close() })
	st, err := New(client, Options{})
	if err != nil {
		b.Fatal(err)
	}
	req := benchStacks()["limits=3"]
	req.Items[1].Key = quota.KeyOf("minute", "tenant\n{42}")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = st.keys(&req)
	}
}
