package redisrate

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/redisstore"
)

// The limits are far above what one redis-server decides per second, so
// every call admits and writes: both libraries are timed on the same path.
var (
	peak   = &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 1_000_000, Period: time.Second}
	minute = &quota.Limit{Name: "minute", Kind: quota.GCRA, Rate: 60_000_000, Period: time.Minute}
	daily  = &quota.Limit{Name: "daily", Kind: quota.Window, Rate: 1 << 40, Calendar: quota.Calendar{Unit: quota.Day}}

	ratePeak   = redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Second}
	rateMinute = redis_rate.Limit{Rate: 60_000_000, Burst: 60_000_000, Period: time.Minute}
	// redis_rate has no calendar window; a third GCRA stands in for it.
	rateDaily = redis_rate.Limit{Rate: 1 << 40, Burst: 1 << 40, Period: 24 * time.Hour}
)

func request(limits ...*quota.Limit) quota.Request {
	req := quota.Request{Tag: "vendor"}
	for _, l := range limits {
		req.Items = append(req.Items, quota.Item{Limit: l, Key: quota.KeyOf(l.Name, "")})
	}
	return req
}

// run times op with 1 goroutine, or with g goroutines through RunParallel.
func run(b *testing.B, g int, op func(ctx context.Context) error) {
	ctx := context.Background()
	// Load the scripts and open g connections before the clock starts,
	// so that no run times a storm of dials.
	var wg sync.WaitGroup
	errs := make(chan error, g)
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- op(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	if g == 1 {
		for i := 0; i < b.N; i++ {
			if err := op(ctx); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCompare runs, on one redis-server in one run:
//
//   - throttle/limits=1 and throttle/limits=3: one Reserve of a stack of
//     1 GCRA limit, and of 2 GCRA limits and a daily calendar window;
//   - redis_rate/allow=1: one redis_rate Allow (one GCRA key);
//   - redis_rate/allow=3: three sequential Allows, the nearest redis_rate
//     comes to a stack of three (not atomic: a refusal by the third leaves
//     the first two charged).
func BenchmarkCompare(b *testing.B) {
	srv := redistest.Start(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	b.Cleanup(func() { _ = client.Close() })
	st, err := redisstore.New(client, redisstore.Options{Timeout: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	// The same store on a client that bounds its own reads by the
	// context's deadline, which spares the store a goroutine per call.
	ctxClient := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = ctxClient.Close() })
	ctxSt, err := redisstore.New(ctxClient, redisstore.Options{Timeout: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	limiter := redis_rate.NewLimiter(client)
	one, three := request(peak), request(peak, minute, daily)
	reserve := func(st *redisstore.Store, req quota.Request) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			r := req
			res, err := st.Reserve(ctx, &r)
			if err == nil && !res.Allowed {
				b.Fatalf("throttle refused: %+v", res.Result)
			}
			return err
		}
	}
	allow := func(limits ...redis_rate.Limit) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			for i, l := range limits {
				res, err := limiter.Allow(ctx, "vendor:"+strconv.Itoa(i), l)
				if err != nil {
					return err
				}
				if res.Allowed == 0 {
					b.Fatalf("redis_rate refused: %+v", res)
				}
			}
			return nil
		}
	}
	cases := []struct {
		name string
		op   func(ctx context.Context) error
	}{
		{"throttle/limits=1", reserve(st, one)},
		{"throttle/limits=3", reserve(st, three)},
		{"throttle-ctxtimeout/limits=1", reserve(ctxSt, one)},
		{"throttle-ctxtimeout/limits=3", reserve(ctxSt, three)},
		{"redis_rate/allow=1", allow(ratePeak)},
		{"redis_rate/allow=3", allow(ratePeak, rateMinute, rateDaily)},
	}
	stats := srv.Client(b)
	for _, g := range []int{1, 64} {
		for _, c := range cases {
			b.Run(c.name+"/goroutines="+strconv.Itoa(g), func(b *testing.B) {
				before := scriptTime(b, stats)
				run(b, g, c.op)
				b.StopTimer()
				after := scriptTime(b, stats)
				// Time spent inside Redis running scripts, per operation:
				// what one Redis core can sustain, whatever the client
				// machine's load.
				b.ReportMetric(float64(after-before)/float64(b.N), "redis-µs/op")
			})
		}
	}
}

// scriptTime reads from INFO commandstats the total µs Redis spent in
// EVALSHA and EVAL.
func scriptTime(b *testing.B, c *redis.Client) int64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, f := range strings.Split(line[strings.IndexByte(line, ':')+1:], ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					b.Fatalf("commandstats %q: %v", line, err)
				}
				total += n
			}
		}
	}
	return total
}
