package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// admission is one admitted decision: the server's now and the slot time,
// µs on the server's clock.
type admission struct{ now, t int64 }

// TestContention runs 8 clients (8 connection pools, as 8 processes of a
// fleet would have) of 32 goroutines each against one three-limit stack on
// the server's real clock for about two seconds, then checks every
// admission against what the limits allow:
//
//   - GCRA: any k admissions whose slots lie in [a, b] satisfy
//     k <= burst + (b-a)/T;
//   - window: no window admits more than its rate, and the counts left in
//     Redis are exactly the admissions charged to each window.
func TestContention(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	// Each limit binds in turn: peak at once (burst 50, then 50/s), slow
	// after about 1s (burst 100, then 10/s), hourly near the end.
	peak := gcra("peak", 50, time.Second, 0)         // T = 20ms
	slow := gcra("slow", 100, 10*time.Second, 0)     // T = 100ms
	hourly := window("hourly", 105, quota.Hour, nil) // 105 per hour
	req := stack("vendor", peak, slow, hourly)
	prefix := uniquePrefix()

	var mu sync.Mutex
	var admitted []admission
	denied := 0
	const clients, perClient = 8, 32
	stores := make([]*Store, clients)
	for i := range stores {
		st, err := New(srv.Client(t), Options{Prefix: prefix, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		st.observe = func(now, slot int64, allowed bool) {
			mu.Lock()
			defer mu.Unlock()
			if allowed {
				admitted = append(admitted, admission{now, slot})
			} else {
				denied++
			}
		}
		stores[i] = st
	}
	waits := []time.Duration{0, 0, 20 * time.Millisecond, 100 * time.Millisecond}
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, clients*perClient)
	for c := 0; c < clients; c++ {
		for g := 0; g < perClient; g++ {
			wg.Add(1)
			go func(st *Store, seed uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, 1))
				r := req
				for time.Now().Before(deadline) {
					r.MaxWait = waits[rng.IntN(len(waits))]
					if _, err := st.Reserve(ctx, &r); err != nil {
						errs <- err
						return
					}
				}
			}(stores[c], uint64(c*perClient+g))
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Reserve under contention: %v", err)
	}
	if len(admitted) == 0 || denied == 0 {
		t.Fatalf("%d admitted, %d denied: the limits were not exercised", len(admitted), denied)
	}
	t.Logf("%d decisions: %d admitted, %d denied", len(admitted)+denied, len(admitted), denied)

	slots := make([]int64, len(admitted))
	for i, a := range admitted {
		if a.t < a.now {
			t.Fatalf("slot %d before now %d", a.t, a.now)
		}
		slots[i] = a.t
	}
	slices.Sort(slots)
	for _, l := range []*quota.Limit{peak, slow} {
		if k, a, b := worstGCRA(slots, l.Interval(), l.Capacity()); k > 0 {
			t.Errorf("limit %s: %d admissions in [%d, %d] (%v), more than burst %d + span/T",
				l.Name, k, a, b, time.Duration(b-a)*time.Microsecond, l.Capacity())
		}
	}
	perWindow := map[int64]int64{}
	for _, s := range slots {
		ws, _ := hourly.Calendar.Bounds(time.UnixMicro(s))
		perWindow[ws.UnixMicro()]++
	}
	stored, err := srv.Client(t).HGetAll(ctx, prefix+"{vendor}:hourly").Result()
	if err != nil {
		t.Fatal(err)
	}
	for ws, n := range perWindow {
		if n > hourly.Rate {
			t.Errorf("window %d admitted %d, rate %d", ws, n, hourly.Rate)
		}
		if got := stored[strconv.FormatInt(ws, 10)]; got != strconv.FormatInt(n, 10) {
			t.Errorf("window %d: Redis counts %s, %d were admitted", ws, got, n)
		}
	}
}

// worstGCRA checks sorted slot times against a GCRA of interval T and the
// given burst: for every i <= j, (j-i+1) <= burst + (s[j]-s[i])/T, i.e.
// (j-i+1-burst)*T <= s[j]-s[i]. It returns a violating count and span, or
// k = 0. With f(i) = i*T - s[i] the condition is f(j) - f(i) <=
// (burst-1)*T, checked against the running minimum of f.
func worstGCRA(s []int64, T, burst int64) (k int, a, b int64) {
	minF, minI := int64(0), -1
	for j := range s {
		f := int64(j)*T - s[j]
		if minI < 0 || f < minF {
			minF, minI = f, j
		}
		if f-minF > (burst-1)*T {
			return j - minI + 1, s[minI], s[j]
		}
	}
	return 0, 0, 0
}

func TestWorstGCRA(t *testing.T) {
	T := int64(10)
	if k, _, _ := worstGCRA([]int64{0, 0, 0, 10, 20, 30}, T, 3); k != 0 {
		t.Errorf("a burst of 3 then one per T: flagged %d", k)
	}
	if k, _, _ := worstGCRA([]int64{0, 0, 0, 0}, T, 3); k != 4 {
		t.Errorf("4 at once with burst 3: got k=%d, want 4", k)
	}
	if k, _, _ := worstGCRA([]int64{0, 10, 15, 20, 25}, T, 2); k == 0 {
		t.Errorf("5 in 25µs with burst 2 and T 10: not flagged")
	}
}

// TestCluster runs stacked decisions, pauses and cancels for many tags on
// a three-master Redis Cluster: every decision's keys share a slot (no
// CROSSSLOT), tags spread over all masters, and a SCRIPT FLUSH on every
// master is recovered from.
func TestCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t)
	cc := cl.Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, cc, clock)
	ctx := context.Background()
	peak := gcra("peak", 2, time.Second, 0)
	slow := gcra("slow", 100, time.Minute, 0)
	daily := window("daily", 1000, quota.Day, nil)
	const tags = 60
	reqFor := func(i int) quota.Request {
		tag := "tenant-" + strconv.Itoa(i)
		req := quota.Request{Tag: tag, Pauses: []string{quota.KeyOf("pause", "")}, Items: []quota.Item{
			{Limit: peak, Key: quota.KeyOf("peak", tag)},
			{Limit: slow, Key: quota.KeyOf("slow", "")},
			{Limit: daily, Key: quota.KeyOf("daily", tag)},
		}}
		return req
	}
	for i := 0; i < tags; i++ {
		req := reqFor(i)
		if i%3 == 0 {
			if err := st.Pause(ctx, req.Tag, "pause", time.Second); err != nil {
				t.Fatalf("Pause: %v", err)
			}
		}
		res := reserve(t, st, req, 1, 2*time.Second)
		wantWait := time.Duration(0)
		if i%3 == 0 {
			wantWait = time.Second
		}
		if !res.Allowed || res.Wait != wantWait {
			t.Fatalf("tag %d: %+v, want admitted after %v", i, res.Result, wantWait)
		}
	}
	var mu sync.Mutex
	var sizes []int64
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		n, err := node.DBSize(ctx).Result()
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
		if err != nil {
			return err
		}
		return node.ScriptFlush(ctx).Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) != 3 || slices.Contains(sizes, 0) {
		t.Errorf("keys per master %v, want keys on each of 3", sizes)
	}
	for i := 0; i < tags; i++ {
		req := reqFor(i)
		res := reserve(t, st, req, 1, 2*time.Second)
		if !res.Allowed || res.Limits[2].Remaining != 998 {
			t.Fatalf("tag %d, second decision after SCRIPT FLUSH: %+v", i, res.Result)
		}
		if res.Wait > 0 {
			if err := res.Cancel(ctx); err != nil {
				t.Fatalf("tag %d: Cancel: %v", i, err)
			}
		}
	}
}

// hostile are scope values an attacker or a broken header might send.
var hostile = []string{
	"", "{a}", "}{", "{", "}", "a:b", "a\nb", "\r\n*3\r\n$3\r\nDEL\r\n", "a b", "#x", "!pause:x",
	"\xff\xfe\xfd", "ü", strings.Repeat("x", 64), strings.Repeat("x", 65), strings.Repeat("{", 10<<10),
	strings.Repeat("\x00", 10<<10), "valid-scope_1.2@x+y=z/w",
}

// maxKeyLen is the longest key a store with prefix can make: a tag and a
// key, each at most quota.MaxKeyLen, in the longest namespace.
func maxKeyLen(prefix string) int {
	space := 0
	for _, s := range spaces {
		space = max(space, len(s))
	}
	return len(prefix) + len("{") + quota.MaxKeyLen + len("}:") + space + quota.MaxKeyLen
}

// checkKeys reads every key of prefix: it must be bounded, carry exactly
// one hash tag, and expire.
func checkKeys(t *testing.T, c *redis.Client, prefix string) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	batch := make([]string, 0, 1000)
	flush := func() {
		pipe := c.Pipeline()
		cmds := make([]*redis.DurationCmd, len(batch))
		for i, k := range batch {
			cmds[i] = pipe.PTTL(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for i, cmd := range cmds {
			if cmd.Val() <= 0 {
				t.Errorf("key %q has PTTL %v, want a TTL", batch[i], cmd.Val())
			}
		}
		batch = batch[:0]
	}
	for iter.Next(ctx) {
		k := iter.Val()
		n++
		if len(k) > maxKeyLen(prefix) {
			t.Errorf("key of %d bytes, bound %d: %.80q", len(k), maxKeyLen(prefix), k)
		}
		rest := strings.TrimPrefix(k, prefix)
		if strings.Count(rest, "{") != 1 || strings.Count(rest, "}") != 1 || !strings.HasPrefix(rest, "{") {
			t.Errorf("key %q does not hold exactly one leading hash tag", k)
		}
		if strings.ContainsAny(k, "\r\n\x00 ") {
			t.Errorf("key %q holds a control character or space", k)
		}
		batch = append(batch, k)
		if len(batch) == cap(batch) {
			flush()
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	flush()
	return n
}

// TestHostileScopes: untrusted values as tag, scope and pause key give
// distinct, safe, bounded keys that expire.
func TestHostileScopes(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	st := newStore(t, client, quotatest.NewClock(start))
	ctx := context.Background()
	one := gcra("one", 1, time.Hour, 1)
	n := 0
	for i, v := range hostile {
		// v as scope: in a fixed tag, distinct keys.
		req := quota.Request{Tag: "vendor", Items: []quota.Item{{Limit: one, Key: quota.KeyOf("one", v)}}}
		if res := reserve(t, st, req, 1, 0); !res.Allowed {
			t.Errorf("scope %d (%.20q): %+v: state shared with another scope", i, v, res.Result)
		}
		n++
		if v == "" {
			continue
		}
		// v as tag, raw item key and pause key.
		req = quota.Request{Tag: v, Pauses: []string{v}, Items: []quota.Item{{Limit: one, Key: v}}}
		if err := st.Pause(ctx, v, v, time.Minute); err != nil {
			t.Fatalf("Pause with %.20q: %v", v, err)
		}
		if res := reserve(t, st, req, 1, 2*time.Minute); !res.Allowed || res.Wait != time.Minute {
			t.Errorf("tag %d (%.20q): %+v, want admitted after the pause", i, v, res.Result)
		}
		n += 2
	}
	if got := checkKeys(t, client, st.prefix); got != n {
		t.Errorf("%d keys, want %d distinct", got, n)
	}
}

// distinctScopes is how many distinct scope values TestManyScopes sends:
// 50,000 in make test (a few seconds on 2 cores under -race); set
// THROTTLE_SCOPES=1000000 for the full million.
func distinctScopes(t *testing.T) int {
	if s := os.Getenv("THROTTLE_SCOPES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("THROTTLE_SCOPES=%q: want a positive integer", s)
		}
		return n
	}
	return 50000
}

// TestManyScopes: many distinct untrusted scope values give as many keys,
// each bounded and expiring, in bounded memory.
func TestManyScopes(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	st := newStore(t, client, nil)
	ctx := context.Background()
	n := distinctScopes(t)
	// Keys must outlive the check: 10 per hour keeps each for 6 minutes.
	peak := gcra("peak", 10, time.Hour, 0)
	const workers = 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += workers {
				// Every other value is unsafe, so both kept and hashed
				// scopes are exercised.
				scope := "tenant-" + strconv.Itoa(i)
				if i%2 == 1 {
					scope = "tenant\n{" + strconv.Itoa(i) + "}"
				}
				req := quota.Request{Tag: "vendor", Items: []quota.Item{{Limit: peak, Key: quota.KeyOf("peak", scope)}}}
				res, err := st.Reserve(ctx, &req)
				if err != nil {
					errs <- err
					return
				}
				if res.Limits[0].Remaining != 9 {
					errs <- fmt.Errorf("scope %q: remaining %d, want 9: state shared", scope, res.Limits[0].Remaining)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := checkKeys(t, client, st.prefix); got != n {
		t.Errorf("%d keys for %d distinct scopes", got, n)
	}
	info, err := client.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			used, _ := strconv.ParseInt(v, 10, 64)
			t.Logf("%d scopes: used_memory %d bytes, %d per key", n, used, used/int64(n))
			if used/int64(n) > 512 {
				t.Errorf("%d bytes per key: the keys are not bounded", used/int64(n))
			}
		}
	}
}
