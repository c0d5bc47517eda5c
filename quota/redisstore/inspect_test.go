package redisstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

var inspectPrefixes atomic.Int64

// inspectStore returns a Store with its own prefix on client.
func inspectStore(t *testing.T, client redis.UniversalClient, clock quota.Clock) *Store {
	t.Helper()
	st, err := New(client, Options{Prefix: fmt.Sprintf("in%d:", inspectPrefixes.Add(1)), Clock: clock, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func mustReserve(t *testing.T, st *Store, req quota.Request, cost int64, maxWait time.Duration) *quota.Reservation {
	t.Helper()
	req.Cost, req.MaxWait = cost, maxWait
	res, err := st.Reserve(context.Background(), &req)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	return res
}

func mustInspect(t *testing.T, st *Store, req quota.Request) Snapshot {
	t.Helper()
	snap, err := st.Inspect(context.Background(), &req)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	return snap
}

// TestInspectMatchesReserve steps a clock through reservations and checks
// that Inspect, at the same instant, reports what a decision reports: a
// denied request's Status (it charges nothing) equals Inspect's.
func TestInspectMatchesReserve(t *testing.T) {
	srv := redistest.Start(t)
	clock := quotatest.NewClock(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC))
	st := inspectStore(t, srv.Client(t), clock)
	peak := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 10, Period: time.Second, Burst: 5}
	daily := &quota.Limit{Name: "daily", Kind: quota.Window, Rate: 7, Calendar: quota.Calendar{Unit: quota.Day}}
	roll := &quota.Limit{Name: "roll", Kind: quota.Rolling, Rate: 9, Period: 100 * time.Millisecond}
	req := quota.Request{Tag: "acme", Items: []quota.Item{
		{Limit: peak, Key: quota.KeyOf("peak", "")},
		{Limit: daily, Key: quota.KeyOf("daily", "")},
		{Limit: roll, Key: quota.KeyOf("roll", "")},
	}, Pauses: []string{"pause"}}

	snap := mustInspect(t, st, req)
	if !snap.Now.Equal(clock.Now()) {
		t.Errorf("Now = %v, want the store's clock %v", snap.Now, clock.Now())
	}
	for i, it := range snap.Items {
		if it.Exists || it.Used != 0 || it.Remaining != req.Items[i].Limit.Capacity() {
			t.Errorf("idle item %d: %+v, want full capacity and no key", i, it)
		}
	}
	steps := []struct {
		cost    int64
		advance time.Duration
	}{{1, 0}, {2, 10 * time.Millisecond}, {2, 0}, {1, 150 * time.Millisecond}, {1, 0}, {1, 0}}
	for n, step := range steps {
		clock.Advance(step.advance)
		mustReserve(t, st, req, step.cost, 0)
		// A denied probe of a cost above every capacity is refused by
		// Validate, so probe with the largest cost and a zero max wait
		// only when it is denied; otherwise compare with the formulas.
		snap := mustInspect(t, st, req)
		probe := mustReserve(t, st, req, 5, 0)
		if probe.Allowed {
			t.Fatalf("step %d: the probe was admitted, the test is wrong", n)
		}
		for i, it := range snap.Items {
			if it.Status != probe.Limits[i] {
				t.Errorf("step %d item %d: Inspect %+v, Reserve reports %+v", n, i, it.Status, probe.Limits[i])
			}
			if !it.Exists {
				t.Errorf("step %d item %d: key does not exist after a reservation", n, i)
			}
			if got, want := it.Key, st.Key("acme", req.Items[i].Key); got != want {
				t.Errorf("item %d key %q, want %q", i, got, want)
			}
		}
		if got := snap.Items[0].Used; got != peak.Capacity()-snap.Items[0].Remaining {
			t.Errorf("step %d: GCRA used %d, want capacity - remaining", n, got)
		}
	}
	snap = mustInspect(t, st, req)
	if got := snap.Items[1]; got.Used+got.Remaining != daily.Rate || got.Used == 0 {
		t.Errorf("daily after the steps: %+v, want used + remaining = %d", got, daily.Rate)
	}
	if got := snap.Items[2]; got.Used+got.Remaining != roll.Rate || got.Used == 0 || got.Ahead != 0 {
		t.Errorf("roll after the steps: %+v, want used + remaining = %d", got, roll.Rate)
	}
	_, end := daily.Calendar.Bounds(clock.Now())
	if got, want := snap.Items[1].ResetAfter, end.Sub(clock.Now()); got != want {
		t.Errorf("daily reset after %v, want %v (the end of the window)", got, want)
	}
}

// TestInspectAhead checks that a window reservation that waits into the
// next window is reported as Ahead, not Used.
func TestInspectAhead(t *testing.T) {
	srv := redistest.Start(t)
	clock := quotatest.NewClock(time.Date(2026, 3, 7, 23, 59, 0, 0, time.UTC))
	st := inspectStore(t, srv.Client(t), clock)
	daily := &quota.Limit{Name: "daily", Kind: quota.Window, Rate: 2, Calendar: quota.Calendar{Unit: quota.Day}}
	req := quota.Request{Tag: "w", Items: []quota.Item{{Limit: daily, Key: "daily"}}}
	for i := 0; i < 3; i++ {
		if res := mustReserve(t, st, req, 1, time.Hour); !res.Allowed {
			t.Fatalf("reservation %d denied", i)
		}
	}
	got := mustInspect(t, st, req).Items[0]
	if got.Used != 2 || got.Ahead != 1 || got.Remaining != 0 || got.ResetAfter != time.Minute {
		t.Errorf("state %+v, want used 2, ahead 1, remaining 0, reset after 1m", got)
	}
	clock.Advance(time.Minute)
	got = mustInspect(t, st, req).Items[0]
	if got.Used != 1 || got.Ahead != 0 || got.Remaining != 1 {
		t.Errorf("next day: %+v, want used 1, ahead 0, remaining 1", got)
	}
}

// TestInspectRollingAhead checks that a rolling reservation that waits
// into a later bucket is reported as Ahead.
func TestInspectRollingAhead(t *testing.T) {
	srv := redistest.Start(t)
	clock := quotatest.NewClock(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC))
	st := inspectStore(t, srv.Client(t), clock)
	roll := &quota.Limit{Name: "roll", Kind: quota.Rolling, Rate: 2, Period: time.Minute}
	req := quota.Request{Tag: "r", Items: []quota.Item{{Limit: roll, Key: "roll"}}}
	for i := 0; i < 3; i++ {
		if res := mustReserve(t, st, req, 1, 2*time.Minute); !res.Allowed {
			t.Fatalf("reservation %d denied", i)
		}
	}
	// The third waits for the first bucket to expire, at 60.6s.
	got := mustInspect(t, st, req).Items[0]
	want := ItemState{Status: quota.Status{Remaining: 0, ResetAfter: 2*time.Minute + 1200*time.Millisecond}, Used: 2, Ahead: 1, Exists: true, Key: got.Key}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("state %+v, want %+v", got, want)
	}
	clock.Advance(time.Minute + time.Second)
	got = mustInspect(t, st, req).Items[0]
	if got.Used != 1 || got.Ahead != 0 || got.Remaining != 1 {
		t.Errorf("a minute on: %+v, want used 1, ahead 0, remaining 1", got)
	}
}

// TestPauseResumeReset drives the levers on the server's own clock.
func TestPauseResumeReset(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	st := inspectStore(t, client, nil)
	ctx := context.Background()
	peak := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 2, Period: time.Minute}
	req := quota.Request{Tag: "p:t1", Items: []quota.Item{{Limit: peak, Key: "peak:t1"}}, Pauses: []string{"pause:t1"}}

	for i := 0; i < 2; i++ {
		if res := mustReserve(t, st, req, 1, 0); !res.Allowed {
			t.Fatalf("reservation %d denied", i)
		}
	}
	snap := mustInspect(t, st, req)
	if d := time.Since(snap.Now); d < -time.Minute || d > time.Minute {
		t.Errorf("Now %v is not the server's time", snap.Now)
	}
	if got := snap.Items[0]; got.Remaining != 0 || got.Used != 2 || got.ResetAfter <= 59*time.Second {
		t.Errorf("after two reservations: %+v, want used 2, remaining 0, reset after ~60s", got)
	}
	// Reset deletes the item's companion record of cancelled
	// reservations with it.
	cancelled := st.redisKey(KeyCancelled, req.Tag, "peak:t1")
	if err := client.Set(ctx, cancelled, "1", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := st.Reset(ctx, req.Tag, "peak:t1"); err != nil {
		t.Fatal(err)
	}
	if got := mustInspect(t, st, req).Items[0]; got.Exists || got.Remaining != 2 || got.Used != 0 {
		t.Errorf("after Reset: %+v, want idle", got)
	}
	if n := client.Exists(ctx, cancelled).Val(); n != 0 {
		t.Errorf("Reset left the cancelled key %s", cancelled)
	}

	if err := st.Pause(ctx, req.Tag, "pause:t1", time.Hour); err != nil {
		t.Fatal(err)
	}
	snap = mustInspect(t, st, req)
	if d := snap.PausedUntil.Sub(snap.Now); d <= 59*time.Minute || d > time.Hour {
		t.Errorf("paused for %v after Pause(1h)", d)
	}
	if len(snap.Pauses) != 1 || !snap.Pauses[0].Equal(snap.PausedUntil) {
		t.Errorf("Pauses %v, PausedUntil %v", snap.Pauses, snap.PausedUntil)
	}
	if res := mustReserve(t, st, req, 1, 0); res.Allowed || res.Decider != quota.PausedDecider {
		t.Errorf("reserve while paused: %+v, want denied by the pause", res.Result)
	}
	if err := st.Resume(ctx, req.Tag, "pause:t1"); err != nil {
		t.Fatal(err)
	}
	if snap := mustInspect(t, st, req); !snap.PausedUntil.IsZero() {
		t.Errorf("PausedUntil %v after Resume", snap.PausedUntil)
	}
	if res := mustReserve(t, st, req, 1, 0); !res.Allowed {
		t.Errorf("reserve after Resume: %+v, want admitted", res.Result)
	}
	// The keys the levers touch are the keys Reserve wrote.
	if n := client.Exists(ctx, st.Key(req.Tag, "peak:t1")).Val(); n != 1 {
		t.Errorf("Key(%q, peak:t1) does not name the key Reserve wrote", req.Tag)
	}
	if err := st.Pause(ctx, req.Tag, "pause:t1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := client.Exists(ctx, st.PauseKey(req.Tag, "pause:t1")).Val(); n != 1 {
		t.Errorf("PauseKey(%q, pause:t1) does not name the key Pause wrote", req.Tag)
	}
}

func TestInspectAllAndScript(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	st := inspectStore(t, client, nil)
	ctx := context.Background()
	// Slow enough that nothing drains while the test runs.
	peak := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 10, Period: time.Hour}
	var reqs []*quota.Request
	for i := 0; i < 5; i++ {
		req := &quota.Request{Tag: fmt.Sprintf("t%d", i), Items: []quota.Item{{Limit: peak, Key: "peak"}}}
		for j := 0; j <= i; j++ {
			mustReserve(t, st, *req, 1, 0)
		}
		reqs = append(reqs, req)
	}
	// A server without the script cached (SCRIPT FLUSH) gets it in full.
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	snaps, err := st.InspectAll(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range snaps {
		if got := s.Items[0].Used; got != int64(i+1) {
			t.Errorf("tag t%d: used %d, want %d", i, got, i+1)
		}
	}
	if snaps, err := st.InspectAll(ctx, nil); err != nil || len(snaps) != 0 {
		t.Errorf("InspectAll(nil) = %v, %v", snaps, err)
	}
	// A key of the wrong type is a malformed state, not a panic.
	if err := client.HSet(ctx, st.Key("bad", "peak"), "x", "1").Err(); err != nil {
		t.Fatal(err)
	}
	bad := quota.Request{Tag: "bad", Items: []quota.Item{{Limit: peak, Key: "peak"}}}
	if _, err := st.Inspect(ctx, &bad); !errors.Is(err, quota.ErrState) || errors.Is(err, quota.ErrStore) {
		t.Errorf("Inspect of a hash as a GCRA key: %v, want ErrState (this request's state), not ErrStore", err)
	}
}

func TestInspectRejects(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	st, err := New(client, Options{Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	peak := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 10, Period: time.Second}
	for _, req := range []*quota.Request{
		nil,
		{},
		{Tag: "t"},
		{Tag: "t", Items: []quota.Item{{Key: "x"}}},
		{Tag: "t", Items: []quota.Item{{Limit: peak}}},
		{Tag: "t", Pauses: []string{""}},
		{Tag: "t", Items: []quota.Item{{Limit: &quota.Limit{Name: "zero", Kind: quota.GCRA}, Key: "z"}}},
		// What Reserve refuses, Inspect refuses (one validation).
		{Tag: "t", Items: []quota.Item{{Limit: peak, Key: "peak", Cost: -1}}},
	} {
		if _, err := st.Inspect(ctx, req); !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("Inspect(%+v) = %v, want ErrInvalid", req, err)
		}
	}
	if err := st.Reset(ctx, "", "k"); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("Reset with no tag: %v", err)
	}
	if err := st.Reset(ctx, "t", ""); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("Reset of an empty key: %v", err)
	}
	if err := st.Resume(ctx, "t", ""); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("Resume of an empty key: %v", err)
	}
	// Redis down: a store error, quickly.
	begin := time.Now()
	req := &quota.Request{Tag: "t", Items: []quota.Item{{Limit: peak, Key: "peak"}}}
	if _, err := st.Inspect(ctx, req); !errors.Is(err, quota.ErrStore) {
		t.Errorf("Inspect with Redis down: %v, want ErrStore", err)
	}
	if err := st.Reset(ctx, "t", "peak"); !errors.Is(err, quota.ErrStore) {
		t.Errorf("Reset with Redis down: %v, want ErrStore", err)
	}
	if _, _, err := st.NewKeyScan("*", 0).Step(ctx, 1); !errors.Is(err, quota.ErrStore) {
		t.Errorf("scan with Redis down: %v, want ErrStore", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("three calls to a dead Redis took %v", d)
	}
}

func TestParseKey(t *testing.T) {
	st, err := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Options{Prefix: "app*:"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tag, key string }{
		{"stripe", "global"},
		{"stripe:acct_1", "global:acct_1"},
		{"x{y}", quota.KeyOf("a", "#0123")}, // a hashed scope part
	} {
		tag, key, kind, ok := st.ParseKey(st.Key(tc.tag, tc.key))
		if !ok || kind != KeyItem || tag != quota.SafeKey(tc.tag) || key != tc.key {
			t.Errorf("ParseKey(Key(%q, %q)) = %q, %q, %v, %v", tc.tag, tc.key, tag, key, kind, ok)
		}
		tag, key, kind, ok = st.ParseKey(st.PauseKey(tc.tag, "pause"))
		if !ok || kind != KeyPause || tag != quota.SafeKey(tc.tag) || key != "pause" {
			t.Errorf("ParseKey(PauseKey(%q)) = %q, %q, %v, %v", tc.tag, tag, key, kind, ok)
		}
	}
	for _, k := range []string{
		"", "app*:", "other:{a}:b", "app*:{a}", "app*:{}:b", "app*:{a}:", "app*:{a}:!pause:",
		"app*:{a}:!cancelled:", "app*:{a}:!other:b", "app*:{a{b}:c", "app*:{a}:b{c}", "app*:x{a}:b",
		"app*:{a}:!lane:b", "app*:{a}:!lane01:b", "app*:{a}:!lanex:b", "app*:{a}:!lane1:", "app*:{a}:!lane12345:b",
		"app*:{a}:!seen:", "app*:{a}:!pause:!lane0:b", "app*:{a}:!lane0:!lane1:b",
	} {
		if tag, key, kind, ok := st.ParseKey(k); ok {
			t.Errorf("ParseKey(%q) = %q, %q, %v, ok", k, tag, key, kind)
		}
	}
	if got, want := escapePattern(`a*b?[c]\`), `a\*b\?\[c\]\\`; got != want {
		t.Errorf("escapePattern = %q, want %q", got, want)
	}
}

// TestKeyRoundTrip: for every kind and any tag and key, hostile ones
// included, ParseKey gives back the tag and key the store placed (each
// as quota.SafeKey makes it) and the kind; and the keys of one tag never
// collide across kinds.
func TestKeyRoundTrip(t *testing.T) {
	t.Parallel()
	st, err := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Options{Prefix: "p:"})
	if err != nil {
		t.Fatal(err)
	}
	hash := "#" + strings.Repeat("0f", 16)
	values := map[string]bool{}
	for _, v := range append([]string{"pause", "!pause:x", "!cancelled:x", "a}:b", "}:", "{x}:y", hash, hash + ":" + hash,
		"stripe:acct_1", "core:acme", strings.Repeat("y", 1<<20)}, hostile[1:]...) {
		values[v] = true
	}
	for tag := range values {
		seen := map[string]bool{}
		for key := range values {
			var ks []string
			var kinds []KeyKind
			for kind := KeyItem; kind < KeyLane; kind++ {
				ks, kinds = append(ks, st.redisKey(kind, tag, key)), append(kinds, kind)
			}
			// Lanes and their records of cancelled slots.
			for _, lane := range []int{0, 1, 10, 9999} {
				lk := st.LaneKey(tag, key, lane)
				ks, kinds = append(ks, lk, st.cancelledKey(lk)), append(kinds, KeyLane, KeyCancelled)
			}
			for i, k := range ks {
				kind := kinds[i]
				if seen[k] {
					t.Fatalf("tag %.40q: %v key %.40q collides: %.80q", tag, kind, key, k)
				}
				seen[k] = true
				gt, gk, gkind, ok := st.ParseKey(k)
				if !ok || gt != quota.SafeKey(tag) || gk != quota.SafeKey(key) || gkind != kind {
					t.Fatalf("ParseKey(%.80q) = %.40q, %.40q, %v, %v; want %.40q, %.40q, %v",
						k, gt, gk, gkind, ok, quota.SafeKey(tag), quota.SafeKey(key), kind)
				}
			}
		}
	}
	if got, want := st.Key("stripe:acct_1", "global:acct_1"), "p:{stripe:acct_1}:global:acct_1"; got != want {
		t.Errorf("Key = %q, want %q: the layout changed, and running fleets would lose their state", got, want)
	}
	if got, want := st.PauseKey("stripe:acct_1", "pause:acct_1"), "p:{stripe:acct_1}:!pause:pause:acct_1"; got != want {
		t.Errorf("PauseKey = %q, want %q: the layout changed, and running fleets would lose their state", got, want)
	}
	if got, want := st.redisKey(KeyCancelled, "gh", "core"), "p:{gh}:!cancelled:core"; got != want {
		t.Errorf("cancelled key = %q, want %q", got, want)
	}
	if got, want := st.LaneKey("gh", "core", 1), "p:{gh}:!lane1:core"; got != want {
		t.Errorf("LaneKey = %q, want %q", got, want)
	}
	if got, want := st.seenKey(st.Key("gh", "core")), "p:{gh}:!seen:core"; got != want {
		t.Errorf("seen key = %q, want %q", got, want)
	}
	if got, want := st.cancelledKey(st.LaneKey("gh", "core", 0)), "p:{gh}:!cancelled:!lane0:core"; got != want {
		t.Errorf("a lane's cancelled key = %q, want %q", got, want)
	}
	if got, want := TagMatch("gh:acme"), `{gh:acme}:*`; got != want {
		t.Errorf("TagMatch = %q, want %q", got, want)
	}
}

// scanAll steps a scan one SCAN of one key at a time until it is complete.
func scanAll(t *testing.T, ks *KeyScan) []string {
	t.Helper()
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		keys, complete, err := ks.Step(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			seen[k] = true
		}
		if complete {
			out := make([]string, 0, len(seen))
			for k := range seen {
				out = append(out, k)
			}
			sort.Strings(out)
			return out
		}
	}
	t.Fatal("the scan never completed")
	return nil
}

func testKeyScan(t *testing.T, client redis.UniversalClient) {
	st := inspectStore(t, client, nil)
	peak := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 10, Period: time.Hour}
	var want []string
	for i := 0; i < 40; i++ {
		req := quota.Request{Tag: fmt.Sprintf("p:t%d", i), Items: []quota.Item{
			{Limit: peak, Key: fmt.Sprintf("peak:t%d", i)},
			{Limit: peak, Key: "other"},
		}}
		mustReserve(t, st, req, 1, 0)
		want = append(want, st.Key(req.Tag, req.Items[0].Key))
	}
	sort.Strings(want)
	got := scanAll(t, st.NewKeyScan("{*}:peak:*", 3))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("scan found %d keys %v\nwant %d %v", len(got), got, len(want), want)
	}
}

func TestKeyScan(t *testing.T) {
	testKeyScan(t, redistest.Start(t).Client(t))
}

func TestKeyScanCluster(t *testing.T) {
	testKeyScan(t, redistest.StartCluster(t).Client(t))
}

// TestInspectLeases checks that Inspect reports a Concurrency limit's
// leases: held ones used, expired and released ones not, and the time
// until the latest expires.
func TestInspectLeases(t *testing.T) {
	srv := redistest.Start(t)
	clock := quotatest.NewClock(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC))
	st := inspectStore(t, srv.Client(t), clock)
	streams := &quota.Limit{Name: "streams", Kind: quota.Concurrency, Rate: 3, Period: 10 * time.Second}
	req := quota.Request{Tag: "acme", Items: []quota.Item{{Limit: streams, Key: "streams"}}}
	mustReserve(t, st, req, 1, 0) // expires at 10s
	clock.Advance(4 * time.Second)
	mustReserve(t, st, req, 1, 0) // expires at 14s
	if err := mustReserve(t, st, req, 1, 0).Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		after       time.Duration
		used        int64
		reset, next time.Duration
	}{{0, 2, 10 * time.Second, 6 * time.Second}, {6 * time.Second, 1, 4 * time.Second, 4 * time.Second}, {4 * time.Second, 0, 0, 0}} {
		clock.Advance(w.after)
		got := mustInspect(t, st, req).Items[0]
		if got.Used != w.used || got.Remaining != 3-w.used || got.ResetAfter != w.reset || got.NextExpiry != w.next || !got.Exists {
			t.Errorf("at %v: %+v, want %d leases held, the soonest expiring in %v, the latest in %v", clock.Now(), got, w.used, w.next, w.reset)
		}
	}
}

// TestInspectDebt checks that Inspect reports what settled costs charged
// beyond a limit: a GCRA tat beyond its tolerance, in events of cost 1,
// and a window's count beyond its rate; and that the GCRA debt is what
// a decision makes the next request wait out.
func TestInspectDebt(t *testing.T) {
	srv := redistest.Start(t)
	clock := quotatest.NewClock(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC))
	st := inspectStore(t, srv.Client(t), clock)
	tokens := &quota.Limit{Name: "tokens", Kind: quota.GCRA, Rate: 10, Period: time.Second, Burst: 5} // 100 ms a token
	daily := &quota.Limit{Name: "daily", Kind: quota.Window, Rate: 7, Calendar: quota.Calendar{Unit: quota.Day}}
	req := quota.Request{Tag: "acme", Items: []quota.Item{{Limit: tokens, Key: "tokens"}, {Limit: daily, Key: "daily"}}}
	rsv := mustReserve(t, st, req, 5, 0)
	if got := mustInspect(t, st, req).Items; got[0].Debt != 0 || got[1].Debt != 0 {
		t.Fatalf("before settling: debts %d, %d, want none", got[0].Debt, got[1].Debt)
	}
	// A settle of more than the daily rate (7) would be implausible: two
	// more reserved first, then the 5 settled at 7.
	mustReserve(t, st, quota.Request{Tag: "acme", Items: req.Items[1:]}, 2, 0)
	if err := rsv.Settle(context.Background(), []int64{8, 7}); err != nil {
		t.Fatal(err)
	}
	got := mustInspect(t, st, req).Items
	if got[0].Debt != 3 || got[0].Remaining != 0 || got[0].ResetAfter != 800*time.Millisecond {
		t.Errorf("tokens after settling 8 of 5: %+v, want debt 3, nothing remaining, full in 800ms", got[0])
	}
	if got[1].Debt != 2 || got[1].Used != 9 || got[1].Remaining != 0 {
		t.Errorf("daily after 2 more and settling 7 of 5: %+v, want debt 2, used 9", got[1])
	}
	probe := mustReserve(t, st, quota.Request{Tag: "acme", Items: req.Items[:1]}, 1, 0)
	if want := time.Duration(got[0].Debt+1) * 100 * time.Millisecond; probe.Allowed || probe.RetryAfter != want {
		t.Errorf("a request after the debt: allowed %v, retry after %v; want refused for %v (the debt and its own token)", probe.Allowed, probe.RetryAfter, want)
	}
	clock.Advance(250 * time.Millisecond)
	if got := mustInspect(t, st, req).Items[0]; got.Debt != 1 {
		t.Errorf("250ms later: debt %d, want 1 (50ms of it left, rounded up)", got.Debt)
	}
}
