package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// tenantsOnEveryMaster returns tenant tags of provider, one whose slot
// lies in each of the three slot ranges of redistest.StartCluster's
// masters.
func tenantsOnEveryMaster(provider string) []string {
	var tags []string
	for i := 0; len(tags) < 3; i++ {
		tag := fmt.Sprintf("%s:t%d", provider, i)
		if slot(tag)*3/slots == len(tags) {
			tags = append(tags, tag)
		}
	}
	return tags
}

// TestOverPauseOnCluster: on a Redis Cluster a request's Over pause, in
// another tag (another slot), holds it through the pause's copy in the
// request's own slot, which PauseOver writes in every slot and ResumeOver
// deletes: tenants on each of the three masters are held, then released.
// A pause set by Pause alone has no copies and holds the request where it
// is, its Over pause out of reach.
func TestOverPauseOnCluster(t *testing.T) {
	t.Parallel()
	client := redistest.StartCluster(t).Client(t)
	// 16,384 writes in one call: a timeout a loaded machine cannot exceed.
	st, err := New(client, Options{Prefix: uniquePrefix(), Clock: quotatest.NewClock(start), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tenant := func(tag string) quota.Request {
		req := stack(tag, gcra("peak", 10, time.Second, 0))
		req.Pauses = []string{"pause:" + tag}
		req.Over = quota.PauseKey{Tag: "provider", Key: "pause:all"}
		return req
	}
	tags := tenantsOnEveryMaster("provider")
	if err := st.Pause(ctx, "provider", "pause:all", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, tag := range tags {
		if res := reserve(t, st, tenant(tag), 1, 0); !res.Allowed {
			t.Errorf("%s, its Over pause set by Pause alone: %+v, want admitted (no copy in its slot)", tag, res.Result)
		}
	}
	began := time.Now()
	if err := st.PauseOver(ctx, "provider", "pause:all", time.Hour); err != nil {
		t.Fatal(err)
	}
	t.Logf("PauseOver wrote %d copies in %v", slots, time.Since(began))
	if n := countKeys(t, client, st.Prefix()+"{*}:!copy:*"); n != slots {
		t.Errorf("%d copies after PauseOver, want %d", n, slots)
	}
	if k := st.copyKeys("provider", "pause:all")[0]; !strings.HasPrefix(k, st.Prefix()+"{") {
		t.Errorf("copy key %q", k)
	} else if tag, key, kind, ok := st.ParseKey(k); ok {
		t.Errorf("ParseKey(%q) = %q, %q, %v; want no key of a tag (status passes over copies)", k, tag, key, kind)
	}
	want := start.Add(time.Hour)
	for _, tag := range tags {
		req := tenant(tag)
		if res := reserve(t, st, req, 1, 0); res.Allowed || res.Decider != quota.PausedDecider || res.RetryAfter != time.Hour {
			t.Errorf("%s (slot %d) during PauseOver: %+v, want held for an hour", tag, slot(tag), res.Result)
		}
		snap, err := st.Inspect(ctx, &req)
		if err != nil || len(snap.Pauses) != 2 || !snap.Pauses[0].IsZero() || !snap.Pauses[1].Equal(want) {
			t.Errorf("Inspect %s: %v, %v; want its own pause not in force, then the Over pause's copy until %v", tag, snap.Pauses, err, want)
		}
	}
	if err := st.ResumeOver(ctx, "provider", "pause:all"); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, client, st.Prefix()+"*"); n != 3 {
		t.Errorf("%d keys after ResumeOver, want the 3 tenants' own (the pause and its copies deleted)", n)
	}
	for _, tag := range tags {
		if res := reserve(t, st, tenant(tag), 1, 0); !res.Allowed {
			t.Errorf("%s after ResumeOver: %+v, want admitted", tag, res.Result)
		}
	}
}

// countKeys counts the keys of a cluster that match pattern, on every
// master.
func countKeys(t *testing.T, c *redis.ClusterClient, pattern string) int {
	t.Helper()
	var mu sync.Mutex
	n := 0
	err := c.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		keys, err := m.Keys(ctx, pattern).Result()
		mu.Lock()
		defer mu.Unlock()
		n += len(keys)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOverPauseCommandsOnCluster: on a Redis Cluster a tenant's decision
// that reads its Over pause's copy makes the same commands as one without
// an Over pause (one EVALSHA, its one MGET of the pauses), with one more
// key, in the request's own slot.
func TestOverPauseCommandsOnCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t)
	client := cl.Client(t)
	st := newStore(t, client, nil)
	tag := tenantsOnEveryMaster("provider")[1]
	plain := stack(tag, gcra("peak", 1000, time.Second, 0), gcra("minute", 10000, time.Minute, 0))
	plain.Pauses = []string{"pause:" + tag}
	over := plain
	over.Over = quota.PauseKey{Tag: "provider", Key: "pause:all"}
	if pk, ok := st.keys(&over), st.keys(&plain); len(pk) != len(ok)+1 {
		t.Fatalf("keys with Over %q, without %q: want one more", pk, ok)
	} else if k := pk[len(pk)-1]; slot(hashTag(k)) != slot(tag) {
		t.Errorf("the Over pause's copy %q is in slot %d, the request's tag in %d", k, slot(hashTag(k)), slot(tag))
	}
	nodes := make([]*redis.Client, len(cl.Addrs))
	for i, addr := range cl.Addrs {
		nodes[i] = redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = nodes[i].Close() })
	}
	calls := func(req quota.Request) map[string]int64 {
		reserve(t, st, req, 1, 0) // the first: loads the script
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
				// The cluster client's own reads of the slot map and
				// the command table come when they come.
				if !strings.HasPrefix(cmd, "cluster") && !strings.HasPrefix(cmd, "command") {
					sum[cmd] += c
				}
			}
		}
		return sum
	}
	want := calls(plain)
	checkCalls(t, "10 decisions reading an Over pause's copy", calls(over), want)
	if want["evalsha"] != 10 || want["mget"] != 10 {
		t.Errorf("10 decisions ran %v, want one EVALSHA and one MGET each", want)
	}
}

// hashTag returns the hash tag of a Redis key: what its first braces hold.
func hashTag(k string) string {
	_, rest, _ := strings.Cut(k, "{")
	tag, _, _ := strings.Cut(rest, "}")
	return tag
}

// TestInspectOverPause: on one server Inspect reads a request's Over pause
// after its own, as Reserve does.
func TestInspectOverPause(t *testing.T) {
	t.Parallel()
	st := newStore(t, redistest.Start(t).Client(t), quotatest.NewClock(start))
	ctx := context.Background()
	if err := st.Pause(ctx, "provider", "pause:all", time.Minute); err != nil {
		t.Fatal(err)
	}
	req := stack("provider:acme", gcra("peak", 10, time.Second, 0))
	req.Pauses = []string{"pause:acme"}
	req.Over = quota.PauseKey{Tag: "provider", Key: "pause:all"}
	snap, err := st.Inspect(ctx, &req)
	want := start.Add(time.Minute)
	if err != nil || len(snap.Pauses) != 2 || !snap.Pauses[0].IsZero() || !snap.Pauses[1].Equal(want) || !snap.PausedUntil.Equal(want) {
		t.Errorf("Inspect: pauses %v, paused until %v, %v; want none of its own, then the Over pause until %v", snap.Pauses, snap.PausedUntil, err, want)
	}
}
