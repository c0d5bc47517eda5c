package quota_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
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

// TestMemorySweepIsBounded is review finding D8: one decision after 20,000
// keys of its shard went idle examines at most quota.SweepBatch of them
// (the old store swept all of them in that decision), and the decisions
// that follow forget them all within one lap of the shard's ring.
func TestMemorySweepIsBounded(t *testing.T) {
	t.Parallel()
	const keys = 20_000
	clock := quotatest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock, SweepInterval: time.Second})
	peak := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 10, Period: time.Second, Burst: 10}
	ctx := context.Background()
	reserve := func(key string) {
		req := quota.Request{Tag: "one-tag", Items: []quota.Item{{Limit: peak, Key: key}}}
		if _, err := m.Reserve(ctx, &req); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < keys; i++ {
		reserve(quota.KeyOf("peak", strconv.Itoa(i)))
	}
	clock.Advance(time.Minute) // every key is idle, every sweep is due
	reserve("peak:fresh")
	if got := m.Len(); got < keys+1-quota.SweepBatch {
		t.Fatalf("one decision forgot %d keys, want at most %d", keys+1-got, quota.SweepBatch)
	}
	// 10 ms per decision is a full batch's worth of a 1 s interval.
	decisions := 1
	for ; m.Len() > 1 && decisions <= keys/quota.SweepBatch+2; decisions++ {
		clock.Advance(10 * time.Millisecond)
		reserve("peak:fresh")
	}
	if got := m.Len(); got != 1 {
		t.Errorf("after %d decisions: Len() = %d, want 1", decisions, got)
	}
}

// TestMemorySweepsIdleShards is review finding D8: keys of a shard that no
// decision uses are forgotten by the decisions of other shards, each of
// which sweeps one other shard in turn.
func TestMemorySweepsIdleShards(t *testing.T) {
	t.Parallel()
	const keys = 5000
	clock := quotatest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
	peak := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 10, Period: time.Second, Burst: 10}
	ctx := context.Background()
	busy := "busy"
	for i := 0; m.ShardOf(busy) == m.ShardOf("idle"); i++ {
		busy = fmt.Sprintf("busy-%d", i)
	}
	reserve := func(tag, key string) {
		req := quota.Request{Tag: tag, Items: []quota.Item{{Limit: peak, Key: key}}}
		if _, err := m.Reserve(ctx, &req); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < keys; i++ {
		reserve("idle", quota.KeyOf("peak", strconv.Itoa(i)))
	}
	// The busy shard sweeps the idle one every 63 decisions, a full batch
	// each time: 63 s have passed, more than the 1 min interval.
	limit := 63 * (keys/quota.SweepBatch + 2)
	decisions := 0
	for ; m.Len() > 1 && decisions < limit; decisions++ {
		clock.Advance(time.Second)
		reserve(busy, "peak")
	}
	if got := m.Len(); got > 1 {
		t.Errorf("after %d decisions on another shard: Len() = %d, want at most 1", decisions, got)
	}
}

// TestMemoryConcurrentSweeps: decisions on many tags at once, while the
// clock moves, sweep their own shards and each other's (under -race), and
// each tag still gets exactly its burst while its key lives.
func TestMemoryConcurrentSweeps(t *testing.T) {
	t.Parallel()
	clock := quotatest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock, SweepInterval: time.Second})
	peak := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 1, Period: time.Hour, Burst: 10}
	idle := &quota.Limit{Name: "idle", Kind: quota.GCRA, Rate: 1000, Period: time.Second, Burst: 10}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tag := fmt.Sprintf("tenant-%d", g)
			admitted := 0
			for i := 0; i < 200; i++ {
				req := quota.Request{Tag: tag, Items: []quota.Item{{Limit: peak, Key: "peak"}, {Limit: idle, Key: quota.KeyOf("idle", strconv.Itoa(i))}}}
				res, err := m.Reserve(context.Background(), &req)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					admitted++
				}
				clock.Advance(time.Millisecond)
			}
			if admitted != 10 {
				t.Errorf("%s: admitted %d, want the burst of 10", tag, admitted)
			}
		}()
	}
	wg.Wait()
}

// TestMemoryReturnsMemory is review finding D8: a Go map keeps the memory
// of its most entries, so the store rebuilds a shard's map once most of
// its keys are gone. The tag keeps one key in use all along (a daily
// window), as a provider's tag does. Not parallel: the heap it measures is
// its own, and the margin is wide (the old store kept about 30 bytes a
// key).
func TestMemoryReturnsMemory(t *testing.T) {
	const keys = 100_000
	clock := quotatest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	peak := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 10, Period: time.Second, Burst: 10}
	daily := &quota.Limit{Name: "daily", Kind: quota.Window, Rate: 1 << 30, Calendar: quota.Calendar{Unit: quota.Day}}
	ctx := context.Background()
	heap := func() int64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	base := heap()
	m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock, SweepInterval: time.Second})
	reserve := func(key string) {
		req := quota.Request{Tag: "one-tag", Items: []quota.Item{{Limit: peak, Key: key}, {Limit: daily, Key: "daily"}}}
		if _, err := m.Reserve(ctx, &req); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < keys; i++ {
		reserve(quota.KeyOf("peak", strconv.Itoa(i)))
	}
	full := heap() - base
	clock.Advance(time.Minute)
	// Two laps of the ring: one forgets the idle keys, the next moves the
	// one left to a new map.
	for i := 0; i < 2*(keys/quota.SweepBatch+2); i++ {
		clock.Advance(10 * time.Millisecond)
		reserve("peak:fresh")
	}
	if got := m.Len(); got != 2 {
		t.Fatalf("Len() = %d, want 2", got)
	}
	kept := heap() - base
	runtime.KeepAlive(m)
	t.Logf("heap: %d B with %d keys, %d B with 2", full, keys+1, kept)
	if kept > keys*8 {
		t.Errorf("with 2 keys of %d left the store still holds %d B of heap, want under %d", keys+1, kept, keys*8)
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

// TestMemoryLearnedExpires: a learned figure lives quota.LearnTTL after
// the last response that stated it; then the limit is back at its floor.
func TestMemoryLearnedExpires(t *testing.T) {
	t.Parallel()
	clock := quotatest.NewClock(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC))
	m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
	ctx := context.Background()
	l := &quota.Limit{Name: "core", Kind: quota.GCRA, Rate: 10, Period: time.Second, Learn: true}
	req := &quota.Request{Tag: "v", Items: []quota.Item{{Limit: l, Key: "core"}}}
	rate := func() int64 {
		r, err := m.Reserve(ctx, req)
		if err != nil || !r.Allowed {
			t.Fatalf("Reserve: (%+v, %v)", r, err)
		}
		return r.Limits[0].Rate
	}
	r, err := m.Reserve(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx, []quota.Observed{{Limit: 30, LimitOnly: true}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(quota.LearnTTL - time.Second)
	if got := rate(); got != 30 {
		t.Errorf("just before LearnTTL: rate %d, want the learned 30", got)
	}
	clock.Advance(time.Second)
	if got := rate(); got != 10 {
		t.Errorf("at LearnTTL: rate %d, want the floor 10", got)
	}
}

// TestMemoryCancelHolesJoin: waiters cancelled in arrival order behind a
// live one leave one hole (a run), not one each, so no later cancel walks
// them one by one; waiters cancelled every other one leave one hole per
// gap, which the cancels of the rest join. The tail cancel then goes back
// to the one reservation left.
func TestMemoryCancelHolesJoin(t *testing.T) {
	clock := quotatest.NewClock(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC))
	st := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
	ctx := context.Background()
	lim := &quota.Limit{Name: "g", Kind: quota.GCRA, Rate: 1000, Period: time.Second, Burst: 1}
	reserve := func() *quota.Reservation {
		t.Helper()
		res, err := st.Reserve(ctx, &quota.Request{Tag: "p", Items: []quota.Item{{Limit: lim, Key: "g"}}, MaxWait: time.Minute})
		if err != nil || !res.Allowed {
			t.Fatalf("Reserve: %v, %v", res, err)
		}
		return res
	}
	cancel := func(rs ...*quota.Reservation) {
		t.Helper()
		for _, r := range rs {
			if err := r.Cancel(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	const n = 2000
	first := reserve() // goes at once, and stays
	for _, order := range []string{"arrival", "every other"} {
		waiters := make([]*quota.Reservation, n)
		for i := range waiters {
			waiters[i] = reserve()
		}
		if order == "arrival" {
			cancel(waiters[:n-1]...)
		} else {
			for i := 0; i < n-1; i += 2 {
				cancel(waiters[i])
			}
			if got := st.Holes("p", "g"); got != n/2 {
				t.Errorf("%s: %d holes, want %d, one per gap", order, got, n/2)
			}
			for i := 1; i < n-1; i += 2 {
				cancel(waiters[i])
			}
		}
		if got := st.Holes("p", "g"); got != 1 {
			t.Errorf("%s: %d holes after %d cancels in a row, want 1", order, got, n-1)
		}
		cancel(waiters[n-1])
		if got := st.Holes("p", "g"); got != 0 {
			t.Errorf("%s: %d holes after the tail cancel, want 0", order, got)
		}
		if next := reserve(); next.Wait != first.Wait+time.Millisecond {
			t.Errorf("%s: the next waits %v, want %v: only the first reservation is left", order, next.Wait, first.Wait+time.Millisecond)
		} else {
			cancel(next)
		}
	}
}

// TestMemoryPausedFor: a MemoryStore knows its pauses at once, for what
// is left of them on its clock, by tag and key.
func TestMemoryPausedFor(t *testing.T) {
	t.Parallel()
	clock := quotatest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
	ctx := context.Background()
	stop, err := m.WatchPauses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if got := m.PausedFor("vendor", "pause"); got != 0 {
		t.Errorf("before any pause: %v, want 0", got)
	}
	if err := m.Pause(ctx, "vendor", "pause", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	clock.Advance(500 * time.Millisecond)
	for _, tc := range []struct {
		tag, key string
		want     time.Duration
	}{
		{"vendor", "pause", 1500 * time.Millisecond},
		{"vendor", "pause:acme", 0},
		{"other", "pause", 0},
	} {
		if got := m.PausedFor(tc.tag, tc.key); got != tc.want {
			t.Errorf("PausedFor(%q, %q) = %v, want %v", tc.tag, tc.key, got, tc.want)
		}
	}
	clock.Advance(2 * time.Second)
	if got := m.PausedFor("vendor", "pause"); got != 0 {
		t.Errorf("after the pause: %v, want 0", got)
	}
}

// TestMemoryClassesReclaimed: a key of a limit with classes is forgotten
// once every lane is back to idle (GCRA) or its activity record has
// expired (a held window keeps it ActiveFor, even past the window's end).
func TestMemoryClassesReclaimed(t *testing.T) {
	t.Parallel()
	clock := quotatest.NewClock(time.Date(2026, 1, 1, 23, 59, 0, 0, time.UTC))
	m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
	lanes := &quota.Limit{Name: "lanes", Kind: quota.GCRA, Rate: 10, Period: time.Second, Reserve: []int64{2000}}
	daily := &quota.Limit{Name: "daily", Kind: quota.Window, Rate: 100, Calendar: quota.Calendar{Unit: quota.Day},
		Reserve: []int64{2000}, ActiveFor: 5 * time.Minute}
	ctx := context.Background()
	// Class 1 spends the bottom lane (its tat 1s ahead) and borrows one
	// of lane 0 (500ms ahead).
	for range 9 {
		req := quota.Request{Tag: "t", Class: 1, Items: []quota.Item{{Limit: lanes, Key: "lanes"}}}
		if res, err := m.Reserve(ctx, &req); err != nil || !res.Allowed {
			t.Fatalf("Reserve: (%+v, %v)", res, err)
		}
	}
	req := quota.Request{Tag: "t", Class: 0, Items: []quota.Item{{Limit: daily, Key: "daily"}}}
	if res, err := m.Reserve(ctx, &req); err != nil || !res.Allowed {
		t.Fatalf("Reserve: (%+v, %v)", res, err)
	}
	clock.Advance(time.Second - time.Microsecond) // lane 0 is idle, the bottom lane not yet
	m.Sweep()
	if got := m.Len(); got != 2 {
		t.Fatalf("Len() = %d, want 2", got)
	}
	clock.Advance(time.Microsecond)
	m.Sweep()
	if got := m.Len(); got != 1 {
		t.Errorf("with every lane idle: Len() = %d, want 1 (the window)", got)
	}
	clock.Advance(2 * time.Minute) // the day has ended; class 0's record has not
	m.Sweep()
	if got := m.Len(); got != 1 {
		t.Errorf("after the window ended, within ActiveFor: Len() = %d, want 1", got)
	}
	clock.Advance(3 * time.Minute)
	m.Sweep()
	if got := m.Len(); got != 0 {
		t.Errorf("after ActiveFor: Len() = %d, want 0", got)
	}
}
