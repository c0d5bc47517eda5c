package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// gcraPending is a decision of cost 1 on one GCRA key, as Reserve builds
// it, for a call of several.
func gcraPending(key string, T, dvt int64) *pending {
	return &pending{ctx: context.Background(), tag: "v", keys: []string{key},
		args: []any{nil, nil, nil, 9, 0, 1, 0, 0, "g", 1, T, dvt}}
}

// TestOneCallDecidesInOrder: the decisions of one call are decided one
// after the other, each on the state the ones before it left (the second
// one's prev is the first one's mark), each on its own: the third, past
// the burst, is denied without undoing the first two, and one that fails
// (WRONGTYPE) fails alone.
func TestOneCallDecidesInOrder(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	key := st.prefix + "{v}:peak"
	wrong := st.prefix + "{v}:hash"
	if err := client.HSet(ctx, wrong, "a", 1).Err(); err != nil {
		t.Fatal(err)
	}
	const T, dvt = 1_000_000, 2_000_000 // 1 per second, burst 2
	batch := []*pending{gcraPending(key, T, dvt), gcraPending(wrong, T, dvt), gcraPending(key, T, dvt), gcraPending(key, T, dvt)}
	v, err := st.call(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	vals := v.([]any)
	var d [4]decision
	var errs [4]error
	for i, x := range vals {
		d[i], errs[i] = parseReserve(x, 1, 0)
		if (errs[i] != nil) != (i == 1) {
			t.Fatalf("decision %d: %v", i, errs[i])
		}
	}
	if !errors.Is(classify(errs[1]), quota.ErrState) || !strings.Contains(errs[1].Error(), "WRONGTYPE") {
		t.Errorf("the WRONGTYPE decision: %v, want WRONGTYPE, ErrState", errs[1])
	}
	now := clock.Now().UnixMicro()
	if !d[0].allowed || !d[2].allowed || d[3].allowed {
		t.Fatalf("allowed %v %v %v, want true true false", d[0].allowed, d[2].allowed, d[3].allowed)
	}
	if d[0].marks[0] != now+T || d[2].prevs[0] != d[0].marks[0] || d[2].marks[0] != now+2*T {
		t.Errorf("marks %d, %d (prev %d), want %d, %d (prev %d)", d[0].marks[0], d[2].marks[0], d[2].prevs[0], now+T, now+2*T, now+T)
	}
	if got, _ := client.Get(ctx, key).Int64(); got != now+2*T {
		t.Errorf("stored tat %d, want %d", got, now+2*T)
	}
}

// TestConcurrentDecisionsCoalesced: decisions of many goroutines on one
// stack, however they are coalesced, admit exactly the burst, with no
// error, and the window counts each admitted one once.
func TestConcurrentDecisionsCoalesced(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	st := newStore(t, client, quotatest.NewClock(start)) // frozen: nothing drains
	req := stack("v", gcra("hourly", 50, time.Hour, 0), window("daily", 1000, quota.Day, time.UTC))
	const goroutines, each = 8, 25
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r := req
				res, err := st.Reserve(context.Background(), &r)
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
	if admitted.Load() != 50 {
		t.Errorf("%d admitted, want the burst, 50", admitted.Load())
	}
	vals, err := client.HVals(context.Background(), st.prefix+"{v}:daily").Result()
	if err != nil || len(vals) != 1 || vals[0] != "50" {
		t.Errorf("window counts %v (%v), want [50]", vals, err)
	}
}
