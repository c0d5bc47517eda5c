package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
)

// dailyStack is one spent-able daily quota, as a per-tenant limit is.
func dailyStack() quota.Request {
	return stack("p:acme", window("daily", 5, quota.Day, nil))
}

// TestEvictionPolicy: a Redis that may evict quota keys fails every
// decision with a clear error, before the script runs; one that cannot
// tell (CONFIG renamed away, or denied by an ACL) is used as it is; and
// AllowEviction opts out.
func TestEvictionPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("allkeys-lru", func(t *testing.T) {
		t.Parallel()
		srv := redistest.StartWith(t, "--maxmemory-policy", "allkeys-lru")
		client := srv.Client(t)
		st := newStore(t, client, nil)
		req := dailyStack()
		for i := 0; i < 2; i++ { // every decision, not only the first
			_, err := st.Reserve(ctx, &req)
			if !errors.Is(err, ErrEvictionPolicy) || !errors.Is(err, quota.ErrStore) {
				t.Fatalf("Reserve %d = %v, want an error wrapping ErrEvictionPolicy and quota.ErrStore", i, err)
			}
			for _, want := range []string{"allkeys-lru", srv.Addr, "CONFIG SET maxmemory-policy noeviction", "AllowEviction"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
		}
		if keys := snapshot(t, client, st.prefix); len(keys) != 0 {
			t.Errorf("a refused store wrote %v", keys)
		}
		// Fixed at run time: the next decision checks again and passes.
		if err := client.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
			t.Fatal(err)
		}
		if res := reserve(t, st, dailyStack(), 1, 0); !res.Allowed {
			t.Errorf("after CONFIG SET noeviction: %+v, want allowed", res.Result)
		}
	})

	t.Run("AllowEviction", func(t *testing.T) {
		t.Parallel()
		srv := redistest.StartWith(t, "--maxmemory-policy", "volatile-lru")
		client := srv.Client(t)
		st, err := New(client, Options{Prefix: uniquePrefix(), Timeout: 5 * time.Second, AllowEviction: true})
		if err != nil {
			t.Fatal(err)
		}
		stats := srv.Client(t)
		before := commandCalls(t, stats)
		if res := reserve(t, st, dailyStack(), 1, 0); !res.Allowed {
			t.Errorf("AllowEviction: %+v, want allowed", res.Result)
		}
		if n := callsSince(before, commandCalls(t, stats))["config|get"]; n != 0 {
			t.Errorf("AllowEviction ran CONFIG GET %d times, want 0", n)
		}
	})

	t.Run("CONFIG renamed away", func(t *testing.T) {
		t.Parallel()
		srv := redistest.StartWith(t, "--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", "")
		st := newStore(t, srv.Client(t), nil)
		if res := reserve(t, st, dailyStack(), 1, 0); !res.Allowed {
			t.Errorf("CONFIG disabled: %+v, want allowed", res.Result)
		}
	})

	t.Run("CONFIG denied by ACL", func(t *testing.T) {
		t.Parallel()
		srv := redistest.StartWith(t, "--maxmemory-policy", "allkeys-lru")
		admin := srv.Client(t)
		if err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">secret", "~*", "&*", "+@all", "-config").Err(); err != nil {
			t.Fatal(err)
		}
		client := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "app", Password: "secret"})
		t.Cleanup(func() { _ = client.Close() })
		if err := client.ConfigGet(ctx, "maxmemory-policy").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Fatalf("CONFIG GET as app: %v, want NOPERM", err)
		}
		st := newStore(t, client, nil)
		if res := reserve(t, st, dailyStack(), 1, 0); !res.Allowed {
			t.Errorf("CONFIG denied: %+v, want allowed", res.Result)
		}
	})
}

// TestEvictionPolicyCheckedOnce: with noeviction the check costs one
// CONFIG GET for the store's life, however many decisions start together.
func TestEvictionPolicyCheckedOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	st := newStore(t, srv.Client(t), nil)
	stats := srv.Client(t)
	before := commandCalls(t, stats)
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := stack("p", gcra("peak", 1000, time.Second, 0))
			req.Cost = 1
			if _, err := st.Reserve(context.Background(), &req); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	reserve(t, st, stack("p", gcra("peak", 1000, time.Second, 0)), 1, 0)
	ran := callsSince(before, commandCalls(t, stats))
	if ran["config|get"] != 1 {
		t.Errorf("%d decisions ran CONFIG GET %d times, want once", n+1, ran["config|get"])
	}
}

// TestEvictionPolicyRedisDownAtStart: New needs no Redis; the check waits
// for the first decision that reaches it.
func TestEvictionPolicyRedisDownAtStart(t *testing.T) {
	t.Parallel()
	srv := redistest.StartWith(t, "--maxmemory-policy", "allkeys-lfu")
	client := srv.Client(t)
	srv.Stop(t)
	st, err := New(client, Options{Prefix: uniquePrefix(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("New with Redis down: %v", err)
	}
	req := dailyStack()
	_, err = st.Reserve(context.Background(), &req)
	if !errors.Is(err, quota.ErrStore) || errors.Is(err, ErrEvictionPolicy) {
		t.Fatalf("Reserve with Redis down = %v, want a store error that is not ErrEvictionPolicy", err)
	}
	srv.Restart(t)
	for i := 0; i < 3; i++ { // the pool may hand out a dead connection first
		if _, err = st.Reserve(context.Background(), &req); errors.Is(err, ErrEvictionPolicy) {
			break
		}
	}
	if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), "allkeys-lfu") {
		t.Errorf("Reserve once Redis is up = %v, want ErrEvictionPolicy naming allkeys-lfu", err)
	}
}

// TestEvictionPolicyCluster: every master is checked; one evicting master
// is enough to refuse, and the error names it.
func TestEvictionPolicyCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	bad := cl.Addrs[2]
	node := redis.NewClient(&redis.Options{Addr: bad})
	t.Cleanup(func() { _ = node.Close() })
	if err := node.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	client := cl.Client(t)
	st := newStore(t, client, nil)
	req := dailyStack()
	_, err := st.Reserve(ctx, &req)
	if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("Reserve = %v, want ErrEvictionPolicy naming %s", err, bad)
	}
	if err := node.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if res := reserve(t, st, dailyStack(), 1, 0); !res.Allowed {
		t.Errorf("every master noeviction: %+v, want allowed", res.Result)
	}
}
