package redisstore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// TestLeaseNotifyAcrossStores: two Stores with the same prefix on their own
// clients, as two processes of a fleet. A waiter in one is woken by a
// release in the other, on one server, on a cluster whose master for
// the lease's slot is not the one the subscription is on, and on a Ring
// for a lease on each of its shards. The lease TTL is
// ten minutes on a stopped clock, so only the notification can wake the
// waiter. When the last waiter is done, the subscription ends.
func TestLeaseNotifyAcrossStores(t *testing.T) {
	t.Parallel()
	t.Run("server", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		testNotifyAcross(t, srv.Client(t), srv.Client(t), "tenant")
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cl := redistest.StartCluster(t)
		a, b := cl.Client(t), cl.Client(t)
		prefix := uniquePrefix()
		ctx := context.Background()
		chanSlot := a.ClusterKeySlot(ctx, prefix+"!released").Val()
		tag := ""
		for i := 0; tag == ""; i++ { // a tag whose slot another master holds
			tg := "tenant-" + strconv.Itoa(i)
			if slot := a.ClusterKeySlot(ctx, "{"+tg+"}").Val(); slot/5461 != chanSlot/5461 {
				tag = tg
			}
		}
		testNotifyAcross(t, a, b, tag)
	})
	t.Run("ring", func(t *testing.T) {
		t.Parallel()
		servers := []*redistest.Server{redistest.Start(t), redistest.Start(t)}
		addrs := map[string]string{"s0": servers[0].Addr, "s1": servers[1].Addr}
		ring := func() *redis.Ring {
			r := redis.NewRing(&redis.RingOptions{Addrs: addrs})
			t.Cleanup(func() { _ = r.Close() })
			return r
		}
		a := ring()
		// A tag on each shard: a Ring subscribes on the shard of the
		// channel's name, so one of them is on another shard than a
		// subscription made the plain way.
		ctx := context.Background()
		tags := make([]string, len(servers))
		for i, found := 0, 0; found < len(servers); i++ {
			tg := "tenant-" + strconv.Itoa(i)
			probe := "{" + tg + "}probe"
			if err := a.Set(ctx, probe, 1, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			for j, srv := range servers {
				if tags[j] == "" && srv.Client(t).Exists(ctx, probe).Val() == 1 {
					tags[j] = tg
					found++
				}
			}
		}
		for j, tag := range tags {
			t.Run("shard "+strconv.Itoa(j), func(t *testing.T) {
				testNotifyAcross(t, a, ring(), tag)
			})
		}
	})
}

func testNotifyAcross(t *testing.T, ca, cb redis.UniversalClient, tag string) {
	prefix := uniquePrefix()
	clock := quotatest.NewClock(start)
	stores := make([]*Store, 2)
	for i, c := range []redis.UniversalClient{ca, cb} {
		st, err := New(c, Options{Prefix: prefix, Clock: clock, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = st
	}
	a, b := stores[0], stores[1]
	ctx := context.Background()
	streams := &quota.Limit{Name: "streams", Kind: quota.Concurrency, Rate: 1, Period: 10 * time.Minute}
	req := quota.Request{Tag: tag, Items: []quota.Item{{Limit: streams, Key: "streams"}}}
	held := reserve(t, a, req, 1, 0)
	if !held.Allowed {
		t.Fatalf("the first lease: %+v", held.Result)
	}
	w, err := b.WatchLeases(ctx, tag, "streams")
	if err != nil {
		t.Fatal(err)
	}
	if r := reserve(t, b, req, 1, time.Minute); r.Allowed {
		t.Fatalf("the lease is held, yet the other store admitted a request")
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.C():
	case <-time.After(10 * time.Second):
		t.Fatalf("the other store's waiter was not woken by the release (lease TTL 10m, stopped clock)")
	}
	w.Rearm()
	if r := reserve(t, b, req, 1, time.Minute); !r.Allowed {
		t.Fatalf("woken, the waiter was refused: %+v", r.Result)
	}
	w.Done(false)
	b.notify.mu.Lock()
	subs, waiters := b.notify.subs, b.notify.waiters
	b.notify.mu.Unlock()
	if subs != nil || waiters != 0 {
		t.Fatalf("after the last waiter: %d waiters, subscriptions %v, want none", waiters, subs)
	}
	if a.notify.subs != nil {
		t.Fatalf("a store that never waited subscribed")
	}
}

// TestLeaseNotifySubscriptionFails: a store that cannot subscribe (its
// Redis is gone) says so with an error wrapping quota.ErrStore, and holds
// no waiter.
func TestLeaseNotifySubscriptionFails(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	st := newStore(t, srv.Client(t), nil)
	st.timeout = time.Second
	srv.Stop(t)
	w, err := st.WatchLeases(context.Background(), "tag", "streams")
	if w != nil || !errors.Is(err, quota.ErrStore) {
		t.Fatalf("WatchLeases on a stopped server: %v, %v; want an error wrapping quota.ErrStore", w, err)
	}
	if st.notify.waiters != 0 || st.notify.subs != nil {
		t.Fatalf("a failed subscription left %d waiters and subscriptions %v", st.notify.waiters, st.notify.subs)
	}
}

// TestLeaseReleaseWithoutChannels: a store whose ACL user may not use
// channels (Redis 7's default for a new user) still releases and cancels
// leases: the announcement is dropped, not the release. Its waiters
// cannot subscribe, which WatchLeases reports.
func TestLeaseReleaseWithoutChannels(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	admin := srv.Client(t)
	if err := admin.Do(ctx, "ACL", "SETUSER", "nochan", "on", ">secret", "~*", "resetchannels", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "nochan", Password: "secret"})
	t.Cleanup(func() { _ = client.Close() })
	st := newStore(t, client, quotatest.NewClock(start))
	streams := &quota.Limit{Name: "streams", Kind: quota.Concurrency, Rate: 1, Period: 10 * time.Minute}
	one := gcra("one", 1, time.Second, 1)
	req := quota.Request{Tag: "t", Items: []quota.Item{{Limit: one, Key: "one"}, {Limit: streams, Key: "streams"}}}
	for _, op := range []string{"release", "cancel"} {
		if op == "cancel" { // a reservation that waits for the GCRA slot
			reserve(t, st, quota.Request{Tag: "t", Items: req.Items[:1]}, 1, 0)
		}
		held := reserve(t, st, req, 1, time.Minute)
		if !held.Allowed {
			t.Fatalf("%s: the lease: %+v", op, held.Result)
		}
		do := held.Release
		if op == "cancel" {
			do = held.Cancel
		}
		if err := do(ctx); err != nil {
			t.Fatalf("%s without channel permissions: %v", op, err)
		}
		if n := admin.ZCard(ctx, st.Key("t", "streams")).Val(); n != 0 {
			t.Fatalf("after the %s: %d leases held, want 0", op, n)
		}
		if op == "release" { // the GCRA slot of the next round
			admin.Del(ctx, st.Key("t", "one"))
		}
	}
	if _, err := st.WatchLeases(ctx, "t", "streams"); !errors.Is(err, quota.ErrStore) && !errors.Is(err, quota.ErrState) {
		t.Fatalf("WatchLeases without channel permissions: %v, want an error", err)
	}
}

// TestPauseNotifyAcrossStores: three Stores with the same prefix on their
// own clients, as three processes. A pause set through one is known to it
// at once, and to another that watches once the announcement arrives, for
// the pause's length on its own (stopped) clock; a Store that does not
// watch knows nothing of it. When the watch stops, the subscription ends.
func TestPauseNotifyAcrossStores(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	prefix := uniquePrefix()
	clock := quotatest.NewClock(start)
	var stores []*Store
	for range 3 {
		st, err := New(srv.Client(t), Options{Prefix: prefix, Clock: clock, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, st)
	}
	a, b, c := stores[0], stores[1], stores[2]
	ctx := context.Background()
	stop, err := b.WatchPauses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Pause(ctx, "vendor", "pause", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := a.PausedFor("vendor", "pause"); got != 10*time.Second {
		t.Errorf("the store that paused: PausedFor = %v, want 10s at once", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.PausedFor("vendor", "pause") == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := b.PausedFor("vendor", "pause"); got != 10*time.Second {
		t.Errorf("the store that watched: PausedFor = %v, want 10s", got)
	}
	if got := b.PausedFor("vendor", "pause:acme"); got != 0 {
		t.Errorf("another pause key: PausedFor = %v, want 0", got)
	}
	if got := c.PausedFor("vendor", "pause"); got != 0 {
		t.Errorf("a store that did not watch: PausedFor = %v, want 0", got)
	}
	clock.Advance(10 * time.Second)
	if got := b.PausedFor("vendor", "pause"); got != 0 {
		t.Errorf("after the pause: PausedFor = %v, want 0", got)
	}
	stop()
	stop() // a second stop does nothing
	n, err := srv.Client(t).PubSubNumSub(ctx, prefix+"!paused").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n[prefix+"!paused"] != 0 {
		t.Errorf("after the watch stopped: %d subscribers, want 0", n[prefix+"!paused"])
	}
}
