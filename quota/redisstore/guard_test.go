package redisstore

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
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
