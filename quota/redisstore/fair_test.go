package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// fairStack is a request of tenant of weight w on the Fair limit l, keyed
// "shared" in tag "p".
func fairStack(l *quota.Limit, tenant string, w int64) quota.Request {
	return quota.Request{Tag: "p", Items: []quota.Item{{Limit: l, Key: "shared"}}, Share: quota.Share{Key: tenant, Weight: w}}
}

// sharedLimit is a Fair limit of 10/s, burst 10: T 100ms, a span of 1s.
func sharedLimit() *quota.Limit {
	l := gcra("shared", 10, time.Second, 10)
	l.Fair = true
	return l
}

// TestFairKeys: decisions of a Fair limit write only keys in the
// request's hash tag, each with a TTL no longer than its state needs
// (plus the test's slack): K and each tenant's lane at their tat, the
// active set and its weights FairSpan past the last write; a tenant's
// value that is not a safe part is hashed into its lane's key. ParseKey
// reads every one back; Inspect reports the active set and a tenant's
// lane; Reset deletes K and the active set.
func TestFairKeys(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	l := sharedLimit()
	now := start.UnixMicro()
	const T = 100_000 // µs
	// acme (weight 2) alone: its lane is the whole limit; then "{e d}"
	// (weight 1): W = 3, its lane 300ms, burst 3. Both within their share.
	for _, tc := range []struct {
		tenant string
		w      int64
	}{{"acme", 2}, {"{e d}", 0}} {
		if res := reserve(t, st, fairStack(l, tc.tenant, tc.w), 1, 0); !res.Allowed || res.Wait != 0 {
			t.Fatalf("%s: %+v, want admitted at once", tc.tenant, res.Result)
		}
	}
	hashed := quota.SafePart("{e d}")
	slack := time.Duration(testSlack) * time.Millisecond
	item := st.Key("p", "shared")
	set, weights := st.companion(item, KeyFairSet), st.companion(item, KeyFairWeights)
	want := map[string]struct {
		value string
		ttl   time.Duration
	}{
		item:                                   {fmt.Sprint(now + 2*T), 200*time.Millisecond + slack},
		st.FairLaneKey("p", "shared", "acme"):  {fmt.Sprint(now + T), 100*time.Millisecond + slack},
		st.FairLaneKey("p", "shared", "{e d}"): {fmt.Sprint(now + 3*T), 300*time.Millisecond + slack},
		set:                                    {fmt.Sprintf("%s=%d,acme=%d", hashed, now, now), time.Second + slack},
		weights:                                {fmt.Sprintf("%s=1,=3,acme=2", hashed), time.Second + slack},
	}
	keys := snapshot(t, client, st.Prefix())
	for k, ks := range keys {
		w, ok := want[k]
		if !ok {
			t.Errorf("unexpected key %s: %+v", k, ks)
			continue
		}
		if ks.value != w.value {
			t.Errorf("%s holds %q, want %q", k, ks.value, w.value)
		}
		if ks.pttl <= w.ttl-time.Second || ks.pttl > w.ttl {
			t.Errorf("%s: TTL %v, want within a second below %v", k, ks.pttl, w.ttl)
		}
	}
	if len(keys) != len(want) {
		t.Errorf("%d keys, want %d: %v", len(keys), len(want), keys)
	}
	if lane := st.FairLaneKey("p", "shared", "{e d}"); lane != st.Prefix()+"{p}:!fair:shared:"+hashed {
		t.Errorf("the hashed tenant's lane is %s", lane)
	}
	for k, kind := range map[string]KeyKind{
		st.FairLaneKey("p", "shared", "acme"): KeyFairLane, st.FairLaneKey("p", "shared", ""): KeyFairLane,
		set: KeyFairSet, weights: KeyFairWeights,
		st.cancelledKey(st.FairLaneKey("p", "shared", "{e d}")): KeyCancelled,
	} {
		tag, key, got, ok := st.ParseKey(k)
		if !ok || tag != "p" || key != "shared" || got != kind {
			t.Errorf("ParseKey(%s) = %q %q %v %v, want p shared %v", k, tag, key, got, ok, kind)
		}
	}
	for _, k := range []string{"!fair:shared:", "!fair:shared:a{b", "!fair::acme", "!fair:shared"} {
		if tag, key, kind, ok := st.ParseKey(st.Prefix() + "{p}:" + k); ok && kind == KeyFairLane {
			t.Errorf("ParseKey(%s) = %q %q %v, want no tenant's lane", k, tag, key, kind)
		}
	}

	// Inspect: the set as a decision finds it before the tenant joins,
	// and the tenant's lane at the weights with its own in them.
	for _, tc := range []struct {
		tenant string
		w      int64
		want   FairState
	}{
		// acme: W stays 3, its lane 150ms, burst 6, booked 100ms.
		{"acme", 2, FairState{Tenants: 2, Weight: 3, Interval: 150 * time.Millisecond, Burst: 6, Booked: 100 * time.Millisecond}},
		// a newcomer of weight 1: W would be 4.
		{"zed", 1, FairState{Tenants: 2, Weight: 3, Interval: 400 * time.Millisecond, Burst: 2}},
		// "{e d}" now at weight 3: W would be 5, its lane 166.667ms, burst 6,
		// booked 300ms: its next appointment is 300ms + Ti - 6 Ti ahead: now.
		{"{e d}", 3, FairState{Tenants: 2, Weight: 3, Interval: 166667 * time.Microsecond, Burst: 6, Booked: 300 * time.Millisecond}},
	} {
		snap := mustInspect(t, st, fairStack(l, tc.tenant, tc.w))
		if got := snap.Items[0].Fair; got == nil || *got != tc.want {
			t.Errorf("Inspect of %s: %+v, want %+v", tc.tenant, got, tc.want)
		}
		if got := snap.Items[0].Status; got.Remaining != 8 || got.ResetAfter != 200*time.Millisecond {
			t.Errorf("Inspect of %s: status %+v, want K's: 8 remaining, reset after 200ms", tc.tenant, got)
		}
	}
	// acme books its lane ahead: 6 more within its share (W = 3: 150ms
	// each, a burst of 6) take it to 1s past now.
	for range 6 {
		if res := reserve(t, st, fairStack(l, "acme", 2), 1, 0); !res.Allowed {
			t.Fatalf("acme: %+v, want admitted", res.Result)
		}
	}
	snap := mustInspect(t, st, fairStack(l, "acme", 2))
	// A request of cost 1 would get its appointment at 1s + 150ms - 6 *
	// 150ms: 250ms, past the horizon (100ms): over its share.
	if got, want := *snap.Items[0].Fair, (FairState{Tenants: 2, Weight: 3, Interval: 150 * time.Millisecond, Burst: 6,
		Booked: time.Second, Appointment: 250 * time.Millisecond}); got != want {
		t.Errorf("Inspect of acme booked ahead: %+v, want %+v", got, want)
	}
	// Once every tenant is stale, the set is forgotten: a decision sees
	// none, a lone tenant's lane is the whole limit.
	clock.Advance(l.FairSpan())
	snap = mustInspect(t, st, fairStack(l, "zed", 1))
	if got, want := *snap.Items[0].Fair, (FairState{Interval: 100 * time.Millisecond, Burst: 10}); got != want {
		t.Errorf("Inspect once every tenant is stale: %+v, want %+v", got, want)
	}
	if err := st.Reset(ctx, "p", "shared"); err != nil {
		t.Fatal(err)
	}
	left := snapshot(t, client, st.Prefix())
	for _, k := range []string{item, set, weights} {
		if _, ok := left[k]; ok {
			t.Errorf("Reset left %s", k)
		}
	}
}

// TestFairCancelSettle: a reservation admitted within its share charged
// K and its tenant's lane; Cancel gives both back by their own marks, and
// Settle books the actual cost in both, the lane at its own interval.
func TestFairCancelSettle(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	l := sharedLimit()
	now := start.UnixMicro()
	const T = 100_000
	req := fairStack(l, "acme", 1)
	for range 10 { // K's burst, and acme's lane's (alone: the whole limit)
		reserve(t, st, req, 1, 0)
	}
	get := func(k string) int64 {
		t.Helper()
		v, _ := client.Get(ctx, k).Int64()
		return v
	}
	item, lane := st.Key("p", "shared"), st.FairLaneKey("p", "shared", "acme")
	r := reserve(t, st, req, 1, time.Second)
	if !r.Allowed || r.Wait != 100*time.Millisecond {
		t.Fatalf("the 11th: %+v, want admitted in 100ms", r.Result)
	}
	if get(item) != now+11*T || get(lane) != now+11*T {
		t.Fatalf("K %d, lane %d, want both %d", get(item), get(lane), now+11*T)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if get(item) != now+10*T || get(lane) != now+10*T {
		t.Errorf("after Cancel: K %d, lane %d, want both back at %d", get(item), get(lane), now+10*T)
	}
	r = reserve(t, st, req, 1, time.Second)
	if err := r.Settle(ctx, []int64{3}); err != nil {
		t.Fatal(err)
	}
	if get(item) != now+13*T || get(lane) != now+13*T {
		t.Errorf("after Settle of 3: K %d, lane %d, want both %d (a debt of 2 intervals)", get(item), get(lane), now+13*T)
	}
	// A second tenant halves acme's share (its request is deferred: K
	// is booked 1.3s ahead); acme's lane is then charged and settled at
	// the interval of W = 2, 200ms.
	if res := reserve(t, st, fairStack(l, "bee", 1), 1, time.Hour); !res.Deferred {
		t.Fatalf("bee: %+v, want deferred", res.Result)
	}
	clock.Advance(500 * time.Millisecond)
	r = reserve(t, st, req, 1, 0)
	if !r.Allowed {
		t.Fatalf("acme after 500ms: %+v, want admitted", r.Result)
	}
	before := get(lane)
	if want := now + 15*T; before != want {
		t.Errorf("acme's lane at W = 2: %d, want %d (one lane interval, 200ms, past what it held)", before-now, want-now)
	}
	if err := r.Settle(ctx, []int64{2}); err != nil {
		t.Fatal(err)
	}
	if got := get(lane); got != before+2*T {
		t.Errorf("lane after a settle of 2 at W = 2: %d, want %d (one more lane interval)", got-now, before+2*T-now)
	}
}

// TestFairCommands: what a decision of a Fair limit costs Redis: one
// MGET of K and the tenant's lane; the active set's newest member, its
// stale ones (two ZRANGE) and the weights (one HMGET); when admitted or
// deferred its write (ZADD, HSET, and a PEXPIRE of each key, and a ZREM
// and an HDEL when stale tenants leave); one SET of K when admitted, one
// of the lane when charged or booked. A denial writes nothing.
func TestFairCommands(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	st := newStore(t, srv.Client(t), nil)
	// 1000 an hour (T 3.6s): the burst is spent long before one event
	// refills, on the server's clock however slow the machine.
	l := gcra("shared", 1000, time.Hour, 0)
	l.Fair = true
	req := fairStack(l, "acme", 1)
	reserve(t, st, req, 1, 0) // loads the script
	stats := srv.Client(t)
	reads := map[string]int64{"evalsha": 1, "time": 1, "mget": 1, "zrange": 2, "hmget": 1}
	writes := map[string]int64{"zadd": 1, "hset": 1, "pexpire": 2}
	with := func(more map[string]int64) map[string]int64 {
		m := map[string]int64{}
		for _, x := range []map[string]int64{reads, writes, more} {
			for k, v := range x {
				m[k] += v
			}
		}
		return m
	}
	before := commandCalls(t, stats)
	if res := reserve(t, st, req, 1, 0); !res.Allowed {
		t.Fatalf("denied: %+v", res.Result)
	}
	checkCalls(t, "an admitted decision", callsSince(before, commandCalls(t, stats)), with(map[string]int64{"set": 2}))
	// Past K's burst with no wait: denied, nothing written.
	for i := 0; reserve(t, st, req, 1, 0).Allowed; i++ {
		if i == 5000 {
			t.Fatal("5000 admitted at once of a burst of 1000")
		}
	}
	before = commandCalls(t, stats)
	if res := reserve(t, st, req, 1, 0); res.Allowed || res.Deferred {
		t.Fatalf("past the burst: %+v, want denied", res.Result)
	}
	checkCalls(t, "a denial", callsSince(before, commandCalls(t, stats)), reads)
	// With a wait: admitted near now, then deferred once K is booked a
	// horizon ahead; a deferral books the lane, not K.
	for i := 0; ; i++ {
		before = commandCalls(t, stats)
		res := reserve(t, st, req, 1, time.Hour)
		if res.Deferred {
			checkCalls(t, "a deferral", callsSince(before, commandCalls(t, stats)), with(map[string]int64{"set": 1}))
			break
		}
		if !res.Allowed || i == 5 {
			t.Fatalf("request %d with a wait: %+v, want admitted or deferred, and deferred within 5", i, res.Result)
		}
	}
}

// TestFairLaneExact: a tenant's lane interval and burst are the same in
// the Redis store as quota.FairLane computes them, for intervals up to
// 2^51 µs, bursts up to the largest a Fair limit may have and active
// weights far past 2^53 / T, where the product T*W is no longer exact
// and both stores must round it alike. The active set is written by hand
// (one live tenant holding the weight), and Inspect reads the lane.
func TestFairLaneExact(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(21, 1))
	now := start.UnixMicro()
	item := st.Key("p", "shared")
	set, weights := st.companion(item, KeyFairSet), st.companion(item, KeyFairWeights)
	inexact := 0 // cases where T*W is past 2^53 and the lane is not capped
	for i := range 400 {
		T := 1 + rng.Int64N(1<<uint(1+rng.IntN(51)))
		// Bursts of every size, small ones often: only a lane of a small
		// burst can be that slow and not capped.
		B := 1 + rng.Int64N(min(quota.MaxExact/T, (1<<53-1)/quota.MaxWeight, 1<<uint(rng.IntN(53))))
		others := rng.Int64N(1 << uint(rng.IntN(40))) // the other tenants' weights
		w := 1 + rng.Int64N(quota.MaxWeight)
		if i%2 == 0 { // T*W past 2^53, the lane still below its cap
			T = 1<<uint(30+rng.IntN(18)) + rng.Int64N(1<<20)
			others = (1<<uint(54+rng.IntN(3)))/T + rng.Int64N(1000)
			w, B = 100+rng.Int64N(quota.MaxWeight-99), 1+rng.Int64N(3)
		}
		l := &quota.Limit{Name: "shared", Kind: quota.GCRA, Rate: 1, Period: time.Duration(T) * time.Microsecond, Burst: B, Fair: true}
		if err := l.Validate(); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if err := client.Del(ctx, set, weights).Err(); err != nil {
			t.Fatal(err)
		}
		if others > 0 {
			client.ZAdd(ctx, set, redis.Z{Score: float64(now), Member: "others"})
			client.HSet(ctx, weights, "others", others, "", others)
		}
		snap := mustInspect(t, st, fairStack(l, "acme", w))
		Ti, bi := quota.FairLane(T, B, others+w, w)
		if float64(T)*float64(others+w) > 1<<53 && Ti < quota.MaxExact/B {
			inexact++
		}
		if got := snap.Items[0].Fair; got == nil || got.Interval != quota.Micros(Ti) || got.Burst != bi || got.Weight != others {
			t.Fatalf("case %d (T %d, B %d, W %d, w %d): %+v, want interval %dµs, burst %d", i, T, B, others+w, w, got, Ti, bi)
		}
	}
	if inexact < 20 {
		t.Errorf("%d cases of T*W past 2^53 below the cap, want 20 at least: the test shows little", inexact)
	}
	t.Logf("%d cases of T*W past 2^53 below the cap", inexact)
}

// TestFairOnCluster: a decision of a Fair limit runs on a Redis Cluster:
// the tenant's lane and the active set are in the request's slot.
func TestFairOnCluster(t *testing.T) {
	t.Parallel()
	client := redistest.StartCluster(t).Client(t)
	st := newStore(t, client, quotatest.NewClock(start))
	l := sharedLimit()
	for i, tenant := range []string{"acme", "bee", "{c d}"} {
		req := fairStack(l, tenant, int64(i))
		req.Tag = fmt.Sprintf("vendor:%d", i)
		if res := reserve(t, st, req, 1, time.Hour); !res.Allowed {
			t.Fatalf("%s: denied %+v", tenant, res.Result)
		}
		if _, err := st.Inspect(context.Background(), &req); err != nil {
			t.Fatalf("%s: Inspect: %v", tenant, err)
		}
	}
}

// TestFairConcurrent: decisions of many goroutines on one Fair limit,
// however they are coalesced, never admit past K's burst (on a stopped
// clock nothing refills), K's tat counts each admitted one once, and the
// active set stays whole: one member and one weight per tenant, and W
// their sum.
func TestFairConcurrent(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	st := newStore(t, client, quotatest.NewClock(start))
	ctx := context.Background()
	l := gcra("shared", 50, time.Hour, 0) // T 72s, burst 50
	l.Fair = true
	tenants := []string{"", "acme", "b-2", "{c d}", "e"}
	const goroutines, each = 8, 40
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				req := fairStack(l, tenants[(g+i)%len(tenants)], int64(1+(g+i)%len(tenants)))
				res, err := st.Reserve(ctx, &req)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	n := admitted.Load()
	if n == 0 || n > 50 {
		t.Fatalf("%d admitted, want some and at most the burst, 50", n)
	}
	item := st.Key("p", "shared")
	if got, _ := client.Get(ctx, item).Int64(); got != start.UnixMicro()+n*l.Interval() {
		t.Errorf("K's tat %d, want %d: one interval per admitted request", got-start.UnixMicro(), n*l.Interval())
	}
	members := client.ZRange(ctx, st.companion(item, KeyFairSet), 0, -1).Val()
	weights := client.HGetAll(ctx, st.companion(item, KeyFairWeights)).Val()
	var sum int64
	for _, p := range members {
		w, ok := weights[p]
		if !ok {
			t.Errorf("member %s has no weight", p)
		}
		var x int64
		fmt.Sscan(w, &x)
		sum += x
	}
	if len(members) != len(tenants) || len(weights) != len(tenants)+1 || weights[""] != fmt.Sprint(sum) {
		t.Errorf("active set %v, weights %v: want %d tenants, each with a weight, and W their sum", members, weights, len(tenants))
	}
	t.Logf("%d of %d admitted", n, goroutines*each)
}
