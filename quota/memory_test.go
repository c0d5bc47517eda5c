package quota_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

func newMemory(t *testing.T, clock quota.Clock) quota.Store {
	return quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
}

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	quotatest.Run(t, newMemory)
}

func TestMemoryReclaimsIdleKeys(t *testing.T) {
	t.Parallel()
	clock := quotatest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock, SweepInterval: 48 * time.Hour})
	peak := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 10, Period: time.Second}
	daily := &quota.Limit{Name: "daily", Kind: quota.Window, Rate: 100, Calendar: quota.Calendar{Unit: quota.Day}}
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		req := quota.Request{Tag: fmt.Sprintf("tenant-%d", i), Items: []quota.Item{{Limit: peak, Key: "peak"}, {Limit: daily, Key: "daily"}}}
		if _, err := m.Reserve(ctx, &req); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Pause(ctx, "tenant-0", "pause", time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := m.Len(); got != 2001 {
		t.Fatalf("Len() = %d, want 2001", got)
	}
	clock.Advance(time.Second) // the GCRA state is idle again
	m.Sweep()
	if got := m.Len(); got != 1001 {
		t.Errorf("after the GCRA drained: Len() = %d, want 1001 (windows and the pause remain)", got)
	}
	clock.Advance(24 * time.Hour) // the day ended, the pause too
	m.Sweep()
	if got := m.Len(); got != 0 {
		t.Errorf("after the window ended: Len() = %d, want 0", got)
	}
}

// TestMemoryConcurrent: with the clock stopped, 64 goroutines racing on one
// stack get exactly the burst of the tightest limit, and a denial leaves no
// trace in the other limits.
func TestMemoryConcurrent(t *testing.T) {
	t.Parallel()
	clock := quotatest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
	peak := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 100, Period: time.Second}
	minute := &quota.Limit{Name: "minute", Kind: quota.GCRA, Rate: 1000, Period: time.Minute}
	daily := &quota.Limit{Name: "daily", Kind: quota.Window, Rate: 5000, Calendar: quota.Calendar{Unit: quota.Day}}
	req := quota.Request{Tag: "p", Items: []quota.Item{{Limit: peak, Key: "peak"}, {Limit: minute, Key: "minute"}, {Limit: daily, Key: "daily"}}}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				r := req
				res, err := m.Reserve(context.Background(), &r)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := allowed.Load(); got != 100 {
		t.Fatalf("admitted %d, want exactly the burst of 100", got)
	}
	res, err := m.Reserve(context.Background(), &req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Limits[1].Remaining != 900 || res.Limits[2].Remaining != 4900 {
		t.Errorf("after 3100 denials the other limits show %+v, want 900 and 4900 remaining", res.Limits)
	}
}

// TestMemorySweepsOnUse: a shard forgets its idle keys when it is used
// after its sweep interval, with no goroutine.
func TestMemorySweepsOnUse(t *testing.T) {
	t.Parallel()
	clock := quotatest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock, SweepInterval: time.Minute})
	peak := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 10, Period: time.Second}
	ctx := context.Background()
	reserve := func(key string) {
		req := quota.Request{Tag: "one-tag", Items: []quota.Item{{Limit: peak, Key: key}}}
		if _, err := m.Reserve(ctx, &req); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ {
		reserve(fmt.Sprintf("peak:tenant-%d", i))
	}
	clock.Advance(30 * time.Second) // idle, but the interval has not passed
	reserve("peak:fresh")
	if got := m.Len(); got != 101 {
		t.Fatalf("before the interval: Len() = %d, want 101", got)
	}
	clock.Advance(31 * time.Second)
	reserve("peak:fresh")
	if got := m.Len(); got != 1 {
		t.Errorf("after the interval: Len() = %d, want 1", got)
	}
}

func TestMemoryContextDone(t *testing.T) {
	t.Parallel()
	m := quota.NewMemoryStore(quota.MemoryOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := quota.Request{Tag: "p", Items: []quota.Item{{Limit: &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 1, Period: time.Second}, Key: "peak"}}}
	if _, err := m.Reserve(ctx, &req); !errors.Is(err, context.Canceled) {
		t.Errorf("Reserve on a done context: %v, want context.Canceled", err)
	}
}

func benchmarkMemory(b *testing.B, depth int) {
	m := quota.NewMemoryStore(quota.MemoryOptions{})
	all := []quota.Item{
		{Limit: &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 1e6, Period: time.Second}, Key: "peak"},
		{Limit: &quota.Limit{Name: "tenant", Kind: quota.GCRA, Rate: 1e6, Period: time.Second}, Key: "tenant:acct_1"},
		{Limit: &quota.Limit{Name: "daily", Kind: quota.Window, Rate: 1 << 40, Calendar: quota.Calendar{Unit: quota.Day}}, Key: "daily"},
	}
	req := quota.Request{Tag: "bench", Items: all[:depth], MaxWait: time.Second}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := req
		for pb.Next() {
			if _, err := m.Reserve(ctx, &r); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkMemoryReserve: -cpu 1 runs one goroutine; b.SetParallelism is
// not used so that -cpu N runs N; run with -cpu 1,64 for both figures.
func BenchmarkMemoryReserve(b *testing.B) {
	for _, depth := range []int{1, 3} {
		b.Run(fmt.Sprintf("limits=%d", depth), func(b *testing.B) { benchmarkMemory(b, depth) })
	}
}
