package redisstore

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// rawKey is a key as Redis holds it: its DUMP and its absolute expiry (ms,
// -1 for none), which real time passing does not change.
type rawKey struct {
	dump   string
	expire int64
}

// dumpKeys reads every key that starts with prefix.
func dumpKeys(t *testing.T, c *redis.Client, prefix string) map[string]rawKey {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]rawKey, len(keys))
	for _, k := range keys {
		d, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		e, err := c.Do(ctx, "PEXPIRETIME", k).Int64()
		if err != nil {
			t.Fatalf("PEXPIRETIME %s: %v", k, err)
		}
		out[k] = rawKey{d, e}
	}
	return out
}

// restoreKeys puts the keys that start with prefix back as dumped.
func restoreKeys(t *testing.T, c *redis.Client, prefix string, keys map[string]rawKey) {
	t.Helper()
	ctx := context.Background()
	now, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(now) > 0 {
		if err := c.Del(ctx, now...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range keys {
		args := []any{"RESTORE", k, max(v.expire, 0), v.dump}
		if v.expire > 0 {
			args = append(args, "ABSTTL")
		}
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("RESTORE %s: %v", k, err)
		}
	}
}

// randomStack draws one to three limits of any kinds, each of capacity two
// or more, small enough that a run of decisions exhausts them quickly.
func randomStack(rng *rand.Rand) []*quota.Limit {
	var lims []*quota.Limit
	for j := 0; j <= rng.Intn(3); j++ {
		rate := 2 + rng.Int63n(7)
		var l *quota.Limit
		switch rng.Intn(4) {
		case 0:
			periods := []time.Duration{time.Second, 10 * time.Second}
			l = gcra("", rate, periods[rng.Intn(2)], 2+rng.Int63n(4))
		case 1:
			l = window("", rate, quota.Hour, nil)
		case 2:
			l = &quota.Limit{Kind: quota.Rolling, Rate: rate, Period: time.Duration(2+rng.Intn(8)) * time.Second}
		default:
			l = &quota.Limit{Kind: quota.Concurrency, Rate: 2 + rng.Int63n(2), Period: 5 * time.Second}
		}
		l.Name = fmt.Sprintf("%v%d", l.Kind, j)
		lims = append(lims, l)
	}
	return lims
}

// TestPeekAgreesWithDecisions: for random stacks and random histories of
// reservations, cancels, settles, releases and clock steps, an Inspect
// (a peek of reserve.lua) changes no key, TTLs included, and each item's
// Remaining is what decisions find admissible: from the same state, that
// many requests of cost 1 and no wait for that item alone are admitted at
// the same instant, and the next is denied.
func TestPeekAgreesWithDecisions(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	ctx := context.Background()
	const seed = 12
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 40; round++ {
		// Near the end of an hour, so that windows are charged ahead.
		clock := quotatest.NewClock(start.Add(59*time.Minute + time.Duration(rng.Intn(60))*time.Second))
		st := newStore(t, client, clock)
		req := stack("peek", randomStack(rng)...)
		req.Pauses = []string{"pause"}
		capacity := int64(1 << 20)
		for i := range req.Items {
			capacity = min(capacity, req.Items[i].Limit.Capacity())
		}
		var history []string
		var held []*quota.Reservation
		for s := rng.Intn(14); s > 0; s-- {
			switch rng.Intn(6) {
			case 0:
				d := time.Duration(rng.Intn(3000)) * time.Millisecond
				if rng.Intn(5) == 0 {
					d = time.Duration(rng.Intn(90)) * time.Second
				}
				clock.Advance(d)
				history = append(history, fmt.Sprintf("advance %v", d))
			case 1:
				if len(held) > 0 {
					r := held[rng.Intn(len(held))]
					actual := make([]int64, len(req.Items))
					for i := range actual {
						actual[i] = rng.Int63n(6) - 1
					}
					if err := r.Settle(ctx, actual); err != nil {
						t.Fatal(err)
					}
					history = append(history, fmt.Sprintf("settle %v", actual))
				}
			case 2:
				if len(held) > 0 {
					r := held[rng.Intn(len(held))]
					if err := r.Cancel(ctx); err != nil {
						t.Fatal(err)
					}
					if err := r.Release(ctx); err != nil {
						t.Fatal(err)
					}
					history = append(history, "cancel and release")
				}
			default:
				cost := 1 + rng.Int63n(capacity)
				wait := time.Duration(rng.Intn(3)) * time.Duration(rng.Intn(60)) * time.Second
				r := reserve(t, st, req, cost, wait)
				held = append(held, r)
				history = append(history, fmt.Sprintf("reserve cost %d wait %v: %v", cost, wait, r.Allowed))
			}
		}
		where := func() string {
			return fmt.Sprintf("seed %d round %d, stack %s, after:\n\t%s", seed, round, describeStack(req), strings.Join(history, "\n\t"))
		}
		before := dumpKeys(t, client, st.Prefix())
		snap := mustInspect(t, st, req)
		after := dumpKeys(t, client, st.Prefix())
		if fmt.Sprint(before) != fmt.Sprint(after) {
			t.Fatalf("%s\nthe peek changed the keys:\nbefore %v\nafter  %v", where(), before, after)
		}
		for i, it := range snap.Items {
			restoreKeys(t, client, st.Prefix(), before)
			one := quota.Request{Tag: req.Tag, Items: req.Items[i : i+1]}
			var admitted int64
			for admitted <= it.Remaining && reserve(t, st, one, 1, 0).Allowed {
				admitted++
			}
			if admitted != it.Remaining {
				t.Fatalf("%s\nitem %d (%s): Inspect says %d remaining (%+v), decisions admit %d",
					where(), i, req.Items[i].Limit.Name, it.Remaining, it, admitted)
			}
		}
	}
}

func describeStack(req quota.Request) string {
	var b strings.Builder
	for _, it := range req.Items {
		l := it.Limit
		fmt.Fprintf(&b, "[%s rate %d period %v burst %d] ", l.Name, l.Rate, l.Period, l.Burst)
	}
	return b.String()
}

// TestPeekReadOnly: Inspect works for a user that may not write, and on a
// replica, and reads there what the master holds.
func TestPeekReadOnly(t *testing.T) {
	t.Parallel()
	master := redistest.Start(t)
	mc := master.Client(t)
	ctx := context.Background()
	clock := quotatest.NewClock(start)
	st := newStore(t, mc, clock)
	req := stack("ro", gcra("peak", 10, time.Hour, 3), window("hourly", 5, quota.Hour, nil),
		&quota.Limit{Name: "roll", Kind: quota.Rolling, Rate: 4, Period: time.Minute},
		&quota.Limit{Name: "streams", Kind: quota.Concurrency, Rate: 2, Period: time.Minute})
	req.Pauses = []string{"pause"}
	reserve(t, st, req, 2, 0)
	if err := st.Pause(ctx, req.Tag, "pause", time.Hour); err != nil {
		t.Fatal(err)
	}
	want := mustInspect(t, st, req)

	if err := mc.Do(ctx, "ACL", "SETUSER", "peeker", "on", ">pw", "~*", "+@all", "-@write").Err(); err != nil {
		t.Fatal(err)
	}
	ro := redis.NewClient(&redis.Options{Addr: master.Addr, Username: "peeker", Password: "pw"})
	t.Cleanup(func() { _ = ro.Close() })
	host, port, err := net.SplitHostPort(master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	replica := redistest.StartWith(t, "--replicaof", host, port)
	rc := replica.Client(t)
	// The replica has the state once its keys are there.
	for begin := time.Now(); rc.Exists(ctx, st.Key(req.Tag, req.Items[0].Key)).Val() == 0; {
		if time.Since(begin) > 10*time.Second {
			t.Fatal("the replica never received the state")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for name, c := range map[string]*redis.Client{"read-only user": ro, "replica": rc} {
		peek, err := New(c, Options{Prefix: st.Prefix(), Clock: clock, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		got := mustInspect(t, peek, req)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %+v\nwant %+v", name, got, want)
		}
	}
}
