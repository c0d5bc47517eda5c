package redisstore

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
)

// liveWorkers counts the goroutines of this test binary that are workers.
func liveWorkers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "redisstore.(*workers).work(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestWorkersStopWhenIdle: a store's calls run on workers, which
// serve calls while they come and all exit once idle. Not parallel: it
// counts every worker of the binary, and workers of earlier tests stop
// within the same wait.
func TestWorkersStopWhenIdle(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr})
	t.Cleanup(func() { _ = client.Close() })
	st := newStore(t, client, nil)
	req := stack("v", gcra("peak", 1000, time.Second, 0))
	reserve(t, st, req, 1, 0)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req
			if _, err := st.Reserve(context.Background(), &r); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := liveWorkers(); n == 0 {
		t.Fatal("no worker after guarded calls")
	}
	deadline := time.Now().Add(3*workerIdle + 2*time.Second)
	for liveWorkers() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := liveWorkers(); n > 0 {
		t.Errorf("%d workers still live %v after the last call; they exit after %v idle", n, 3*workerIdle+2*time.Second, workerIdle)
	}
}

// deadlineHook records how far the deadline of every script call the
// client makes is: a direct call carries the store's timeout, a call on a
// worker the timeout and callTimeout more. That it sees the calls at all
// is what keeps the caller's own hooks (tracing, metrics) working.
type deadlineHook struct {
	mu   sync.Mutex
	left []time.Duration
}

func (h *deadlineHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *deadlineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *deadlineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			left := time.Duration(-1) // no deadline
			if d, ok := ctx.Deadline(); ok {
				left = time.Until(d)
			}
			h.mu.Lock()
			h.left = append(h.left, left)
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// calls returns the calls seen since the last, each true when it ran
// directly (its deadline no further than timeout).
func (h *deadlineHook) calls(timeout time.Duration) []bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	direct := make([]bool, len(h.left))
	for i, l := range h.left {
		direct[i] = l >= 0 && l <= timeout
	}
	h.left = nil
	return direct
}

// TestDirectNearRedis: with a client that cuts a call at the context's
// deadline and a Redis whose round trip is far below the timeout, a
// decision runs on the caller's goroutine from the second call on (the
// first, with no round trip measured, goes to a worker), and the client's
// hooks see it. A default client, and one with ContextTimeoutEnabled but
// no socket deadlines, always go to the workers.
func TestDirectNearRedis(t *testing.T) {
	t.Parallel()
	addr := redistest.Start(t).Addr
	const timeout = 5 * time.Second // a local round trip is far below timeout/12
	for _, tc := range []struct {
		name   string
		opts   redis.Options
		direct bool
	}{
		{"ContextTimeoutEnabled", redis.Options{ContextTimeoutEnabled: true}, true},
		{"default client", redis.Options{}, false},
		{"ContextTimeoutEnabled, no socket deadlines", redis.Options{ContextTimeoutEnabled: true, ReadTimeout: -2, WriteTimeout: -2}, false},
	} {
		tc.opts.Addr = addr
		client := redis.NewClient(&tc.opts)
		t.Cleanup(func() { _ = client.Close() })
		hook := &deadlineHook{}
		client.AddHook(hook)
		st, err := New(client, Options{Prefix: uniquePrefix(), Timeout: timeout, AllowEviction: true})
		if err != nil {
			t.Fatal(err)
		}
		if st.honours != tc.direct {
			t.Errorf("%s: honours deadlines %v, want %v", tc.name, st.honours, tc.direct)
		}
		req := stack("v", gcra("peak", 1000, time.Second, 0))
		for range 6 {
			reserve(t, st, req, 1, 0)
		}
		// The first decision may make two calls (EVALSHA, then EVAL
		// when the server did not have the script); the others one.
		calls := hook.calls(timeout)
		if len(calls) < 6 {
			t.Fatalf("%s: the client's hook saw %d script calls of 6 decisions", tc.name, len(calls))
		}
		if calls[0] {
			t.Errorf("%s: the first call ran directly, before any round trip was measured", tc.name)
		}
		for i, direct := range calls[len(calls)-5:] {
			if direct != tc.direct {
				t.Errorf("%s: decision %d direct %v, want %v", tc.name, i+2, direct, tc.direct)
			}
		}
	}
}

// TestDirectNotWhenFar: through a delaying proxy (a round trip of 100 ms
// or more, timeout 1 s: more than a twelfth of it), every call of a
// client that honours deadlines goes to the workers, and every decision
// succeeds: a far Redis keeps the call that outlives its caller's timeout,
// and the connection it would have dropped.
func TestDirectNotWhenFar(t *testing.T) {
	t.Parallel()
	const delay, timeout = 50 * time.Millisecond, time.Second
	st, client := farStore(t, delay, timeout, redis.Options{ContextTimeoutEnabled: true})
	// A connection and the script before the decisions, so that each is
	// one round trip, far within the timeout on a loaded machine.
	ctx := context.Background()
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := loneScript.Load(ctx, client).Err(); err != nil {
		t.Fatal(err)
	}
	hook := &deadlineHook{}
	client.AddHook(hook)
	req := stack("far", gcra("peak", 1_000_000, time.Second, 0))
	for i := range 4 {
		if _, err := st.Reserve(context.Background(), &req); err != nil {
			t.Errorf("decision %d through a %v round trip, timeout %v: %v", i+1, 2*delay, timeout, err)
		}
	}
	for i, direct := range hook.calls(timeout) {
		if direct {
			t.Errorf("call %d ran directly through a %v round trip with timeout %v", i+1, 2*delay, timeout)
		}
	}
}

// TestDirectHungRedis: a Redis that hangs after decisions went directly
// holds the next no longer than the timeout, and its cut turns the direct
// path off; once Redis answers again, calls go back to it.
func TestDirectHungRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	pid := redisPID(t, srv.Client(t))
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, Protocol: 2, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	hook := &deadlineHook{}
	client.AddHook(hook)
	const timeout = time.Second // direct while a local round trip is under 83 ms
	st, err := New(client, Options{Prefix: uniquePrefix(), Timeout: timeout, AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	req := stack("v", gcra("peak", 1_000_000, time.Second, 0))
	for range 3 {
		reserve(t, st, req, 1, 0)
	}
	if calls := hook.calls(timeout); !calls[len(calls)-1] {
		t.Fatalf("no direct call on a local Redis: %v", calls)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP redis-server %d: %v", pid, err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)
	begin := time.Now()
	_, err = st.Reserve(context.Background(), &req)
	elapsed := time.Since(begin)
	if !errors.Is(err, quota.ErrStore) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a direct call to a hung Redis: %v, want quota.ErrStore and context.DeadlineExceeded", err)
	}
	if elapsed > 2500*time.Millisecond { // the slack is for a loaded machine
		t.Errorf("a direct call to a hung Redis took %v, timeout %v", elapsed, timeout)
	}
	if calls := hook.calls(timeout); len(calls) != 1 || !calls[0] {
		t.Errorf("the call to the hung Redis, direct: %v, want one direct call", calls)
	}
	if st.direct(time.Now().Add(timeout)) {
		t.Error("the direct path is still on after a call the timeout cut")
	}
	thaw()
	var calls []bool
	for range 100 {
		reserve(t, st, req, 1, 0)
		calls = append(calls, hook.calls(timeout)...)
		if calls[len(calls)-1] {
			break
		}
	}
	if calls[0] || !calls[len(calls)-1] {
		t.Errorf("calls after Redis came back, direct: %v; want the first on a worker, then back to direct", calls)
	}
}

// TestDirectNeedsTimeLeft: a call goes directly only when its time left
// holds directMargin budgets, whatever the store's timeout; a cut raises
// the round trip to what the cut call ran, never lowers it.
func TestDirectNeedsTimeLeft(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	st, err := New(client, Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if st.direct(now.Add(time.Second)) {
		t.Error("direct before any round trip was measured")
	}
	st.roundTrip.Store(int64(10 * time.Millisecond)) // a budget of 15 ms
	if st.direct(now.Add(100 * time.Millisecond)) {
		t.Error("direct with 100 ms left, under 8 budgets of 15 ms")
	}
	if !st.direct(now.Add(time.Second)) {
		t.Error("not direct with 1 s left, 8 budgets of 15 ms")
	}
	st.cut(5 * time.Millisecond)
	if got := time.Duration(st.roundTrip.Load()); got != 10*time.Millisecond {
		t.Errorf("a cut after 5 ms set the round trip to %v, want 10ms kept", got)
	}
	st.cut(300 * time.Millisecond)
	if st.direct(now.Add(2 * time.Second)) {
		t.Error("direct after a cut at 300 ms, with 2 s left")
	}
	for _, c := range []redis.UniversalClient{
		redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true}),
		redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: true}),
	} {
		t.Cleanup(func() { _ = c.Close() })
		if !honoursDeadlines(c) {
			t.Errorf("%T with ContextTimeoutEnabled does not honour deadlines", c)
		}
	}
	for _, c := range []redis.UniversalClient{
		redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true, ReadTimeout: -2}),
		redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: true, WriteTimeout: -2}),
		redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}}),
	} {
		t.Cleanup(func() { _ = c.Close() })
		if honoursDeadlines(c) {
			t.Errorf("%T honours deadlines with no socket deadlines or without ContextTimeoutEnabled", c)
		}
	}
}
