package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
		d[i], errs[i] = parseReserve(x, 1, extra{})
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

// pendingOf builds req's part of a reserve.lua call as Reserve does, for a
// stack of GCRA and window limits.
func pendingOf(s *Store, req quota.Request) *pending {
	keys, x := s.extraKeys(&req, s.keys(&req))
	c, _ := s.reserveArgs(&req, len(keys)-len(req.Items)-x.keys, x, nil)
	return &pending{ctx: context.Background(), tag: req.Tag, keys: keys, args: c.args}
}

// TestOneCallAgreesWithCallsAlone: a call that decides many requests
// replies, and leaves the keys, exactly as the same requests decided one
// call each, in order, at the same now. The requests come in runs of the
// same stack, cost and wait (which reserve.lua decides without parsing
// them again) mixed with others on the same keys, with and without a
// pause in force, on a stopped clock so that both see one now. Stacks
// with priority classes (a GCRA limit's lanes, a window's reserves) and a
// paced window are coalesced too, each request of a random class, and so
// are stacks with Fair limits, each request of a random tenant and
// weight, some back at an appointment (the active sets are written at
// once, the lanes through the call's view).
func TestOneCallAgreesWithCallsAlone(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start.Add(50 * time.Minute)) // a paced hour well on
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(14, 17))
	lanes := gcra("lanes", 10, time.Second, 0)
	lanes.Reserve = []int64{2000, 3000}
	held := window("held", 20, quota.Hour, time.UTC)
	held.Reserve = []int64{2500, 2500}
	paced := window("paced", 100, quota.Hour, time.UTC)
	paced.Pace, paced.PaceReserve, paced.Reserve = true, 3000, []int64{0, 0}
	shared := gcra("shared", 10, time.Second, 4)
	shared.Fair = true
	sharedMinute := gcra("shared-minute", 30, time.Minute, 12)
	sharedMinute.Fair = true
	limits := []*quota.Limit{
		gcra("peak", 5, time.Second, 8),
		gcra("minute", 40, time.Minute, 0),
		window("daily", 30, quota.Day, time.UTC),
		window("hourly", 12, quota.Hour, time.UTC),
		lanes, held, paced, shared, sharedMinute,
	}
	tenants := []string{"", "acme", "b-2", "{c d}"}
	deferred := 0 // fair requests deferred in a call of several
	random := func() quota.Request {
		var ls []*quota.Limit
		for _, l := range limits {
			if rng.IntN(2) == 0 {
				ls = append(ls, l)
			}
		}
		if len(ls) == 0 {
			ls = limits[:1]
		}
		req := stack("v", ls...)
		req.Cost = int64(rng.IntN(3))
		req.Class = rng.IntN(3) // every limit with classes has three
		if rng.IntN(2) == 0 {
			req.MaxWait = time.Duration(rng.IntN(20)) * time.Second
		}
		if rng.IntN(3) == 0 {
			req.Pauses = []string{"pause"}
		}
		if req.HasFair() {
			req.Share = quota.Share{Key: tenants[rng.IntN(len(tenants))], Weight: int64(rng.IntN(4))}
			req.Appointment = rng.IntN(4) == 0
		}
		return req
	}
	for round := 0; round < 60; round++ {
		one, alone := newStore(t, client, clock), newStore(t, client, clock)
		if rng.IntN(4) == 0 { // a pause in force for the requests that read it
			for _, st := range []*Store{one, alone} {
				if err := st.Pause(ctx, "v", "pause", 2*time.Second); err != nil {
					t.Fatal(err)
				}
			}
		}
		var reqs []quota.Request
		for len(reqs) < 2+rng.IntN(30) {
			req := random()
			for run := 1 + rng.IntN(6); run > 0; run-- {
				reqs = append(reqs, req)
			}
		}
		batch := make([]*pending, len(reqs))
		for i, req := range reqs {
			batch[i] = pendingOf(one, req)
		}
		v, err := one.call(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		together := v.([]any)
		for i, req := range reqs {
			got, err := alone.call(ctx, []*pending{pendingOf(alone, req)})
			if err != nil {
				t.Fatal(err)
			}
			if r, ok := got.([]any); ok && len(reqs) > 1 && r[0] == int64(2) {
				deferred++
			}
			if !reflect.DeepEqual(together[i], got) {
				t.Fatalf("round %d, request %d of %d (%d items, cost %d, wait %v, pauses %v, share %+v, appointment %v): in one call %v, alone %v",
					round, i, len(reqs), len(req.Items), req.Cost, req.MaxWait, req.Pauses, req.Share, req.Appointment, together[i], got)
			}
		}
		a, b := snapshot(t, client, one.prefix), snapshot(t, client, alone.prefix)
		if len(a) != len(b) {
			t.Fatalf("round %d: %d keys after one call, %d after calls alone", round, len(a), len(b))
		}
		for k, ka := range a {
			kb := b[alone.prefix+strings.TrimPrefix(k, one.prefix)]
			// TTLs were set at the same now but read moments apart.
			if ka.typ != kb.typ || ka.value != kb.value || (ka.pttl-kb.pttl).Abs() > time.Second {
				t.Fatalf("round %d: key %s: %+v after one call, %+v after calls alone", round, k, ka, kb)
			}
		}
	}
	if deferred == 0 {
		t.Error("no fair request was deferred in a call of several: the test shows nothing of deferrals")
	}
	t.Logf("%d fair requests deferred in calls of several", deferred)
}

// TestCoalesceKindClash: one call with a GCRA and a window decision on
// the same absent key (a reload that changed the limit's kind, with
// requests in flight) fails only the decisions that meet the key after
// the other kind charged it in that call, as they would have failed
// alone (WRONGTYPE); the others, on that key or another, get their own
// replies, and nothing of a failed one is written.
func TestCoalesceKindClash(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	g := stack("p", gcra("core", 1000, time.Second, 0))
	w := stack("p", window("core", 1000, quota.Day, time.UTC))
	other := stack("p", gcra("other", 1000, time.Second, 0))
	// other; g charges core as a string; w then fails; other; w fails; g.
	batch := []*pending{pendingOf(st, other), pendingOf(st, g), pendingOf(st, w), pendingOf(st, other), pendingOf(st, w), pendingOf(st, g)}
	v, err := st.call(ctx, batch)
	if err != nil {
		t.Fatalf("the call failed as a whole: %v", err)
	}
	vals := v.([]any)
	for i, x := range vals {
		d, err := parseReserve(x, 1, extra{})
		if clash := i == 2 || i == 4; clash {
			if !errors.Is(classify(err), quota.ErrState) || !strings.Contains(fmt.Sprint(err), "WRONGTYPE") {
				t.Errorf("decision %d (window after GCRA): %v, want WRONGTYPE, ErrState", i, err)
			}
			continue
		}
		if err != nil || !d.allowed {
			t.Errorf("decision %d: %+v, %v, want admitted", i, d, err)
		}
	}
	now := clock.Now().UnixMicro()
	const T = 1000 // µs
	for key, want := range map[string]int64{"core": now + 2*T, "other": now + 2*T} {
		k := st.prefix + "{p}:" + key
		if got, err := client.Get(ctx, k).Int64(); err != nil || got != want {
			t.Errorf("%s: %d, %v, want the tat of two charges, %d", key, got, err, want)
		}
	}
	// The other way round: a window charges core first; a GCRA decision
	// on it then fails alone.
	st = newStore(t, client, clock)
	batch = []*pending{pendingOf(st, w), pendingOf(st, g), pendingOf(st, w)}
	v, err = st.call(ctx, batch)
	if err != nil {
		t.Fatalf("the call failed as a whole: %v", err)
	}
	vals = v.([]any)
	for i, x := range vals {
		d, err := parseReserve(x, 1, extra{})
		if i == 1 {
			if !strings.Contains(fmt.Sprint(err), "WRONGTYPE") {
				t.Errorf("decision 1 (GCRA after window): %v, want WRONGTYPE", err)
			}
			continue
		}
		if err != nil || !d.allowed {
			t.Errorf("decision %d: %+v, %v, want admitted", i, d, err)
		}
	}
	k := st.prefix + "{p}:core"
	if typ := client.Type(ctx, k).Val(); typ != "hash" {
		t.Fatalf("core is a %s, want the window's hash", typ)
	}
	if vals := client.HVals(ctx, k).Val(); len(vals) != 1 || vals[0] != "2" {
		t.Errorf("core counts %v, want one window of 2", vals)
	}
}

// TestRunOfOneStack: a coalesced call whose decisions repeat one lone
// stack (a run, lone.lua's) decides them in order as reserve.lua's batch
// does: each on the state the ones before it left, the one past the burst
// denied, a max wait of its own each; on a key holding another type every
// decision of the run fails, with WRONGTYPE.
func TestRunOfOneStack(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	const T, dvt = 1_000_000, 2_000_000 // 1 per second, burst 2
	run := func(key string, waits ...int64) []*pending {
		var batch []*pending
		for _, w := range waits {
			p := gcraPending(key, T, dvt)
			p.args[4], p.lone = w, true
			batch = append(batch, p)
		}
		if !oneStack(batch) {
			t.Fatalf("%d decisions of one stack are not a run", len(batch))
		}
		return batch
	}
	key := st.prefix + "{v}:peak"
	// The fourth may wait a second: it is admitted a second on.
	v, err := st.call(ctx, run(key, 0, 0, 0, 1_000_000))
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now().UnixMicro()
	var d [4]decision
	for i, x := range v.([]any) {
		if d[i], err = parseReserve(x, 1, extra{}); err != nil {
			t.Fatalf("decision %d: %v", i, err)
		}
	}
	if !d[0].allowed || !d[1].allowed || d[2].allowed || !d[3].allowed {
		t.Fatalf("allowed %v %v %v %v, want true true false true", d[0].allowed, d[1].allowed, d[2].allowed, d[3].allowed)
	}
	if d[0].marks[0] != now+T || d[1].prevs[0] != d[0].marks[0] || d[1].marks[0] != now+2*T ||
		d[3].t != now+T || d[3].prevs[0] != d[1].marks[0] || d[3].marks[0] != now+3*T {
		t.Errorf("marks %d, %d (prev %d), %d at %d (prev %d), want %d, %d (prev %d), %d at %d (prev %d)",
			d[0].marks[0], d[1].marks[0], d[1].prevs[0], d[3].marks[0], d[3].t, d[3].prevs[0],
			now+T, now+2*T, now+T, now+3*T, now+T, now+2*T)
	}
	if got, _ := client.Get(ctx, key).Int64(); got != now+3*T {
		t.Errorf("stored tat %d, want %d", got, now+3*T)
	}

	wrong := st.prefix + "{v}:hash"
	if err := client.HSet(ctx, wrong, "a", 1).Err(); err != nil {
		t.Fatal(err)
	}
	v, err = st.call(ctx, run(wrong, 0, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range v.([]any) {
		if _, err := parseReserve(x, 1, extra{}); !errors.Is(classify(err), quota.ErrState) || !strings.Contains(fmt.Sprint(err), "WRONGTYPE") {
			t.Errorf("decision %d on a hash: %v, want WRONGTYPE, ErrState", i, err)
		}
	}
}

// TestOneStack: a run is decisions of lone stacks with the same keys,
// items and costs; their max waits may differ.
func TestOneStack(t *testing.T) {
	t.Parallel()
	lone := func(key string, cost, wait int64) *pending {
		p := gcraPending(key, 1000, 2000)
		p.args[4], p.args[9], p.lone = wait, cost, true
		return p
	}
	reserveOnly := lone("a", 1, 0)
	reserveOnly.lone = false
	for _, c := range []struct {
		name  string
		batch []*pending
		run   bool
	}{
		{"same", []*pending{lone("a", 1, 0), lone("a", 1, 0)}, true},
		{"max waits of their own", []*pending{lone("a", 1, 0), lone("a", 1, 5), lone("a", 1, 9)}, true},
		{"another key", []*pending{lone("a", 1, 0), lone("b", 1, 0)}, false},
		{"another cost", []*pending{lone("a", 1, 0), lone("a", 2, 0)}, false},
		{"reserve.lua's first", []*pending{reserveOnly, lone("a", 1, 0)}, false},
		{"reserve.lua's later", []*pending{lone("a", 1, 0), reserveOnly}, false},
		{"more items", []*pending{lone("a", 1, 0), {lone: true, keys: []string{"a"}, args: append(lone("a", 1, 0).args, "g", 1, 1000, 2000)}}, false},
	} {
		if got := oneStack(c.batch); got != c.run {
			t.Errorf("%s: oneStack %v, want %v", c.name, got, c.run)
		}
	}
}

// TestLoneReplies: lone.lua's packed reply is cut into one packed per
// decision, 8 bytes a number, big-endian, and parses as reserve.lua's
// array of the same numbers; a reply of another type or length is
// malformed, never cut short or read past its end; an array of one error
// is every decision's.
func TestLoneReplies(t *testing.T) {
	t.Parallel()
	pack := func(nums ...int64) string {
		b := make([]byte, 0, 8*len(nums))
		for _, x := range nums {
			b = binary.BigEndian.AppendUint64(b, uint64(x))
		}
		return string(b)
	}
	const now = 1_795_000_000_123_456 // µs: above 2^32, and 2^53 above it
	one := []int64{1, now, now + 5, -1, 3, 1_000_000, now + 1_000_000, now - 7}
	denied := []int64{0, now, now + 9_000_000, 0, 0, 9_000_000, 0, 0}
	v, err := loneReplies(pack(append(slices.Clone(one), denied...)...), 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]int64{one, denied} {
		got, err := replyInts(v.([]any)[i], nil)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("decision %d: %v, %v, want %v", i, got, err, want)
		}
		fromArray := make([]any, len(want))
		for j, x := range want {
			fromArray[j] = x
		}
		dp, err := parseReserve(v.([]any)[i], 1, extra{})
		da, erra := parseReserve(fromArray, 1, extra{})
		if err != nil || erra != nil || !reflect.DeepEqual(dp, da) {
			t.Fatalf("decision %d: packed parses as %+v (%v), the array as %+v (%v)", i, dp, err, da, erra)
		}
	}
	if v, err := loneReplies(pack(one...), 1); err != nil || v != packed(pack(one...)) {
		t.Errorf("a decision alone: %v, %v, want its packed reply", v, err)
	}
	for _, c := range []struct {
		name string
		v    any
		m    int
	}{
		{"an array", []any{int64(1), int64(2)}, 1},
		{"an integer", int64(1), 1},
		{"too short for a decision", pack(1, now, now), 1},
		{"not whole numbers", pack(one...)[:8*len(one)-3], 1},
		{"not whole decisions", pack(append(slices.Clone(one), 1)...), 2},
		{"empty", "", 3},
	} {
		if _, err := loneReplies(c.v, c.m); !errors.Is(err, errReply) {
			t.Errorf("%s: %v, want errReply", c.name, err)
		}
	}
	wrong := errors.New("WRONGTYPE")
	v, err = loneReplies([]any{wrong}, 3)
	if err != nil || len(v.([]any)) != 3 || v.([]any)[2] != wrong {
		t.Errorf("an error for 3 decisions: %v, %v", v, err)
	}
	if _, err := parseReserve(packed(pack(1, now, now-1, -1)), 0, extra{}); !errors.Is(err, errReply) {
		t.Errorf("a packed slot time before now: %v, want errReply", err)
	}
}

// TestQueuedDecisionLeaves: a decision queued behind a call in flight
// (here a call the test holds, which never returns) leaves the queue when
// its time left falls to a call's budget and goes alone, decided once; one
// whose caller gives up while queued returns its context's error,
// undecided; one sent when its time to leave comes waits for its reply up
// to its deadline, and past it fails without waiting more. The periods
// are 300 ms to seconds apart, so that a loaded machine cannot flip
// them.
func TestQueuedDecisionLeaves(t *testing.T) {
	t.Parallel()
	const T, dvt = 60_000_000, 600_000_000 // one a minute: the key lives a minute
	// queue holds lane l of st busy, queues p behind it with deadline
	// and budget, and returns the channel of its wait's result once p
	// is in the queue.
	type result struct {
		v   any
		err error
	}
	queue := func(st *Store, p *pending, deadline time.Time, budget time.Duration) (*lane, chan result) {
		l := &st.lanes[maphash.String(st.seed, p.tag)%lanes]
		l.mu.Lock()
		l.busy, l.since = true, time.Now()
		res := make(chan result, 1)
		go func() {
			v, err := st.wait(l, *p, deadline, budget) // unlocks l.mu
			res <- result{v, err}
		}()
		l.mu.Lock() // once wait has queued p and unlocked
		if len(l.queue) != 1 {
			t.Fatalf("%d queued, want 1", len(l.queue))
		}
		l.mu.Unlock()
		return l, res
	}
	ctx := context.Background()

	t.Run("leaves and goes alone", func(t *testing.T) {
		t.Parallel()
		st := newStore(t, redistest.Start(t).Client(t), nil)
		key := st.prefix + "{v}:peak"
		// Leaves at 2 s, with 2 s to make its call alone.
		l, res := queue(st, gcraPending(key, T, dvt), time.Now().Add(4*time.Second), 2*time.Second)
		r := <-res
		d, err := parseReserve(r.v, 1, extra{})
		if r.err != nil || err != nil || !d.allowed {
			t.Fatalf("left the queue: %v, %+v, %v; want a decision alone, admitted", r.err, d, err)
		}
		if len(l.queue) != 0 {
			t.Errorf("%d still queued", len(l.queue))
		}
		if got := st.client.Get(ctx, key).Val(); got != fmt.Sprint(d.marks[0]) {
			t.Errorf("stored tat %q, want the decision's %d: decided once", got, d.marks[0])
		}
	})

	t.Run("caller gives up while queued", func(t *testing.T) {
		t.Parallel()
		st := newStore(t, redistest.Start(t).Client(t), nil)
		key := st.prefix + "{v}:peak"
		p := gcraPending(key, T, dvt)
		cctx, cancel := context.WithCancel(ctx)
		p.ctx = cctx
		l, res := queue(st, p, time.Now().Add(time.Minute), 500*time.Millisecond)
		cancel()
		if r := <-res; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("gave up while queued: %v, %v; want context.Canceled", r.v, r.err)
		}
		if len(l.queue) != 0 {
			t.Errorf("%d still queued", len(l.queue))
		}
		if n := st.client.Exists(ctx, key).Val(); n != 0 {
			t.Errorf("the key exists: decided after the caller gave up")
		}
	})

	// Sent: a drain takes the queued decision into a call through a
	// round trip of rtt.
	const rtt = 2 * time.Second
	sent := func(t *testing.T, deadline time.Duration) (result, time.Duration, string, *Store, chan struct{}) {
		st, _ := farStore(t, rtt/2, 10*time.Second, redis.Options{})
		key := st.prefix + "{v}:peak"
		if err := reserveScript.Load(ctx, st.client).Err(); err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		// Leave at 300 ms, before the reply: the call has it then.
		l, res := queue(st, gcraPending(key, T, dvt), begin.Add(deadline), deadline-300*time.Millisecond)
		drained := make(chan struct{})
		go func() {
			st.drain(l)
			close(drained)
		}()
		r := <-res
		return r, time.Since(begin), key, st, drained
	}
	t.Run("sent waits for its reply", func(t *testing.T) {
		t.Parallel()
		r, _, _, _, drained := sent(t, 2*rtt) // the reply comes at rtt
		<-drained
		if d, err := parseReserve(r.v, 1, extra{}); r.err != nil || err != nil || !d.allowed {
			t.Fatalf("sent, reply on the way: %v, %+v, %v; want its reply, admitted", r.err, d, err)
		}
	})
	t.Run("sent fails at its deadline", func(t *testing.T) {
		t.Parallel()
		r, took, key, st, drained := sent(t, 500*time.Millisecond) // the reply comes at rtt
		if r.v != nil || !errors.Is(r.err, context.DeadlineExceeded) {
			t.Fatalf("sent, no reply by the deadline: %v, %v; want context.DeadlineExceeded", r.v, r.err)
		}
		if took >= rtt {
			t.Errorf("returned after %v: waited for the reply past its deadline of 500ms", took)
		}
		// The call finishes in the background: decided once.
		<-drained
		if n, err := st.client.Exists(ctx, key).Result(); n != 1 {
			t.Errorf("the call in flight did not decide: %v", err)
		}
	})
}

// TestReleasedTimerHoldsNoTick: a timer wait gives back to the pool holds
// no tick, even in a program that asks for the timers before Go 1.23
// (GODEBUG asynctimerchan=1), whose channel keeps a tick nobody read: the
// next queued decision would take it for its time to leave, or to give
// up. The test runs itself again with that setting.
func TestReleasedTimerHoldsNoTick(t *testing.T) {
	t.Parallel()
	if os.Getenv("THROTTLE_TEST_ASYNC_TIMERS") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReleasedTimerHoldsNoTick$", "-test.count=1")
		cmd.Env = append(os.Environ(), "THROTTLE_TEST_ASYNC_TIMERS=1", "GODEBUG=asynctimerchan=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("with asynctimerchan=1: %v\n%s", err, out)
		}
		return
	}
	tm := timers.Get().(*time.Timer)
	tm.Reset(time.Millisecond)
	for wait := time.Now().Add(10 * time.Second); len(tm.C) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatal("the timer left no tick in its channel: not the timers of asynctimerchan=1")
		}
	}
	release(tm)
	if n := len(tm.C); n != 0 {
		t.Fatalf("a released timer holds %d ticks", n)
	}
}
