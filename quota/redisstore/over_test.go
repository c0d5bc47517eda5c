package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// TestOverPauseOnCluster: on a Redis Cluster a request's Over pause, in
// another tag (another slot), is left out rather than failing the decision
// with CROSSSLOT: the request is held by its own pauses alone, and Inspect
// reads them alone too. On one server (the conformance suite) it holds.
func TestOverPauseOnCluster(t *testing.T) {
	t.Parallel()
	client := redistest.StartCluster(t).Client(t)
	st := newStore(t, client, quotatest.NewClock(start))
	ctx := context.Background()
	if err := st.Pause(ctx, "provider", "pause:all", time.Minute); err != nil {
		t.Fatal(err)
	}
	req := stack("provider:acme", gcra("peak", 10, time.Second, 0))
	req.Pauses = []string{"pause:acme"}
	req.Over = quota.PauseKey{Tag: "provider", Key: "pause:all"}
	if res := reserve(t, st, req, 1, 0); !res.Allowed {
		t.Errorf("a tenant's request on a cluster: %+v, want admitted (its Over pause is left out)", res.Result)
	}
	if err := st.Pause(ctx, "provider:acme", "pause:acme", time.Minute); err != nil {
		t.Fatal(err)
	}
	if res := reserve(t, st, req, 1, 0); res.Allowed || res.Decider != quota.PausedDecider {
		t.Errorf("a tenant's request with its own pause: %+v, want held by it", res.Result)
	}
	snap, err := st.Inspect(ctx, &req)
	if err != nil || len(snap.Pauses) != 1 || snap.Pauses[0].IsZero() {
		t.Errorf("Inspect: %+v, %v; want its own pause alone, in force", snap.Pauses, err)
	}
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
