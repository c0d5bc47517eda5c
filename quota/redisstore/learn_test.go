package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// TestLearnedKey: a sync that states a learning limit's limit records it
// in the limit's learned key (KeyLearned, ParseKey knows it) with a TTL of
// quota.LearnTTL; Inspect and decisions run the limit at it, and a
// decision costs one HGET more than one of a limit that does not learn,
// and nothing else.
func TestLearnedKey(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	st := newStore(t, client, quotatest.NewClock(start)) // a stepped clock: the figures below are exact
	ctx := context.Background()
	l := gcra("core", 10, time.Second, 0)
	l.Learn = true
	req := stack("v", l)
	r := reserve(t, st, req, 1, 0)
	if err := r.Sync(ctx, []quota.Observed{{Limit: 30, LimitOnly: true}}); err != nil {
		t.Fatal(err)
	}
	k := st.learnedKey(st.Key("v", "core"))
	if tag, key, kind, ok := st.ParseKey(k); !ok || kind != KeyLearned || tag != "v" || key != "core" {
		t.Errorf("ParseKey(%q) = %q, %q, %v, %v; want v, core, learned", k, tag, key, kind, ok)
	}
	if got := client.HGet(ctx, k, "limit").Val(); got != "30" {
		t.Errorf("learned limit %q, want 30", got)
	}
	if ttl := client.PTTL(ctx, k).Val() - time.Duration(testSlack)*time.Millisecond; ttl <= quota.LearnTTL-time.Minute || ttl > quota.LearnTTL {
		t.Errorf("learned key TTL %v beyond the test's slack, want about %v", ttl, quota.LearnTTL)
	}

	// A peek (Inspect) runs the limit as decisions do: the reservation
	// made at 10/s occupies 100ms, 3 events at 30/s.
	if snap, err := st.Inspect(ctx, &req); err != nil || snap.Items[0].Rate != 30 || snap.Items[0].Remaining != 27 {
		t.Errorf("Inspect: (%+v, %v), want rate 30 and 27 remaining", snap, err)
	}

	stats := srv.Client(t)
	before := commandCalls(t, stats)
	const n = 5
	for i := 0; i < n; i++ {
		if res := reserve(t, st, req, 1, 0); res.Limits[0].Rate != 30 {
			t.Fatalf("decision %d ran at %d, want the learned 30", i, res.Limits[0].Rate)
		}
	}
	ran := callsSince(before, commandCalls(t, stats))
	want := map[string]int64{"evalsha": n, "get": n, "hget": n, "set": n}
	checkCalls(t, fmt.Sprintf("%d decisions of a learning limit", n), ran, want)
}

// TestLearnCoalesced: decisions of one call with learning limits, among
// ones without, each read their own learned key: the keys of a request
// (items, pauses, learned) do not shift the next request's.
func TestLearnCoalesced(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	st := newStore(t, client, quotatest.NewClock(start))
	ctx := context.Background()
	a, b := gcra("a", 10, time.Second, 0), gcra("b", 10, time.Second, 0)
	a.Learn, b.Learn = true, true
	plain := gcra("plain", 10, time.Second, 0)
	ra := stack("v", plain, a)
	ra.Pauses = []string{"p"}
	rb := stack("v", b)
	if err := reserve(t, st, ra, 1, 0).Sync(ctx, []quota.Observed{{Item: 1, Limit: 20, LimitOnly: true}}); err != nil {
		t.Fatal(err)
	}
	if err := reserve(t, st, rb, 1, 0).Sync(ctx, []quota.Observed{{Limit: 40, LimitOnly: true}}); err != nil {
		t.Fatal(err)
	}
	// The decisions of one call, with the keys and arguments Reserve
	// gives them: a request's learned keys come after its pause keys.
	const T, dvt, P = 100_000, 1_000_000, 1_000_000
	learn := []any{"l", 1, T, dvt, P, 10, 10, P}
	pa := &pending{ctx: ctx, tag: "v",
		keys: []string{st.Key("v", "plain"), st.Key("v", "a"), st.PauseKey("v", "p"), st.learnedKey(st.Key("v", "a"))},
		args: append([]any{nil, nil, nil, 17, 0, 2, 1, 1, "g", 1, T, dvt}, learn...)}
	pb := &pending{ctx: ctx, tag: "v", keys: []string{st.Key("v", "b"), st.learnedKey(st.Key("v", "b"))},
		args: append([]any{nil, nil, nil, 13, 0, 1, 0, 1}, learn...)}
	v, err := st.call(ctx, []*pending{pa, pb, pa})
	if err != nil {
		t.Fatal(err)
	}
	vals := v.([]any)
	for i, want := range []struct {
		n, nl int
		rate  int64
	}{{2, 1, 20}, {1, 1, 40}, {2, 1, 20}} {
		d, err := parseReserve(vals[i], want.n, want.nl, 0)
		if err != nil {
			t.Fatalf("decision %d: %v", i, err)
		}
		if !d.allowed || d.learned[0] != want.rate {
			t.Errorf("decision %d: allowed %v at rate %v, want admitted at %d", i, d.allowed, d.learned, want.rate)
		}
	}
}

// TestLearnRestatesExactly: after.lua restates a tat as quota's restate
// does where the figures are largest: a day-long limit that learned 1
// event per µs (interval 1 µs, a day's tolerance) and falls back to 10 a
// day (interval 2.4 h). Events booked ahead times the new interval would
// pass 2^53 (2^63 in Go): the tat stops at the new rate's reach, and a
// few booked events become exactly that many new intervals.
func TestLearnRestatesExactly(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	ctx := context.Background()
	l := gcra("core", 10, 24*time.Hour, 10)
	l.Learn, l.Ceiling = true, (24 * time.Hour).Microseconds()
	now := start.UnixMicro()
	for _, tc := range []struct {
		name        string
		booked      int64 // µs ahead of now, at 1 µs an event
		wantAhead   int64
		description string
	}{
		{"capped", 50_000_000_000, l.DebtReach(), "a day and ten new intervals"},
		{"three", 3, 3 * l.Interval(), "three new intervals"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t, client, quotatest.NewClock(start))
			req := stack("v", l)
			if err := reserve(t, st, req, 1, 0).Sync(ctx, []quota.Observed{{Limit: 1 << 60, LimitOnly: true}}); err != nil {
				t.Fatal(err)
			}
			r := reserve(t, st, req, 1, 0)
			if r.Limits[0].Rate != l.Period.Microseconds() {
				t.Fatalf("ran at %d, want the learned 1 per µs", r.Limits[0].Rate)
			}
			key := st.Key("v", "core")
			if err := client.Set(ctx, key, now+tc.booked, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			if err := r.Sync(ctx, []quota.Observed{{Limit: 10, LimitOnly: true}}); err != nil {
				t.Fatal(err)
			}
			got, err := client.Get(ctx, key).Int64()
			if err != nil {
				t.Fatal(err)
			}
			if got-now != tc.wantAhead {
				t.Errorf("%d µs booked at 1 per µs, then 10 a day stated: tat now+%d, want now+%d (%s)", tc.booked, got-now, tc.wantAhead, tc.description)
			}
		})
	}
}
