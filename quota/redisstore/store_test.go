package redisstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

func TestNewRejects(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		opts   Options
	}{
		{"open brace in prefix", client, Options{Prefix: "app{"}},
		{"close brace in prefix", client, Options{Prefix: "a}b:"}},
		{"negative timeout", client, Options{Timeout: -time.Second}},
		{"nil client", nil, Options{}},
	} {
		st, err := New(tc.client, tc.opts)
		if !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("%s: New = (%v, %v), want an error wrapping quota.ErrInvalid", tc.name, st, err)
		}
	}
	st, err := New(client, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.prefix != DefaultPrefix || st.timeout != DefaultTimeout {
		t.Errorf("defaults: prefix %q timeout %v, want %q %v", st.prefix, st.timeout, DefaultPrefix, DefaultTimeout)
	}
}

// TestInvalidNeedsNoRoundTrip checks that invalid requests and pauses are
// refused before any call: the client points at a closed port.
func TestInvalidNeedsNoRoundTrip(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	st, err := New(client, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	huge := gcra("huge", 1, 100*365*24*time.Hour, 0)
	for name, req := range map[string]quota.Request{
		"empty stack":            {Tag: "x"},
		"cost above burst":       {Tag: "x", Cost: 2, Items: []quota.Item{{Limit: gcra("one", 1, time.Second, 1), Key: "one"}}},
		"tolerance over 71 year": {Tag: "x", Items: []quota.Item{{Limit: huge, Key: "huge"}}},
		"window rate over 2^51":  {Tag: "x", Items: []quota.Item{{Limit: window("w", 1<<52, quota.Day, nil), Key: "w"}}},
	} {
		if _, err := st.Reserve(ctx, &req); !errors.Is(err, quota.ErrInvalid) || errors.Is(err, quota.ErrStore) {
			t.Errorf("%s: Reserve error %v, want quota.ErrInvalid only", name, err)
		}
	}
	for _, p := range [][2]string{{"", "k"}, {"t", ""}} {
		if err := st.Pause(ctx, p[0], p[1], time.Second); !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("Pause(%q, %q): %v, want quota.ErrInvalid", p[0], p[1], err)
		}
	}
}

func TestGCRAState(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	peak := gcra("peak", 10, time.Second, 0) // T = 100ms, DVT = 1s
	req := stack("vendor", peak)
	key := st.prefix + "{vendor}:peak"
	now := start.UnixMicro()

	for i := int64(1); i <= 10; i++ {
		res := reserve(t, st, req, 1, 0)
		if !res.Allowed || res.Wait != 0 || res.Decider != quota.NoDecider {
			t.Fatalf("request %d: %+v, want admitted at once", i, res.Result)
		}
		if got, want := res.Limits[0], (quota.Status{Remaining: 10 - i, ResetAfter: time.Duration(i) * 100 * time.Millisecond}); got != want {
			t.Errorf("request %d: status %+v, want %+v", i, got, want)
		}
		if got, want := client.Get(ctx, key).Val(), strconv.FormatInt(now+i*100000, 10); got != want {
			t.Errorf("request %d: stored tat %s, want %s", i, got, want)
		}
	}
	res := reserve(t, st, req, 1, 0)
	if res.Allowed || res.RetryAfter != 100*time.Millisecond || res.Decider != 0 {
		t.Errorf("11th: %+v, want denied for 100ms by limit 0", res.Result)
	}
	res = reserve(t, st, req, 3, time.Second)
	if !res.Allowed || res.Wait != 300*time.Millisecond || res.Decider != 0 {
		t.Errorf("cost 3 with a wait: %+v, want admitted in 300ms", res.Result)
	}
	// max(tat, t) + c*T = 1s + 3*100ms
	if got, want := client.Get(ctx, key).Val(), strconv.FormatInt(now+1300000, 10); got != want {
		t.Errorf("after cost 3: stored tat %s, want %s", got, want)
	}
	if err := res.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := client.Get(ctx, key).Val(), strconv.FormatInt(now+1000000, 10); got != want {
		t.Errorf("after cancel: stored tat %s, want %s (the whole 300ms back)", got, want)
	}
	// Once the stored tat is in the past the key is idle; a cancel that
	// would move it there deletes it.
	clock.Advance(2 * time.Second)
	res = reserve(t, st, req, 10, 0)
	if !res.Allowed {
		t.Fatalf("full burst after idle: %+v", res.Result)
	}
	wait := reserve(t, st, req, 1, time.Second)
	if wait.Wait != 100*time.Millisecond {
		t.Fatalf("wait = %v, want 100ms", wait.Wait)
	}
	clock.Advance(2 * time.Second) // past the slot: Cancel gives nothing back
	if err := wait.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := client.Get(ctx, key).Val(), strconv.FormatInt(now+3100000, 10); got != want {
		t.Errorf("after a late cancel: stored tat %s, want %s", got, want)
	}
}

// TestCancelOfExpiredKey: a cancel whose GCRA key is gone (expired,
// flushed) does not bring it back.
func TestCancelOfExpiredKey(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	req := stack("v", gcra("one", 1, time.Second, 1))
	key := st.prefix + "{v}:one"
	reserve(t, st, req, 1, 0)
	r := reserve(t, st, req, 1, 2*time.Second)
	if r.Wait != time.Second {
		t.Fatalf("wait %v, want 1s", r.Wait)
	}
	client.Del(ctx, key)
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if n := client.Exists(ctx, key).Val(); n != 0 {
		t.Errorf("cancel brought back an expired key: %v", client.Get(ctx, key).Val())
	}
}

// TestCancelledKey: a cancel behind a live reservation keeps its charge as
// a hole in <prefix>{<tag>}:!cancelled:<key> (a sorted set: score = the tat
// it set, member = the tat before it; reservations in a row join in one
// member), which the cancel of the last reservation follows back and
// empties. Holes that time has passed are
// dropped by the next cancel; Reset deletes the set with its item key;
// ParseKey reads it as the item's KeyCancelled key.
func TestCancelledKey(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	req := stack("v", gcra("one", 1, time.Second, 1))
	key := st.prefix + "{v}:one"
	holes := st.prefix + "{v}:!cancelled:one"
	if got := st.cancelledKey(st.Key("v", "one")); got != holes {
		t.Fatalf("cancelledKey = %q, want %q", got, holes)
	}
	if tag, k, kind, ok := st.ParseKey(holes); !ok || kind != KeyCancelled || tag != "v" || k != "one" {
		t.Errorf("ParseKey(%q) = %q, %q, %v, %v; want v, one, cancelled, true", holes, tag, k, kind, ok)
	}
	now := start.UnixMicro()
	sec := int64(time.Second / time.Microsecond)
	reserve(t, st, req, 1, 0) // tat now+1s
	var waiters []*quota.Reservation
	for i := 1; i <= 3; i++ { // slots now+1s, 2s, 3s; tats now+2s, 3s, 4s
		waiters = append(waiters, reserve(t, st, req, 1, 5*time.Second))
	}
	cancel := func(r *quota.Reservation) {
		t.Helper()
		if err := r.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
	}
	zset := func() string {
		t.Helper()
		zs, err := client.ZRangeWithScores(ctx, holes, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, z := range zs {
			out = append(out, strconv.FormatInt(int64(z.Score)-now, 10)+"<-"+strconv.FormatInt(mustInt(t, z.Member)-now, 10))
		}
		return strings.Join(out, " ")
	}
	tat := func() int64 {
		t.Helper()
		v, err := client.Get(ctx, key).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return v - now
	}

	cancel(waiters[0])
	cancel(waiters[1])
	if got, want := zset(), "3000000<-1000000"; got != want {
		t.Errorf("holes (tat set <- tat before, µs from now) %q, want %q: two waiters in a row, one run", got, want)
	}
	if got := tat(); got != 4*sec {
		t.Errorf("tat now+%dµs, want now+4s: nothing comes back while the last reservation holds the key", got)
	}
	// The TTL covers the latest hole: 3s, plus the test slack.
	if pttl := client.PTTL(ctx, holes).Val(); pttl < time.Duration(testSlack)*time.Millisecond+2*time.Second {
		t.Errorf("holes PTTL %v, want at least the slack and 3s", pttl)
	}
	cancel(waiters[2])
	if got := tat(); got != sec {
		t.Errorf("after the last cancel: tat now+%dµs, want now+1s, the tat before every cancelled one", got)
	}
	if n := client.Exists(ctx, holes).Val(); n != 0 {
		t.Errorf("holes %q left after the tail came back over them", zset())
	}

	// A hole that time has passed is dropped by the next cancel.
	waiters = waiters[:0]
	for i := 1; i <= 3; i++ { // slots now+1s, 2s, 3s again
		waiters = append(waiters, reserve(t, st, req, 1, 5*time.Second))
	}
	cancel(waiters[0]) // a hole at now+2s
	clock.Advance(2100 * time.Millisecond)
	cancel(waiters[2]) // back to now+3s, the live (sent) reservation
	if got := tat(); got != 3*sec {
		t.Errorf("tat now+%dµs, want now+3s", got)
	}
	if n := client.Exists(ctx, holes).Val(); n != 0 {
		t.Errorf("holes %q left: the hole at now+2s has passed", zset())
	}

	// Reset deletes the holes with the item key.
	w1 := reserve(t, st, req, 1, 5*time.Second)
	reserve(t, st, req, 1, 5*time.Second)
	cancel(w1)
	if n := client.Exists(ctx, holes).Val(); n != 1 {
		t.Fatalf("no holes key after a cancel behind a live reservation")
	}
	if err := st.Reset(ctx, "v", "one"); err != nil {
		t.Fatal(err)
	}
	if n := client.Exists(ctx, key, holes).Val(); n != 0 {
		t.Errorf("%d of the item key and its holes left after Reset", n)
	}
}

func mustInt(t *testing.T, v any) int64 {
	t.Helper()
	s, _ := v.(string)
	x, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%v is not an integer", v)
	}
	return x
}

// TestCancelledKeyTTL: on the server's real clock (no test slack), the
// holes key expires when its latest hole's time has passed.
func TestCancelledKeyTTL(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	st := newStore(t, client, nil)
	ctx := context.Background()
	req := stack("v", gcra("slow", 1, time.Hour, 1))
	reserve(t, st, req, 1, 0)
	first := reserve(t, st, req, 1, 3*time.Hour) // slot +1h, tat +2h
	reserve(t, st, req, 1, 3*time.Hour)          // slot +2h, tat +3h
	if err := first.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	got := client.PTTL(ctx, st.prefix+"{v}:!cancelled:slow").Val()
	if want := 2 * time.Hour; got <= 0 || got > want+2*time.Millisecond || got < want-time.Minute {
		t.Errorf("holes PTTL %v, want about %v", got, want)
	}
}

// TestCancelHolesJoin: waiters cancelled in arrival order behind a live
// one leave one member in the holes set (a run), not one each, so the
// tail cancel does not walk them one by one in a script that blocks Redis
// (it walked every one); cancelled every other one they leave one per
// gap, joined as the rest are cancelled. A cancel drops at most 64 passed
// holes.
func TestCancelHolesJoin(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	req := stack("v", gcra("g", 1000, time.Second, 1))
	holes := st.prefix + "{v}:!cancelled:g"
	cancel := func(rs ...*quota.Reservation) {
		t.Helper()
		for _, r := range rs {
			if err := r.Cancel(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	card := func() int64 {
		t.Helper()
		return client.ZCard(ctx, holes).Val()
	}
	const n = 1000
	first := reserve(t, st, req, 1, 0) // goes at once, and stays
	for _, order := range []string{"arrival", "every other"} {
		waiters := make([]*quota.Reservation, n)
		for i := range waiters {
			waiters[i] = reserve(t, st, req, 1, time.Minute)
		}
		if order == "arrival" {
			cancel(waiters[:n-1]...)
		} else {
			for i := 0; i < n-1; i += 2 {
				cancel(waiters[i])
			}
			if got := card(); got != n/2 {
				t.Errorf("%s: %d holes, want %d, one per gap", order, got, n/2)
			}
			for i := 1; i < n-1; i += 2 {
				cancel(waiters[i])
			}
		}
		if got := card(); got != 1 {
			t.Errorf("%s: %d holes after %d cancels in a row, want 1", order, got, n-1)
		}
		cancel(waiters[n-1])
		if got := card(); got != 0 {
			t.Errorf("%s: %d holes after the tail cancel, want 0", order, got)
		}
		if next := reserve(t, st, req, 1, time.Minute); next.Wait != first.Wait+time.Millisecond {
			t.Errorf("%s: the next waits %v, want %v: only the first reservation is left", order, next.Wait, first.Wait+time.Millisecond)
		} else {
			cancel(next)
		}
	}

	// 200 holes whose time passes; each later cancel drops 64 of them.
	waiters := make([]*quota.Reservation, 400)
	for i := range waiters {
		waiters[i] = reserve(t, st, req, 1, time.Minute)
	}
	for i := 0; i < len(waiters); i += 2 {
		cancel(waiters[i])
	}
	clock.Advance(time.Second)
	reserve(t, st, req, 1, 0)
	last := reserve(t, st, req, 1, time.Minute)
	reserve(t, st, req, 1, time.Minute)
	cancel(last) // a hole behind the newest
	if got, want := card(), int64(200-64+1); got != want {
		t.Errorf("after a cancel with 200 holes passed: %d holes, want %d", got, want)
	}
}

// TestCancelWithEndedContext: a waiter typically cancels because its
// context ended; the cancel must still reach Redis.
func TestCancelWithEndedContext(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	req := stack("v", gcra("one", 1, time.Second, 1))
	reserve(t, st, req, 1, 0)
	r := reserve(t, st, req, 1, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Cancel(ctx); err != nil {
		t.Fatalf("Cancel with an ended context: %v", err)
	}
	if again := reserve(t, st, req, 1, time.Second); again.Wait != time.Second {
		t.Errorf("after cancel: wait %v, want the 1s slot back", again.Wait)
	}
}

func TestWindowState(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(time.Date(2026, 3, 7, 10, 59, 0, 0, time.UTC))
	st := newStore(t, client, clock)
	ctx := context.Background()
	hourly := window("hourly", 3, quota.Hour, time.UTC)
	req := stack("v", hourly)
	key := st.prefix + "{v}:hourly"
	w10 := strconv.FormatInt(time.Date(2026, 3, 7, 10, 0, 0, 0, time.UTC).UnixMicro(), 10)
	w11 := strconv.FormatInt(time.Date(2026, 3, 7, 11, 0, 0, 0, time.UTC).UnixMicro(), 10)
	w12 := strconv.FormatInt(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC).UnixMicro(), 10)

	for i := int64(1); i <= 3; i++ {
		res := reserve(t, st, req, 1, 0)
		if want := (quota.Status{Remaining: 3 - i, ResetAfter: time.Minute}); !res.Allowed || res.Limits[0] != want {
			t.Fatalf("request %d: %+v, want admitted with %+v", i, res.Result, want)
		}
	}
	res := reserve(t, st, req, 1, 0)
	if res.Allowed || res.RetryAfter != time.Minute || res.Decider != 0 || res.Limits[0] != (quota.Status{ResetAfter: time.Minute}) {
		t.Errorf("4th: %+v, want denied for 1m", res.Result)
	}
	res = reserve(t, st, req, 2, 2*time.Minute)
	if want := (quota.Status{Remaining: 1, ResetAfter: 61 * time.Minute}); !res.Allowed || res.Wait != time.Minute || res.Limits[0] != want {
		t.Errorf("cost 2 into the next window: %+v, want a 1m wait and %+v", res.Result, want)
	}
	if got := client.HGetAll(ctx, key).Val(); len(got) != 2 || got[w10] != "3" || got[w11] != "2" {
		t.Errorf("hash %v, want {%s: 3, %s: 2}", got, w10, w11)
	}
	if err := res.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if got := client.HGet(ctx, key, w11).Val(); got != "0" {
		t.Errorf("after cancel the 11:00 window holds %s, want 0", got)
	}
	// At 11:30 the 10:00 window has ended: the next charge drops it.
	clock.Advance(31 * time.Minute)
	if res := reserve(t, st, req, 3, 0); !res.Allowed {
		t.Fatalf("11:30: %+v", res.Result)
	}
	if got := client.HGetAll(ctx, key).Val(); len(got) != 1 || got[w11] != "3" {
		t.Errorf("hash %v, want only {%s: 3}", got, w11)
	}
	if res := reserve(t, st, req, 3, time.Hour); !res.Allowed || res.Wait != 30*time.Minute {
		t.Errorf("into 12:00: %+v", res.Result)
	}
	// TTL: the end of the latest window held, 13:00, from 11:30, plus the
	// test clock's slack.
	want := 90*time.Minute + time.Duration(testSlack)*time.Millisecond
	if got := client.PTTL(ctx, key).Val(); got <= want-time.Minute || got > want {
		t.Errorf("PTTL %v, want about %v", got, want)
	}
	if got := client.HGet(ctx, key, w12).Val(); got != "3" {
		t.Errorf("12:00 window holds %s, want 3", got)
	}
}

// TestServerClockPicksTheWindow: Go places the windows around its own
// clock, the script picks the one holding the server's time. Here the
// server's TIME is the real now; a store whose clock is off by a minute
// still charges the window holding the server's time.
func TestServerClockPicksTheWindow(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	st := newStore(t, client, nil)
	day := window("daily", 5, quota.Day, time.UTC)
	req := stack("v", day)
	res := reserve(t, st, req, 1, 0)
	if !res.Allowed {
		t.Fatalf("%+v", res.Result)
	}
	ctx := context.Background()
	fields := client.HKeys(ctx, st.prefix+"{v}:daily").Val()
	tm := client.Time(ctx).Val()
	s, _ := day.Calendar.Bounds(tm)
	if len(fields) != 1 || fields[0] != strconv.FormatInt(s.UnixMicro(), 10) {
		t.Errorf("fields %v, want the start of today (UTC) %d", fields, s.UnixMicro())
	}
}

func TestClockSkewBeyondAWindowIsAnError(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	// Windows placed around 2020 while the server's TIME is today: the
	// caller's clock is off by years, and the script says so.
	st := newStore(t, client, nil)
	b := windowStarts(quota.Calendar{Unit: quota.Hour}, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	v, err := st.call(context.Background(), []*pending{{keys: []string{st.prefix + "{v}:w"},
		args: []any{nil, nil, nil, 13, 0, 1, 0, 0, "w", 1, 5, b[0], b[1], b[2], b[3], b[4]}}})
	if err == nil {
		_, err = parseReserve(v, 1, 0, 0)
	}
	if err == nil || !strings.Contains(err.Error(), "clock") {
		t.Errorf("script with windows of 2020: %v, want a clock skew error", err)
	}
}

func TestPauseState(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	// An item key and a pause key of the same name do not collide.
	req := stack("v", gcra("pause", 10, time.Second, 0))
	req.Pauses = []string{"pause"}
	if err := st.Pause(ctx, "v", "pause", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := st.Pause(ctx, "v", "pause", time.Second); err != nil {
		t.Fatal(err)
	}
	key := st.prefix + "{v}:!pause:pause"
	if got, want := client.Get(ctx, key).Val(), strconv.FormatInt(start.Add(5*time.Second).UnixMicro(), 10); got != want {
		t.Errorf("paused until %s, want %s", got, want)
	}
	res := reserve(t, st, req, 1, 0)
	if res.Allowed || res.RetryAfter != 5*time.Second || res.Decider != quota.PausedDecider {
		t.Errorf("paused: %+v", res.Result)
	}
	res = reserve(t, st, req, 1, 5*time.Second)
	if !res.Allowed || res.Wait != 5*time.Second || res.Decider != quota.PausedDecider {
		t.Errorf("paused with max wait: %+v", res.Result)
	}
	// A request of pauses alone waits for them, and has nothing to cancel.
	alone := quota.Request{Tag: "v", Pauses: []string{"pause"}, MaxWait: 5 * time.Second}
	res, err := st.Reserve(ctx, &alone)
	if err != nil || !res.Allowed || res.Wait != 5*time.Second || res.Decider != quota.PausedDecider || len(res.Limits) != 0 {
		t.Errorf("pauses alone: (%+v, %v), want admitted after 5s by the pause", res, err)
	} else if err := res.Cancel(ctx); err != nil {
		t.Errorf("Cancel of pauses alone: %v", err)
	}
	if err := st.Pause(ctx, "v", "pause", 0); err != nil {
		t.Errorf("Pause 0: %v", err)
	}
	if err := st.Pause(ctx, "v", "pause", -time.Second); err != nil {
		t.Errorf("Pause -1s: %v", err)
	}
}

// TestTTLs checks every kind of key expires when its state is idle, on the
// server's real clock (no test slack).
func TestTTLs(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	st := newStore(t, client, nil)
	ctx := context.Background()
	hourly := gcra("slow", 1, time.Hour, 1)
	daily := window("daily", 10, quota.Day, time.UTC)
	req := stack("v", hourly, daily)
	req.Pauses = []string{"p"}
	if res := reserve(t, st, req, 1, 0); !res.Allowed {
		t.Fatalf("%+v", res.Result)
	}
	if err := st.Pause(ctx, "v", "p", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	now := client.Time(ctx).Val()
	_, dayEnd := daily.Calendar.Bounds(now)
	for key, want := range map[string]time.Duration{
		st.prefix + "{v}:slow":     time.Hour,
		st.prefix + "{v}:daily":    dayEnd.Sub(now),
		st.prefix + "{v}:!pause:p": 10*time.Minute + quota.PauseDrain, // while it may drain
	} {
		got := client.PTTL(ctx, key).Val()
		// Generous below: the TTLs were set a moment before now was read.
		// Above, two whole-millisecond roundings: the script rounds a TTL
		// up to whole ms from a µs TIME, and Redis anchors the expiry to
		// its own ms clock, which PTTL truncates again when it reads it.
		if got <= 0 || got > want+2*time.Millisecond || got < want-time.Minute {
			t.Errorf("%s: PTTL %v, want about %v", key, got, want)
		}
	}
	snap := snapshot(t, client, st.prefix)
	if len(snap) != 3 {
		t.Errorf("keys %v, want 3", snap)
	}
}

// TestDeniedLeavesNoTrace: a request refused by its peak limit consumes
// nothing of the other limits, and writes nothing at all.
func TestDeniedLeavesNoTrace(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	peak := gcra("peak", 1, time.Second, 1)
	slow := gcra("slow", 100, time.Minute, 0)
	daily := window("daily", 10, quota.Day, time.UTC)
	roll := rolling("roll", 100, time.Minute)
	req := stack("v", slow, peak, daily, roll)
	req.Pauses = []string{"p"}
	if err := st.Pause(context.Background(), "v", "p", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// Past the pause's drain (quota.PauseDrain), whose key is still there.
	clock.Advance(time.Millisecond + quota.PauseDrain)
	if res := reserve(t, st, req, 1, 0); !res.Allowed {
		t.Fatalf("first: %+v", res.Result)
	}
	before := snapshot(t, client, st.prefix)
	if len(before) != 5 {
		t.Fatalf("keys before: %v, want 5", before)
	}
	res := reserve(t, st, req, 1, 0)
	if res.Allowed || res.Decider != 1 {
		t.Fatalf("second: %+v, want denied by the peak limit", res.Result)
	}
	if res.Limits[0].Remaining != 99 || res.Limits[2].Remaining != 9 || res.Limits[3].Remaining != 99 {
		t.Errorf("statuses %+v: the other limits would admit", res.Limits)
	}
	after := snapshot(t, client, st.prefix)
	if len(after) != len(before) {
		t.Fatalf("keys after %v, before %v", after, before)
	}
	for k, b := range before {
		a := after[k]
		if a.typ != b.typ || a.value != b.value || a.pttl > b.pttl {
			t.Errorf("%s changed by a denial: before %+v, after %+v", k, b, a)
		}
	}
}

func TestParseReserveRejectsMalformed(t *testing.T) {
	good := func() []any {
		return []any{int64(1), int64(100), int64(150), int64(0), int64(3), int64(10), int64(170), int64(160)}
	}
	if _, err := parseReserve(good(), 1, 0, 0); err != nil {
		t.Fatalf("good reply: %v", err)
	}
	bad := map[string]any{
		"nil":               nil,
		"string":            "OK",
		"short":             good()[:7],
		"long":              append(good(), int64(1)),
		"string element":    func() []any { v := good(); v[2] = "150"; return v }(),
		"nil element":       func() []any { v := good(); v[5] = nil; return v }(),
		"allowed 2":         func() []any { v := good(); v[0] = int64(2); return v }(),
		"slot before now":   func() []any { v := good(); v[2] = int64(99); return v }(),
		"decider too big":   func() []any { v := good(); v[3] = int64(1); return v }(),
		"decider too small": func() []any { v := good(); v[3] = int64(-3); return v }(),
		"negative remain":   func() []any { v := good(); v[4] = int64(-1); return v }(),
		"nested array":      func() []any { v := good(); v[4] = []any{int64(1)}; return v }(),
	}
	for name, v := range bad {
		if _, err := parseReserve(v, 1, 0, 0); !errors.Is(err, errReply) {
			t.Errorf("%s: error %v, want a malformed reply error", name, err)
		}
	}
}

// TestWindowArgsCache: the cached window starts are always those
// windowStarts computes, as the clock moves forward, across daylight
// saving changes, and back.
func TestWindowArgsCache(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	st, err := New(client, Options{})
	if err != nil {
		t.Fatal(err)
	}
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	cals := []quota.Calendar{
		{Unit: quota.Hour},
		{Unit: quota.Day, Location: la},
		{Unit: quota.Day, Reset: 9 * time.Hour, Location: la},
		{Unit: quota.Month, Location: la},
	}
	steps := []time.Duration{0, time.Minute, 59 * time.Minute, 5 * time.Hour, 20 * time.Hour, -30 * time.Hour, 40 * 24 * time.Hour, -time.Microsecond}
	now := time.Date(2026, 3, 7, 23, 30, 0, 0, la)
	for i := 0; i < 40; i++ {
		now = now.Add(steps[i%len(steps)])
		for _, cal := range cals {
			got := st.windowArgs(cal, time.UnixMicro(now.UnixMicro()))
			if want := windowStarts(cal, time.UnixMicro(now.UnixMicro())); got.starts != want {
				t.Fatalf("%v at %v: cached %v, want %v", cal, now, got.starts, want)
			}
			for k, b := range got.boxed {
				if b != any(got.starts[k]) {
					t.Fatalf("boxed %v, starts %v", got.boxed, got.starts)
				}
			}
		}
	}
}

// TestDSTDayState: on the 23- and 25-hour days of America/Los_Angeles the
// window charged starts at local midnight, and the key lives until the
// next local midnight.
func TestDSTDayState(t *testing.T) {
	t.Parallel()
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	client := redistest.Start(t).Client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		at        time.Time
		dayStart  time.Time
		resetLeft time.Duration
	}{
		{time.Date(2026, 3, 8, 0, 30, 0, 0, la), time.Date(2026, 3, 8, 8, 0, 0, 0, time.UTC), 22*time.Hour + 30*time.Minute},
		{time.Date(2026, 3, 8, 12, 0, 0, 0, la), time.Date(2026, 3, 8, 8, 0, 0, 0, time.UTC), 12 * time.Hour},
		{time.Date(2026, 11, 1, 0, 30, 0, 0, la), time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC), 24*time.Hour + 30*time.Minute},
		{time.Date(2026, 11, 1, 23, 0, 0, 0, la), time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC), time.Hour},
	} {
		st := newStore(t, client, quotatest.NewClock(tc.at))
		daily := &quota.Limit{Name: "daily", Kind: quota.Window, Rate: 2,
			Calendar: quota.Calendar{Unit: quota.Day, Location: la}}
		req := stack("v", daily)
		res := reserve(t, st, req, 2, 0)
		if want := (quota.Status{Remaining: 0, ResetAfter: tc.resetLeft}); !res.Allowed || res.Limits[0] != want {
			t.Errorf("%v: %+v, want admitted with %+v", tc.at, res.Result, want)
		}
		res = reserve(t, st, req, 1, 48*time.Hour)
		if !res.Allowed || res.Wait != tc.resetLeft {
			t.Errorf("%v: next request %+v, want a wait of %v (the next local midnight)", tc.at, res.Result, tc.resetLeft)
		}
		key := st.prefix + "{v}:daily"
		fields := client.HGetAll(ctx, key).Val()
		if got := fields[strconv.FormatInt(tc.dayStart.UnixMicro(), 10)]; got != "2" {
			t.Errorf("%v: hash %v, want 2 in the window starting %v", tc.at, fields, tc.dayStart)
		}
	}
}

// TestMidnightSpringForwardDay: America/Santiago springs forward at local
// midnight (2026-09-06 00:00 -04 becomes 01:00 -03). Stepping an hour at a
// time across it, every decision succeeds and each local day admits its 3:
// the 6th from the jump on. Its window once came out empty, and every
// decision of the day failed with "client clock off by more than a window".
func TestMidnightSpringForwardDay(t *testing.T) {
	t.Parallel()
	santiago, err := time.LoadLocation("America/Santiago")
	if err != nil {
		t.Fatal(err)
	}
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(time.Date(2026, 9, 5, 12, 0, 0, 0, santiago))
	st := newStore(t, client, clock)
	req := stack("v", window("daily", 3, quota.Day, santiago))
	var admitted []string
	for i := 0; i < 48; i++ {
		res := reserve(t, st, req, 1, 0)
		if res.Allowed {
			admitted = append(admitted, clock.Now().In(santiago).Format("Jan 2 15:04 -07"))
		}
		clock.Advance(time.Hour)
	}
	want := []string{
		"Sep 5 12:00 -04", "Sep 5 13:00 -04", "Sep 5 14:00 -04",
		"Sep 6 01:00 -03", "Sep 6 02:00 -03", "Sep 6 03:00 -03",
		"Sep 7 00:00 -03", "Sep 7 01:00 -03", "Sep 7 02:00 -03",
	}
	if strings.Join(admitted, ", ") != strings.Join(want, ", ") {
		t.Errorf("admitted at %v, want %v", admitted, want)
	}
}

func rolling(name string, rate int64, period time.Duration) *quota.Limit {
	return &quota.Limit{Name: name, Kind: quota.Rolling, Rate: rate, Period: period}
}

// TestRollingState: a rolling key is a hash of bucket counts with its sum,
// old, new and width; expired buckets leave it when it is next charged,
// cancel takes a charge back out of its bucket and moves new back, and the
// key expires with its newest bucket.
func TestRollingState(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	t0 := time.Date(2026, 3, 7, 10, 0, 0, 0, time.UTC)
	clock := quotatest.NewClock(t0)
	st := newStore(t, client, clock)
	ctx := context.Background()
	req := stack("v", rolling("roll", 3, 10*time.Second)) // buckets of 100ms
	key := st.prefix + "{v}:roll"
	at := func(d time.Duration) string { return strconv.FormatInt(t0.Add(d).UnixMicro(), 10) }
	hash := func() map[string]string { return client.HGetAll(ctx, key).Val() }
	same := func(what string, want map[string]string) {
		t.Helper()
		if got := hash(); !maps.Equal(got, want) {
			t.Errorf("%s: hash %v, want %v", what, got, want)
		}
	}
	for _, d := range []time.Duration{0, 150 * time.Millisecond, 2 * time.Second} {
		clock.Set(t0.Add(d))
		if res := reserve(t, st, req, 1, 0); !res.Allowed {
			t.Fatalf("at %v: %+v", d, res.Result)
		}
	}
	same("three events", map[string]string{at(0): "1", at(100 * time.Millisecond): "1", at(2 * time.Second): "1",
		"sum": "3", "old": at(0), "new": at(2 * time.Second), "width": "100000"})
	// The newest bucket ends at 2.1s and counts until 12.1s, 10.1s from now.
	want := 10100*time.Millisecond + time.Duration(testSlack)*time.Millisecond
	if got := client.PTTL(ctx, key).Val(); got <= want-time.Second || got > want {
		t.Errorf("PTTL %v, want about %v", got, want)
	}

	// At 10.2s the buckets of 0 and 100ms have expired.
	clock.Set(t0.Add(10200 * time.Millisecond))
	res := reserve(t, st, req, 1, 0)
	if want := (quota.Status{Remaining: 1, ResetAfter: 10100 * time.Millisecond}); !res.Allowed || res.Limits[0] != want {
		t.Fatalf("at 10.2s: %+v, want admitted with %+v", res.Result, want)
	}
	same("after expiry", map[string]string{at(2 * time.Second): "1", at(10200 * time.Millisecond): "1",
		"sum": "2", "old": at(200 * time.Millisecond), "new": at(10200 * time.Millisecond), "width": "100000"})

	// Two waiters charge buckets ahead of now; cancelling the later one
	// takes its bucket out and moves new back to the earlier one.
	first := reserve(t, st, req, 1, 3*time.Second)
	second := reserve(t, st, req, 1, 3*time.Second)
	if !first.Allowed || first.Wait != 0 || !second.Allowed || second.Wait != 1900*time.Millisecond {
		t.Fatalf("waiters: %+v, %+v", first.Result, second.Result)
	}
	if err := second.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	same("after cancel", map[string]string{at(2 * time.Second): "1", at(10200 * time.Millisecond): "2",
		"sum": "3", "old": at(200 * time.Millisecond), "new": at(10200 * time.Millisecond), "width": "100000"})

	// A key whose every charge is cancelled is idle: it is deleted.
	lone := stack("v", rolling("lone", 1, time.Minute))
	lone.Pauses = []string{"p"}
	if err := st.Pause(ctx, "v", "p", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	res = reserve(t, st, lone, 1, 10*time.Second)
	if !res.Allowed || res.Wait != 5*time.Second {
		t.Fatalf("behind the pause: %+v", res.Result)
	}
	if err := res.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if n := client.Exists(ctx, st.prefix+"{v}:lone").Val(); n != 0 {
		t.Errorf("after cancelling its only charge the key exists: %v", client.HGetAll(ctx, st.prefix+"{v}:lone").Val())
	}
}

// TestRollingKeyBounded: under a demand that keeps a rolling key full,
// with waiters charging buckets ahead of now, the key never holds more
// than 2*RollingBuckets+2 buckets (and its four fields of its own).
func TestRollingKeyBounded(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	req := stack("v", rolling("roll", 300, time.Minute))
	key := st.prefix + "{v}:roll"
	most := int64(0)
	for i := 0; i < 3000; i++ {
		clock.Advance(137 * time.Millisecond)
		reserve(t, st, req, 1, 2*time.Minute)
		most = max(most, client.HLen(ctx, key).Val())
	}
	if limit := int64(2*quota.RollingBuckets + 2 + 4); most > limit {
		t.Errorf("the key held up to %d fields, want at most %d", most, limit)
	}
	if most < quota.RollingBuckets {
		t.Errorf("the key held at most %d fields: the demand did not fill it", most)
	}
}

// TestRollingWidthChange: a key counted with another bucket width (the
// limit's period changed) counts nothing for the new limit, as a calendar
// window whose calendar changed forgets its count; its first charge
// starts the key afresh.
func TestRollingWidthChange(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		clock.Advance(time.Second)
		reserve(t, st, stack("v", rolling("roll", 3, 10*time.Second)), 1, 0)
	}
	res := reserve(t, st, stack("v", rolling("roll", 3, 20*time.Second)), 1, 0)
	if !res.Allowed || res.Limits[0].Remaining != 2 {
		t.Fatalf("after the period changed: %+v, want admitted with 2 left", res.Result)
	}
	if got := client.HLen(ctx, st.prefix+"{v}:roll").Val(); got != 5 {
		t.Errorf("the key holds %d fields, want one bucket and its four own", got)
	}
}

// TestScriptsDrainByPauseDrain: the scripts' prelude writes
// quota.PauseDrain as a number of its own; it must agree with it.
func TestScriptsDrainByPauseDrain(t *testing.T) {
	want := fmt.Sprintf("local drain = %d -- quota.PauseDrain, µs", quota.PauseDrain.Microseconds())
	if !strings.Contains(preludeLua, want) {
		t.Errorf("prelude.lua does not hold %q", want)
	}
}
