package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
	"github.com/redis/go-redis/v9"
)

// TestSyncAfterFlush: Redis forgot everything (FLUSHALL, as an empty
// restart does) between a reservation and its response. The sync rebuilds
// each limit's state from the vendor's figure, with a TTL, so the next
// requests are held to what the vendor has left instead of a fresh quota.
func TestSyncAfterFlush(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	ctx := context.Background()
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	req := stack("flush", gcra("peak", 10, time.Second, 10), window("hourly", 100, quota.Hour, nil))
	a := reserve(t, st, req, 1, 0)
	if !a.Allowed {
		t.Fatalf("first request: %+v, want admitted", a)
	}
	if err := client.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(ctx, []quota.Observed{{Item: 0, Remaining: 3}, {Item: 1, Remaining: 2}}); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	for key, ks := range snapshot(t, client, st.prefix) {
		if ks.pttl <= 0 {
			t.Errorf("key %s has TTL %v after the sync: it must expire", key, ks.pttl)
		}
	}
	n := 0
	for ; n < 20; n++ {
		if !reserve(t, st, req, 1, 0).Allowed {
			break
		}
	}
	if n != 2 {
		t.Errorf("after FLUSHALL and a sync to 3 (peak) and 2 (hourly): %d admitted, want 2", n)
	}
}

// TestSyncUnknownOp: after.lua refuses an op it does not know instead of
// misreading its arguments.
func TestSyncUnknownOp(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	st := newStore(t, client, nil)
	_, err := st.run(context.Background(), afterScript, []string{st.prefix + "k"}, []any{"", 0, 1, "bogus", "g", 1, 1, 1, 1})
	if err == nil {
		t.Fatal("after.lua with op bogus: no error")
	}
}

// TestAfterCombinesOps: one after.lua call runs a sync, a settle and a
// lease release together, in order, an item key repeated per op: the
// transport can do everything a response calls for in one round trip.
func TestAfterCombinesOps(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	st := newStore(t, client, nil)
	ctx := context.Background()
	const now = int64(1_000_000_000)
	g, c := st.prefix+"{t}g", st.prefix+"{t}c"
	// A GCRA key (T 100µs, DVT 1000µs) whose tat a later reservation
	// moved from this one's mark now+500 to now+1000, and a lease.
	if err := client.Set(ctx, g, now+1000, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.ZAdd(ctx, c, redis.Z{Score: float64(now + 5000), Member: "x"}).Err(); err != nil {
		t.Fatal(err)
	}
	// A TTL slack of a minute: the key's expiry is real time, and the
	// 2 ms the state itself needs could pass before the reads below.
	v, err := st.run(ctx, afterScript, []string{g, g, c}, []any{now, 60_000, 3,
		"sync", "g", 100, 1000, 2, now + 500, // tat = now + 1000 - 2*100 + 500 (after)
		"settle", "g", now + 500, 3, 100, 10_000, // an excess of 3: + 300 (period 10ms)
		"release", "x", st.channel()})
	if err != nil {
		t.Fatal(err)
	}
	if v != int64(3) {
		t.Errorf("reply %v, want 3 entries that changed something", v)
	}
	if tat, _ := client.Get(ctx, g).Int64(); tat != now+1600 {
		t.Errorf("tat now+%d, want now+1600 (synced to now+1300, then the excess)", tat-now)
	}
	if n := client.ZCard(ctx, c).Val(); n != 0 {
		t.Errorf("%d leases left, want the lease released", n)
	}
}
