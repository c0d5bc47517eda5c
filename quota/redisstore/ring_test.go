package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// tenantRequest is a tenant's request of provider "provider", as package
// providers builds it with keys per tenant: its own limit and pause in
// its tag, the provider's pause of every tenant as its Over.
func tenantRequest(tag string) quota.Request {
	req := stack(tag, gcra("peak", 10, time.Second, 0))
	req.Pauses = []string{"pause:" + tag}
	req.Over = quota.PauseKey{Tag: "provider", Key: "pause:all"}
	return req
}

// TestOverPauseOnRing: on a go-redis Ring of three servers a request's
// Over pause holds it through the copy on its own shard, which PauseOver
// writes on every shard and ResumeOver deletes: tenants on each shard are
// held, then released. A pause set by Pause alone has no copies and holds
// no tenant, on the pause's own shard neither.
func TestOverPauseOnRing(t *testing.T) {
	t.Parallel()
	r := redistest.StartRing(t, 3)
	client := r.Client(t, nil)
	st, err := New(client, Options{Prefix: uniquePrefix(), Clock: quotatest.NewClock(start), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tags := r.TagPerShard(t, client, func(i int) string { return fmt.Sprintf("provider:t%d", i) })
	if err := st.Pause(ctx, "provider", "pause:all", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, tag := range tags {
		if res := reserve(t, st, tenantRequest(tag), 1, 0); !res.Allowed {
			t.Errorf("%s (shard %d), its Over pause set by Pause alone: %+v, want admitted (no copy)", tag, r.Shard(client, tag), res.Result)
		}
	}
	if err := st.PauseOver(ctx, "provider", "pause:all", time.Hour); err != nil {
		t.Fatal(err)
	}
	copyKey := st.ringCopyKey("provider", "pause:all")
	if tag, key, kind, ok := st.ParseKey(copyKey); ok {
		t.Errorf("ParseKey(%q) = %q, %q, %v; want no key of a tag (status passes over copies)", copyKey, tag, key, kind)
	}
	want := start.Add(time.Hour)
	for i, srv := range r.Servers {
		c := srv.Client(t)
		if v, err := c.Get(ctx, copyKey).Int64(); err != nil || v != want.UnixMicro() {
			t.Errorf("shard %d: copy %s = %d, %v; want %d", i, copyKey, v, err, want.UnixMicro())
		}
		if ttl := c.PTTL(ctx, copyKey).Val(); ttl <= 0 {
			t.Errorf("shard %d: the copy's TTL is %v, want it to expire", i, ttl)
		}
	}
	for _, tag := range tags {
		req := tenantRequest(tag)
		if res := reserve(t, st, req, 1, 0); res.Allowed || res.Decider != quota.PausedDecider || res.RetryAfter != time.Hour {
			t.Errorf("%s (shard %d) during PauseOver: %+v, want held for an hour", tag, r.Shard(client, tag), res.Result)
		}
		snap, err := st.Inspect(ctx, &req)
		if err != nil || len(snap.Pauses) != 2 || !snap.Pauses[0].IsZero() || !snap.Pauses[1].Equal(want) {
			t.Errorf("Inspect %s: %v, %v; want its own pause not in force, then the Over pause's copy until %v", tag, snap.Pauses, err, want)
		}
	}
	if err := st.ResumeOver(ctx, "provider", "pause:all"); err != nil {
		t.Fatal(err)
	}
	for i, srv := range r.Servers {
		if n := srv.Client(t).Exists(ctx, copyKey, st.PauseKey("provider", "pause:all")).Val(); n != 0 {
			t.Errorf("shard %d holds %d of the copy and the pause after ResumeOver, want none", i, n)
		}
	}
	for _, tag := range tags {
		if res := reserve(t, st, tenantRequest(tag), 1, 0); !res.Allowed {
			t.Errorf("%s after ResumeOver: %+v, want admitted", tag, res.Result)
		}
	}
}

// TestOverPauseCommandsOnRing: on a Ring a tenant's decision that reads
// its Over pause's copy makes the same commands as one without an Over
// pause (one EVALSHA, its one MGET of the pauses), on its own shard alone.
func TestOverPauseCommandsOnRing(t *testing.T) {
	t.Parallel()
	r := redistest.StartRing(t, 2)
	client := r.Client(t, nil)
	st := newStore(t, client, nil)
	tag := r.TagPerShard(t, client, func(i int) string { return fmt.Sprintf("provider:t%d", i) })[1]
	plain := stack(tag, gcra("peak", 1000, time.Second, 0), gcra("minute", 10000, time.Minute, 0))
	plain.Pauses = []string{"pause:" + tag}
	over := plain
	over.Over = quota.PauseKey{Tag: "provider", Key: "pause:all"}
	if pk, ok := st.keys(&over), st.keys(&plain); len(pk) != len(ok)+1 || pk[len(pk)-1] != st.ringCopyKey("provider", "pause:all") {
		t.Fatalf("keys with Over %q, without %q: want the copy's key more", pk, ok)
	}
	nodes := make([]*redis.Client, len(r.Servers))
	for i, s := range r.Servers {
		nodes[i] = s.Client(t)
	}
	calls := func(req quota.Request) map[string]int64 {
		reserve(t, st, req, 1, 0) // the first: loads the script and checks the policy
		before := make([]map[string]int64, len(nodes))
		for i, n := range nodes {
			before[i] = commandCalls(t, n)
		}
		const n = 10
		for range n {
			reserve(t, st, req, 1, 0)
		}
		sum := map[string]int64{}
		for i, n := range nodes {
			for cmd, c := range callsSince(before[i], commandCalls(t, n)) {
				if cmd != "ping" { // the Ring's heartbeat
					sum[cmd] += c
				}
			}
		}
		return sum
	}
	want := calls(plain)
	checkCalls(t, "10 decisions reading an Over pause's copy on a Ring", calls(over), want)
	if want["evalsha"] != 10 || want["mget"] != 10 {
		t.Errorf("10 decisions ran %v, want one EVALSHA and one MGET each", want)
	}
}

// TestOverPauseOnRingShardDown: a shard the Ring reports down gets no
// copy. PauseOver sets the pause and the other copies and fails saying
// which shard to write again; the Ring sends the down shard's tenants to
// the shards that hold a copy meanwhile. Once the shard is back, a second
// PauseOver writes its copy, and ResumeOver, which also fails while a
// shard is down, deletes them all.
func TestOverPauseOnRingShardDown(t *testing.T) {
	t.Parallel()
	r := redistest.StartRing(t, 3)
	client := r.Client(t, &redis.RingOptions{HeartbeatFrequency: 20 * time.Millisecond})
	st, err := New(client, Options{Prefix: uniquePrefix(), Clock: quotatest.NewClock(start), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tags := r.TagPerShard(t, client, func(i int) string { return fmt.Sprintf("provider:t%d", i) })
	down := r.Shard(client, "provider") // the pause's own shard stays up
	down = (down + 1) % len(r.Servers)
	r.Servers[down].Stop(t)
	waitShards(t, client, len(r.Servers)-1)

	err = st.PauseOver(ctx, "provider", "pause:all", time.Hour)
	if !errors.Is(err, quota.ErrStore) || !strings.Contains(err.Error(), fmt.Sprintf("s%d (%s)", down, r.Servers[down].Addr)) {
		t.Fatalf("PauseOver with shard s%d down: %v, want an ErrStore naming it", down, err)
	}
	for _, tag := range tags { // the down shard's tenant is on another shard now
		if res := reserve(t, st, tenantRequest(tag), 1, 0); res.Allowed {
			t.Errorf("%s with shard s%d down: %+v, want held", tag, down, res.Result)
		}
	}
	if err := st.ResumeOver(ctx, "provider", "pause:all"); !errors.Is(err, quota.ErrStore) {
		t.Errorf("ResumeOver with shard s%d down: %v, want an ErrStore", down, err)
	}
	if err := st.PauseOver(ctx, "provider", "pause:all", time.Hour); !errors.Is(err, quota.ErrStore) {
		t.Fatalf("PauseOver again with shard s%d down: %v, want an ErrStore", down, err)
	}

	r.Servers[down].Restart(t) // empty: as a shard that lost its data
	waitShards(t, client, len(r.Servers))
	if res := reserve(t, st, tenantRequest(tags[down]), 1, 0); !res.Allowed {
		t.Errorf("%s back on its shard without a copy: %+v, want admitted (the gap the error named)", tags[down], res.Result)
	}
	if err := st.PauseOver(ctx, "provider", "pause:all", time.Hour); err != nil {
		t.Fatalf("PauseOver with every shard up: %v", err)
	}
	for _, tag := range tags {
		if res := reserve(t, st, tenantRequest(tag), 1, 0); res.Allowed {
			t.Errorf("%s after PauseOver with every shard up: %+v, want held", tag, res.Result)
		}
	}
	if err := st.ResumeOver(ctx, "provider", "pause:all"); err != nil {
		t.Fatal(err)
	}
	for _, tag := range tags {
		if res := reserve(t, st, tenantRequest(tag), 1, 0); !res.Allowed {
			t.Errorf("%s after ResumeOver: %+v, want admitted", tag, res.Result)
		}
	}
}

// waitShards waits until the Ring's heartbeat reports n shards up.
func waitShards(t *testing.T, c *redis.Ring, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for c.Len() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the Ring reports %d shards up after a minute, want %d", c.Len(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
