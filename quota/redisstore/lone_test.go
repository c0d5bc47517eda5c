package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// TestLoneAgreesWithReserve: lone.lua, the lean path of a lone stack of
// GCRA limits and calendar windows, gives the replies reserve.lua gives
// and leaves the keys as it leaves them, over random sequences of stacks
// of one to three limits (GCRA bursts of 1 and more, intervals that do
// not divide evenly, hour and day windows small enough to fill, so that a
// decision moves to a later window, charges it and cleans the key on a
// window's first charge), costs of their own, waits up to hours, leads,
// pauses and clock steps across windows: each request is sent to one
// store through lone.lua and to another (its own prefix, on the same
// server and clock) through reserve.lua.
func TestLoneAgreesWithReserve(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	a, b := newStore(t, client, clock), newStore(t, client, clock)
	ctx := context.Background()
	lims := []*quota.Limit{
		gcra("peak", 10, time.Second, 0), gcra("one", 1, time.Second, 1), gcra("thirds", 3, 10*time.Second, 2),
		gcra("minute", 30, time.Minute, 5),
		window("hourly", 12, quota.Hour, nil), window("daily", 40, quota.Day, time.FixedZone("east", 5*3600)),
	}
	rng := rand.New(rand.NewPCG(22, 0))
	for step := range 600 {
		req := quota.Request{Tag: "lone", Pauses: []string{"pause"}}
		capacity := int64(1 << 30)
		for _, i := range rng.Perm(len(lims))[:1+rng.IntN(3)] {
			it := quota.Item{Limit: lims[i], Key: lims[i].Name}
			if rng.IntN(3) == 0 {
				it.Cost = 1 + rng.Int64N(min(lims[i].Capacity(), 3))
			} else {
				capacity = min(capacity, lims[i].Capacity())
			}
			req.Items = append(req.Items, it)
		}
		req.Cost = 1 + rng.Int64N(min(capacity, 2))
		req.MaxWait = time.Duration(rng.Int64N(3)) * time.Second
		if rng.IntN(6) == 0 {
			req.MaxWait = 3 * time.Hour // a later window may admit it
		}
		if rng.IntN(4) == 0 {
			req.Lead = time.Duration(rng.Int64N(2_000_000)) * time.Microsecond
		}
		switch rng.IntN(20) {
		case 0:
			d := time.Duration(rng.Int64N(2000)) * time.Millisecond
			for _, st := range []*Store{a, b} {
				if err := st.Pause(ctx, "lone", "pause", d); err != nil {
					t.Fatal(err)
				}
			}
		case 1:
			clock.Advance(time.Duration(rng.Int64N(3000)) * time.Millisecond)
		case 2:
			clock.Advance(time.Duration(rng.Int64N(90)) * time.Minute) // into later windows
		}
		clock.Advance(time.Duration(rng.Int64N(200)) * time.Millisecond)
		// A run: the same request m times, each with a max wait of its
		// own, as coalescing sends a busy process's stack.
		waits := []time.Duration{req.MaxWait}
		if rng.IntN(3) == 0 {
			for range 1 + rng.IntN(7) {
				waits = append(waits, time.Duration(rng.Int64N(3))*time.Second)
			}
		}
		got, want := loneReply(t, a, &req, waits, true), loneReply(t, b, &req, waits, false)
		where := fmt.Sprintf("step %d, %d limits, cost %d, max waits %v, lead %v", step, len(req.Items), req.Cost, waits, req.Lead)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: lone.lua replied %v, reserve.lua %v", where, got, want)
		}
		for _, it := range req.Items {
			ka, kb := a.Key("lone", it.Key), b.Key("lone", it.Key)
			va, vb := keyValue(t, client, ka), keyValue(t, client, kb)
			ta, tb := client.PTTL(ctx, ka).Val(), client.PTTL(ctx, kb).Val()
			if va != vb || (ta < 0) != (tb < 0) || max(ta-tb, tb-ta) > time.Second {
				t.Fatalf("%s: %s holds %s (TTL %v) after lone.lua, %s (TTL %v) after reserve.lua", where, it.Key, va, ta, vb, tb)
			}
		}
	}
}

// keyValue returns what key k holds, a GCRA key's value or a window key's
// fields and counts, as a string to compare.
func keyValue(t *testing.T, client *redis.Client, k string) string {
	t.Helper()
	ctx := context.Background()
	switch typ := client.Type(ctx, k).Val(); typ {
	case "hash":
		h, err := client.HGetAll(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(h) // fmt sorts a map's keys
	case "none":
		return "none"
	default:
		return typ + " " + client.Get(ctx, k).Val()
	}
}

// loneReply runs the decisions of req, one per max wait in waits, on st
// in one call, through lone.lua or reserve.lua, and returns each
// decision's numbers (replyInts), or its error's text.
func loneReply(t *testing.T, st *Store, req *quota.Request, waits []time.Duration, lone bool) []any {
	t.Helper()
	n := len(req.Items)
	var batch []*pending
	for _, w := range waits {
		r := *req
		r.MaxWait = w
		keys, x := st.extraKeys(&r, st.keys(&r))
		c, _ := st.reserveArgs(&r, len(keys)-n-x.keys, x, nil)
		if !c.lone {
			t.Fatalf("a stack of GCRA limits and windows is not lone.lua's: %+v", r)
		}
		batch = append(batch, &pending{ctx: context.Background(), tag: r.Tag, keys: keys, args: c.args, lone: lone})
	}
	if lone != oneStack(batch) && len(batch) > 1 {
		t.Fatalf("a run of one request is not one stack: %+v", req)
	}
	v, err := st.call(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	each := []any{v}
	if len(batch) > 1 {
		each = v.([]any)
	}
	var out []any
	for _, r := range each {
		nums, err := replyInts(r, nil)
		if err != nil {
			out = append(out, err.Error())
		} else {
			out = append(out, nums)
		}
	}
	return out
}

// TestLoneStack: lone.lua takes the stacks it can decide and no other.
func TestLoneStack(t *testing.T) {
	t.Parallel()
	// No call is made: the client is never dialed.
	st := newStore(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), nil)
	peak, minute := gcra("peak", 10, time.Second, 0), gcra("minute", 30, time.Minute, 0)
	learning := &quota.Limit{Name: "l", Kind: quota.GCRA, Rate: 10, Period: time.Second, Learn: true}
	classed := &quota.Limit{Name: "classed", Kind: quota.GCRA, Rate: 10, Period: time.Second, Reserve: []int64{2000}}
	paced := window("paced", 100, quota.Day, nil)
	paced.Pace = true
	for _, c := range []struct {
		req  quota.Request
		lone bool
	}{
		{stack("x", peak), true},
		{stack("x", peak, minute), true},
		{quota.Request{Tag: "x", Lead: time.Second, Items: []quota.Item{{Limit: peak, Key: "peak"}}}, true},
		{stack("x", peak, window("daily", 10, quota.Day, nil)), true},
		{stack("x", peak, minute, window("daily", 10, quota.Day, nil)), true},
		{quota.Request{Tag: "x", Lead: time.Second, Items: []quota.Item{{Limit: peak, Key: "peak"}, {Limit: window("daily", 10, quota.Day, nil), Key: "daily"}}}, true},
		{stack("x", peak, &quota.Limit{Name: "r", Kind: quota.Rolling, Rate: 10, Period: time.Minute}), false},
		{stack("x", learning), false},
		{quota.Request{Tag: "x", Items: []quota.Item{{Limit: peak, Key: "k"}, {Limit: minute, Key: "k"}}}, false},
		{stack("x", &quota.Limit{Name: "c", Kind: quota.Concurrency, Rate: 2, Period: time.Minute}), false},
		// Lanes and pace are reserve.lua's alone, with or without a lead.
		{stack("x", classed), false},
		{stack("x", peak, classed), false},
		{quota.Request{Tag: "x", Class: 1, Items: []quota.Item{{Limit: classed, Key: "classed"}}}, false},
		{stack("x", peak, paced), false},
	} {
		n := len(c.req.Items)
		keys, x := st.extraKeys(&c.req, st.keys(&c.req))
		rc, _ := st.reserveArgs(&c.req, len(keys)-n-x.keys, x, nil)
		if rc.lone != c.lone {
			t.Errorf("%+v: lone %v, want %v", c.req.Items, rc.lone, c.lone)
		}
	}
}
