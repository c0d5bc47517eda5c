package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime"
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

// benchStacks are admitted on every call (their rates are far above what
// one redis-server decides per second), so the benchmarks time the
// admitting path, which writes.
func benchStacks() map[string]quota.Request {
	peak := gcra("peak", 1_000_000, time.Second, 0)
	minute := gcra("minute", 60_000_000, time.Minute, 0)
	daily := window("daily", 1<<40, quota.Day, nil)
	// A tenant's request of a provider tagged per tenant: its own pause,
	// and with "over" the provider's, one more key in the same MGET.
	tenant := stack("vendor:acme", peak)
	tenant.Pauses = []string{"pause:acme"}
	over := tenant
	over.Over = quota.PauseKey{Tag: "vendor", Key: "pause"}
	return map[string]quota.Request{
		"limits=1":             stack("vendor", peak),
		"limits=3":             stack("vendor", peak, minute, daily),
		"limits=1/tenant":      tenant,
		"limits=1/tenant+over": over,
	}
}

// BenchmarkReserve times one decision on a real redis-server on loopback,
// with 1 and 64 goroutines sharing one client (pool of 64 connections).
//
//	go test -run '^$' -bench Reserve -benchmem ./quota/redisstore/
func BenchmarkReserve(b *testing.B) {
	srv := redistest.Start(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	b.Cleanup(func() { _ = client.Close() })
	// A generous timeout: on a loaded 2-core machine 64 goroutines can
	// wait long for the CPU, which is no failure of the store.
	st, err := New(client, Options{Timeout: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	stacks := benchStacks()
	for _, name := range []string{"limits=1", "limits=3", "limits=1/tenant", "limits=1/tenant+over"} {
		req := stacks[name]
		for _, g := range []int{1, 64} {
			b.Run(name+"/goroutines="+strconv.Itoa(g), func(b *testing.B) {
				// Load the script and open g connections before the clock
				// starts, so that no run times a storm of dials.
				var wg sync.WaitGroup
				for i := 0; i < g; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := req
						if _, err := st.Reserve(ctx, &r); err != nil {
							b.Error(err)
						}
					}()
				}
				wg.Wait()
				b.ReportAllocs()
				b.ResetTimer()
				if g == 1 {
					for i := 0; i < b.N; i++ {
						if res, err := st.Reserve(ctx, &req); err != nil || !res.Allowed {
							b.Fatalf("Reserve: %v, %v", res, err)
						}
					}
					return
				}
				b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					r := req
					for pb.Next() {
						if res, err := st.Reserve(ctx, &r); err != nil || !res.Allowed {
							b.Errorf("Reserve: %v, %v", res, err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkKeysAndArgs times what Reserve does in Go before the round
// trip, for a three-limit stack with an unsafe scope value.
func BenchmarkKeysAndArgs(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	b.Cleanup(func() { _ = client.Close() })
	st, err := New(client, Options{})
	if err != nil {
		b.Fatal(err)
	}
	req := benchStacks()["limits=3"]
	req.Items[1].Key = quota.KeyOf("minute", "tenant\n{42}")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = st.keys(&req)
	}
}

// BenchmarkCancelHoles times the worst single cancel.lua call when
// waiters on one key (1000/s burst 1) are all cancelled in arrival order
// behind a live one, then the newest: the time Redis is blocked for, as
// no other command runs meanwhile. Each op is one such run. ns/op is the
// newest waiter's cancel as the client sees it (a round trip on
// loopback); worst-server-µs the slowest cancel of the run as
// redis-server's SLOWLOG measured it (the script alone, which a loaded
// client machine does not inflate, but a busy one can still stop the
// server mid-call), and the median call; holes the holes set's members
// before the newest cancels.
//
//	go test -run '^$' -bench CancelHoles -benchtime 1x -count 3 ./quota/redisstore/
func BenchmarkCancelHoles(b *testing.B) {
	srv := redistest.Start(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 16})
	b.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	for _, n := range []int{10_000, 100_000} {
		b.Run("waiters="+strconv.Itoa(n), func(b *testing.B) {
			var calls []time.Duration // every cancel, server side
			var holes int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				// A clock that does not move: no slot passes while the
				// waiters queue up (100,000 of them span 100 s).
				st, err := New(client, Options{Prefix: uniquePrefix(), Clock: quotatest.NewClock(start), Timeout: 10 * time.Second})
				if err != nil {
					b.Fatal(err)
				}
				req := stack("p", gcra("g", 1000, time.Second, 1))
				req.MaxWait = time.Hour
				waiters := make([]*quota.Reservation, n)
				var wg sync.WaitGroup
				for g := 0; g < 16; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := req
						for j := g; j < n; j += 16 {
							res, err := st.Reserve(ctx, &r)
							if err != nil || !res.Allowed {
								b.Errorf("Reserve: %v, %v", res, err)
								return
							}
							waiters[j] = res
						}
					}()
				}
				wg.Wait()
				if b.Failed() {
					return
				}
				slices.SortFunc(waiters, func(x, y *quota.Reservation) int { return cmp.Compare(x.Wait, y.Wait) })
				// Log every command from here on: the cancels.
				if err := client.ConfigSet(ctx, "slowlog-max-len", strconv.Itoa(n+16)).Err(); err != nil {
					b.Fatal(err)
				}
				client.ConfigSet(ctx, "slowlog-log-slower-than", "0")
				client.SlowLogReset(ctx)
				for _, w := range waiters[1 : n-1] { // the first goes at once
					if err := w.Cancel(ctx); err != nil {
						b.Fatal(err)
					}
				}
				holes = max(holes, client.ZCard(ctx, st.prefix+"{p}:!cancelled:g").Val())
				b.StartTimer()
				if err := waiters[n-1].Cancel(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				client.ConfigSet(ctx, "slowlog-log-slower-than", "-1")
				logged, err := client.SlowLogGet(ctx, int64(n+16)).Result()
				if err != nil {
					b.Fatal(err)
				}
				for _, l := range logged {
					if len(l.Args) > 0 && strings.EqualFold(l.Args[0], "evalsha") {
						calls = append(calls, l.Duration)
					}
				}
			}
			slices.Sort(calls)
			b.ReportMetric(float64(calls[len(calls)/2].Microseconds()), "median-server-µs")
			b.ReportMetric(float64(calls[len(calls)-1].Microseconds()), "worst-server-µs")
			b.ReportMetric(float64(holes), "holes")
		})
	}
}

// BenchmarkFairTenantsMemory measures what an active tenant of a Fair
// limit costs Redis: its member in the active set (a ZSET), its field in
// the weights (a HASH) and its lane (a string key with a TTL). 10^5
// tenants (a value like "acct_100000000000001", weight 1, as
// quota.BenchmarkMemoryStoreFairTenants has them) each make one decision
// on one Fair limit, on a stopped clock. B/tenant is MEMORY USAGE
// (SAMPLES 0: every element counted) of the set, the weights and every
// lane, divided by the tenants, and set-, weights- and lane-B/tenant
// each of the three; used-B/tenant is the growth of the server's
// used_memory, which counts the keyspace's own tables too (a lane's
// entries in the keys' and the expiries' tables). median-server-µs is
// the median script time, by SLOWLOG, of the last 1000 decisions, with
// the set full; plain-server-µs that of 1000 decisions of a plain GCRA
// limit interleaved with them, for scale on a machine whose load
// inflates both. FAIR_TENANTS sets another number of tenants.
//
//	go test -run '^$' -bench FairTenantsMemory -benchtime 1x ./quota/redisstore/
func BenchmarkFairTenantsMemory(b *testing.B) {
	tenants := 100_000
	if v, err := strconv.Atoi(os.Getenv("FAIR_TENANTS")); err == nil {
		tenants = v
	}
	srv := redistest.Start(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 16})
	b.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	l := &quota.Limit{Name: "shared", Kind: quota.GCRA, Rate: 1_000_000, Period: time.Second, Fair: true}
	usedMemory := func() int64 {
		info := client.Info(ctx, "memory").Val()
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		b.Fatal("no used_memory in INFO memory")
		return 0
	}
	var per, set, weights, lane, used float64
	var median, plainMedian time.Duration
	plain := stack("p", gcra("plain", 1_000_000, time.Second, 0))
	for range b.N {
		st, err := New(client, Options{Prefix: uniquePrefix(), Clock: quotatest.NewClock(start), Timeout: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		reserve := func(i int) {
			req := quota.Request{Tag: "p", Items: []quota.Item{{Limit: l, Key: "shared"}},
				Share: quota.Share{Key: "acct_" + strconv.FormatInt(1e14+int64(i), 10)}}
			if res, err := st.Reserve(ctx, &req); err != nil || !res.Allowed {
				b.Errorf("Reserve: %v, %v", res, err)
			}
		}
		reserve(-1) // loads the script
		base := usedMemory()
		const g = 16
		var wg sync.WaitGroup
		for w := range g {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < tenants-1000 && !b.Failed(); i += g {
					reserve(i)
				}
			}()
		}
		wg.Wait()
		client.ConfigSet(ctx, "slowlog-max-len", "2100")
		client.ConfigSet(ctx, "slowlog-log-slower-than", "0")
		client.SlowLogReset(ctx)
		for i := tenants - 1000; i < tenants; i++ {
			reserve(i)
			r := plain
			if _, err := st.Reserve(ctx, &r); err != nil {
				b.Fatal(err)
			}
		}
		client.ConfigSet(ctx, "slowlog-log-slower-than", "-1")
		if b.Failed() {
			return
		}
		var calls, plainCalls []time.Duration
		for _, lg := range client.SlowLogGet(ctx, 2100).Val() {
			if len(lg.Args) < 4 || !strings.EqualFold(lg.Args[0], "evalsha") {
				continue
			}
			if n, _ := strconv.Atoi(lg.Args[2]); n > 1 { // KEYS: the Fair item's and its three
				calls = append(calls, lg.Duration)
			} else {
				plainCalls = append(plainCalls, lg.Duration)
			}
		}
		slices.Sort(calls)
		slices.Sort(plainCalls)
		median, plainMedian = calls[len(calls)/2], plainCalls[len(plainCalls)/2]
		used = float64(usedMemory()-base) / float64(tenants)
		item := st.Key("p", "shared")
		setB := client.MemoryUsage(ctx, st.companion(item, KeyFairSet), 0).Val()
		weightsB := client.MemoryUsage(ctx, st.companion(item, KeyFairWeights), 0).Val()
		if n := client.ZCard(ctx, st.companion(item, KeyFairSet)).Val(); n != int64(tenants)+1 {
			b.Fatalf("%d tenants in the active set, want %d", n, tenants+1)
		}
		pipe := client.Pipeline()
		lanes := make([]*redis.IntCmd, tenants)
		for i := range lanes {
			lanes[i] = pipe.MemoryUsage(ctx, st.FairLaneKey("p", "shared", "acct_"+strconv.FormatInt(1e14+int64(i), 10)), 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		var lanesB int64
		for _, c := range lanes {
			lanesB += c.Val()
		}
		n := float64(tenants)
		per, set, weights, lane = float64(setB+weightsB+lanesB)/n, float64(setB)/n, float64(weightsB)/n, float64(lanesB)/n
	}
	b.ReportMetric(per, "B/tenant")
	b.ReportMetric(set, "set-B/tenant")
	b.ReportMetric(weights, "weights-B/tenant")
	b.ReportMetric(lane, "lane-B/tenant")
	b.ReportMetric(used, "used-B/tenant")
	b.ReportMetric(float64(median.Microseconds()), "median-server-µs")
	b.ReportMetric(float64(plainMedian.Microseconds()), "plain-server-µs")
}

// BenchmarkLoneScript measures what one lone decision costs Redis itself
// with lone.lua and with reserve.lua (the path it replaces), on the same
// server, in alternating rounds: each round sends the same 1-GCRA (and
// 2-GCRA, and 2-GCRA with a daily window: bench/redisrate's 3-limit
// stack) decision, pipelined 20 at a time so that the round trip does
// not count, and reads redis-server's own time per call (INFO
// commandstats, usec_per_call of EVALSHA, after CONFIG RESETSTAT). It
// reports the medians over the rounds. With run=m a call holds m
// decisions of the stack, as coalescing sends a busy process's: a run
// for lone.lua, a batch of m requests for reserve.lua.
//
//	go test -run '^$' -bench LoneScript -benchtime 20000x ./quota/redisstore/
func BenchmarkLoneScript(b *testing.B) {
	srv := redistest.Start(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { _ = client.Close() })
	st, err := New(client, Options{Timeout: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"limits=1", "limits=2", "limits=3"} {
		req := stack("vendor", gcra("peak", 1_000_000, time.Second, 0))
		switch name {
		case "limits=2":
			req = stack("vendor", gcra("peak", 1_000_000, time.Second, 0), gcra("minute", 60_000_000, time.Minute, 0))
		case "limits=3":
			req = stack("vendor", gcra("peak", 1_000_000, time.Second, 0), gcra("minute", 60_000_000, time.Minute, 0),
				window("daily", 1<<40, quota.Day, nil))
		}
		keys, x := st.extraKeys(&req, st.keys(&req))
		c, _ := st.reserveArgs(&req, len(keys)-len(req.Items)-x.keys, x, nil)
		for _, m := range []int{1, 4, 16} {
			var batch []*pending
			for range m {
				batch = append(batch, &pending{keys: keys, args: c.args, lone: true})
			}
			loneArgs := append([]any{"", 0, m}, loneArgs(batch)[3:]...)
			var batchKeys []string
			batchArgs := []any{"", 0, m}
			for range m {
				batchKeys = append(batchKeys, keys...)
				batchArgs = append(batchArgs, c.args[3:]...)
			}
			b.Run(fmt.Sprintf("%s/run=%d", name, m), func(b *testing.B) {
				benchScripts(b, client, batchKeys, batchArgs, keys, loneArgs)
			})
		}
	}
}

// benchScripts times, in Redis, reserve.lua on keys and args and lone.lua
// on loneKeys and loneArgs, in alternating rounds (BenchmarkLoneScript).
func benchScripts(b *testing.B, client *redis.Client, keys []string, args []any, loneKeys []string, loneArgs []any) {
	ctx := context.Background()
	perCall := map[string][]float64{}
	for round := 0; round < 7; round++ {
		for _, sc := range []struct {
			name string
			s    *redis.Script
			keys []string
			args []any
		}{{"reserve.lua", reserveScript, keys, args}, {"lone.lua", loneScript, loneKeys, loneArgs}} {
			if err := sc.s.Load(ctx, client).Err(); err != nil {
				b.Fatal(err)
			}
			if err := client.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i += 20 {
				pipe := client.Pipeline()
				for j := 0; j < 20; j++ {
					sc.s.EvalSha(ctx, pipe, sc.keys, sc.args...)
				}
				if _, err := pipe.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
			perCall[sc.name] = append(perCall[sc.name], evalshaUsec(b, client))
		}
	}
	for _, s := range []string{"reserve.lua", "lone.lua"} {
		slices.Sort(perCall[s])
		b.ReportMetric(perCall[s][len(perCall[s])/2], s+"-µs/call")
	}
}

// evalshaUsec reads EVALSHA's usec_per_call from INFO commandstats.
func evalshaUsec(b *testing.B, client *redis.Client) float64 {
	x, ok := evalshaStat(b, client, "usec_per_call")
	if !ok {
		b.Fatal("no cmdstat_evalsha")
	}
	return x
}

// evalshaStat reads field (usec, usec_per_call, calls) of EVALSHA's
// line of INFO commandstats; false when Redis has run no EVALSHA yet.
func evalshaStat(b *testing.B, client *redis.Client, field string) (float64, bool) {
	b.Helper()
	info, err := client.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, field+"="); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				return x, true
			}
		}
	}
	return 0, false
}
