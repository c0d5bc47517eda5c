package redisrate

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/providers"
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

// minGCRA is the least a one-limit decision can do in a round trip.
//
//go:embed mingcra.lua
var minGCRA string

// minStack is the least a decision of the 3-limit stack can do in a
// round trip.
//
//go:embed minstack.lua
var minStack string

// goroutines are the numbers of callers each case runs with.
var goroutines = []int{1, 8, 64}

// baseline is the case every other is compared with: one redis_rate Allow.
const baseline = "redis_rate/allow=1"

func request(limits ...*quota.Limit) quota.Request {
	req := quota.Request{Tag: "vendor"}
	for _, l := range limits {
		req.Items = append(req.Items, quota.Item{Limit: l, Key: quota.KeyOf(l.Name, "")})
	}
	return req
}

// figure is what one timed run of one case measured.
type figure struct {
	nsPerOp float64       // wall time per decision: the inverse of throughput
	p99     time.Duration // of the decisions' latencies
	redisUs float64       // µs Redis spent in EVALSHA/EVAL per decision
	calls   float64       // EVALSHA/EVAL calls per decision: round trips
	errs    int64         // failed or refused decisions
}

// figures keeps, per "case/goroutines=g", the figure of the last timed run
// of each round, for the table BenchmarkCompare prints.
var figures = map[string][]figure{}

// rounds is how many times BenchmarkCompare runs every case, interleaved.
var rounds = flag.Int("rounds", 3, "rounds of BenchmarkCompare: every case runs once per round")

// warm loads the scripts and opens g connections before the clock
// starts, so that no run times a storm of dials.
func warm(b *testing.B, g int, op func(ctx context.Context) error) {
	ctx := context.Background()
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
}

// run times op with g goroutines (1: a plain loop; more: RunParallel)
// and returns every decision's latency and the number of errors.
func run(b *testing.B, g int, op func(ctx context.Context) error) ([]time.Duration, int64) {
	ctx := context.Background()
	var failed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	if g == 1 {
		lat := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if op(ctx) != nil {
				failed.Add(1)
			}
			lat = append(lat, time.Since(t0))
		}
		return lat, failed.Load()
	}
	var mu sync.Mutex
	var lat []time.Duration
	b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			t0 := time.Now()
			if op(ctx) != nil {
				failed.Add(1)
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	return lat, failed.Load()
}

// BenchmarkCompare runs, on one redis-server in one run, interleaved at
// each number of goroutines (1, 8, 64):
//
//   - floor/noop-script: a script that returns 1 at once, through the
//     same client: what one round trip costs whatever the script, and so
//     the most any store that decides in one round trip can reach;
//   - floor/min-gcra: mingcra.lua, the least a GCRA decision can do in a
//     round trip (TIME, GET, SET), the most any one-limit store can reach;
//   - floor/min-stack: minstack.lua, the least a decision of the 3-limit
//     stack can do in a round trip (TIME, 2 GET, HGET, 2 SET, HINCRBY),
//     the most any store of that stack can reach when it decides in a
//     round trip of its own;
//   - floor/min-gcra-handoff: the same run on a goroutine the caller
//     stops waiting for at a timeout: the most any one-limit store that
//     bounds its calls on a client that ignores context deadlines (the
//     default client) can reach;
//   - throttle/limits=1 and throttle/limits=3: one Reserve of a stack of
//     1 GCRA limit, and of 2 GCRA limits and a daily calendar window, on
//     a default go-redis client (the store guards its timeout by handing
//     each call to one of its worker goroutines);
//   - throttle-ctxtimeout/…: the same on a client with
//     ContextTimeoutEnabled;
//   - throttle-ahead/limits=1: one request through a throttle.Transport
//     (to a no-op base transport) whose one limit takes quota ahead
//     (ahead: {period: 100ms}): most decisions are made from the slots
//     the process took ahead, with no round trip (issue 22);
//   - redis_rate/allow=1: one redis_rate Allow (one GCRA key);
//   - redis_rate/allow=3: three sequential Allows, the nearest redis_rate
//     comes to a stack of three (not atomic: a refusal by the third leaves
//     the first two charged).
//
// Each sub-benchmark reports p99-µs, redis-µs/op (Redis's time in
// EVALSHA/EVAL per decision), calls/op (round trips per decision) and
// errors; at the end it prints the medians over the rounds (-rounds,
// default 3) as ratios to redis_rate/allow=1 at the same number of
// goroutines.
func BenchmarkCompare(b *testing.B) {
	srv := redistest.Start(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	b.Cleanup(func() { _ = client.Close() })
	st, err := redisstore.New(client, redisstore.Options{Timeout: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	// The same store on a client that bounds its own reads by the
	// context's deadline, which spares the store the handoff to a worker.
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
				return fmt.Errorf("throttle refused: %+v", res.Result)
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
					return fmt.Errorf("redis_rate refused: %+v", res)
				}
			}
			return nil
		}
	}
	// The floors, through the same client: a script that does nothing
	// (no decision made in a round trip of its own is faster), the least
	// a GCRA decision can do (no one-limit store is faster) and the least
	// a decision of the 3-limit stack can do (no store of it is faster).
	noop, least, leastStack := redis.NewScript("return 1"), redis.NewScript(minGCRA), redis.NewScript(minStack)
	floor := func(ctx context.Context) error {
		return noop.Run(ctx, client, []string{"vendor:noop"}).Err()
	}
	minimal := func(ctx context.Context) error {
		return least.Run(ctx, client, []string{"vendor:min"}, 1, 1, 1_000_000).Err()
	}
	minimalStack := func(ctx context.Context) error {
		return leastStack.Run(ctx, client, []string{"vendor:min:peak", "vendor:min:minute", "vendor:min:daily"},
			1, 1, 1_000_000, 1, 60_000_000, 0, int64(1)<<40).Err()
	}
	// The same, bounded by a timeout on a client that does not stop a
	// call at the context's deadline (the default client): the call must
	// run on a goroutine other than the caller's, which stops waiting at
	// the deadline. This is the least such a bound costs: goroutines that
	// stay, an unbuffered channel to them and one back, no allocation but
	// the reply channel and the context.
	handoff := newHandoff(b)
	bounded := func(ctx context.Context) error {
		return handoff.do(ctx, 2*time.Second, minimal)
	}
	ahead := aheadTransport(b, st)
	aheadReq, err := http.NewRequest("GET", "https://api.vendor.test/v1/x", nil)
	if err != nil {
		b.Fatal(err)
	}
	viaAhead := func(ctx context.Context) error {
		_, err := ahead.RoundTrip(aheadReq.WithContext(ctx))
		return err
	}
	cases := []struct {
		name string
		op   func(ctx context.Context) error
	}{
		{"floor/noop-script", floor},
		{"floor/min-gcra", minimal},
		{"floor/min-stack", minimalStack},
		{"floor/min-gcra-handoff", bounded},
		{"throttle/limits=1", reserve(st, one)},
		{"throttle/limits=3", reserve(st, three)},
		{"throttle-ctxtimeout/limits=1", reserve(ctxSt, one)},
		{"throttle-ctxtimeout/limits=3", reserve(ctxSt, three)},
		{"throttle-ahead/limits=1", viaAhead},
		{baseline, allow(ratePeak)},
		{"redis_rate/allow=3", allow(ratePeak, rateMinute, rateDaily)},
	}
	stats := srv.Client(b)
	// Rounds interleave the cases (go test's -count would run each case
	// its count of times in a row), so that a load that comes and goes
	// on the machine weighs on every case alike.
	for range *rounds {
		for _, g := range goroutines {
			for _, c := range cases {
				name := c.name + "/goroutines=" + strconv.Itoa(g)
				b.Run(name, func(b *testing.B) {
					warm(b, g, c.op)
					before := scriptStats(b, stats)
					lat, errs := run(b, g, c.op)
					b.StopTimer()
					after := scriptStats(b, stats)
					n := float64(b.N)
					f := figure{
						nsPerOp: float64(b.Elapsed().Nanoseconds()) / n,
						p99:     percentile(lat, 0.99),
						// Time spent inside Redis running scripts, per
						// decision: what one Redis core can sustain, whatever
						// the client machine's load.
						redisUs: float64(after.usec-before.usec) / n,
						calls:   float64(after.calls-before.calls) / n,
						errs:    errs,
					}
					b.ReportMetric(float64(f.p99.Nanoseconds())/1e3, "p99-µs")
					b.ReportMetric(f.redisUs, "redis-µs/op")
					b.ReportMetric(f.calls, "calls/op")
					b.ReportMetric(float64(errs), "errors")
					// Each timed run starts with b.N = 1 and grows b.N to
					// fill -benchtime: the last run of a series counts.
					if b.N == 1 {
						figures[name] = append(figures[name], f)
					} else {
						figures[name][len(figures[name])-1] = f
					}
				})
			}
		}
	}
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.name
	}
	printRatios(os.Stdout, names)
}

// handoff runs calls on goroutines that stay, and stops waiting for one
// at its timeout: the least a timeout guard costs when the client does
// not stop a call itself.
type handoff struct{ jobs chan func() }

func newHandoff(b *testing.B) *handoff {
	h := &handoff{jobs: make(chan func())}
	stop := make(chan struct{})
	b.Cleanup(func() { close(stop) })
	for range 64 {
		go func() {
			for {
				select {
				case f := <-h.jobs:
					f()
				case <-stop:
					return
				}
			}
		}()
	}
	return h
}

func (h *handoff) do(ctx context.Context, timeout time.Duration, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	h.jobs <- func() { done <- op(context.WithoutCancel(ctx)) }
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// nopBase answers every request with one shared response: the
// throttle-ahead case times the throttle, not a network.
type nopBase struct{ resp *http.Response }

func (n nopBase) RoundTrip(*http.Request) (*http.Response, error) { return n.resp, nil }

// aheadTransport is a throttle.Transport on st whose one limit, as far
// above what Redis decides per second as the others, takes quota ahead.
func aheadTransport(b testing.TB, st *redisstore.Store) *throttle.Transport {
	cfg, err := providers.Load("ahead.yaml", []byte(`
providers:
  vendor:
    hosts: [api.vendor.test]
    on_limit: fail
    ahead: {period: 100ms}
    limits: [{name: peak, limit: 1000000/s, burst: 1000000000}]
`))
	if err != nil {
		b.Fatal(err)
	}
	tr, err := throttle.New(throttle.WithRegistry(providers.NewRegistry(cfg)), throttle.WithStore(st),
		throttle.WithBase(nopBase{&http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tr.Close() })
	return tr
}

// printRatios prints the medians of the figures (one per round)
// and each case's ratios to the baseline at the same number of
// goroutines: speed (baseline's µs/op over the case's: above 1 is
// faster) and p99 (the case's over the baseline's: above 1 is worse).
func printRatios(w io.Writer, names []string) {
	fmt.Fprintf(w, "\nmedians of %d run(s); speed = %s µs/op ÷ case µs/op (>1 faster), p99 ratio = case ÷ %s (>1 worse)\n",
		len(figures[baseline+"/goroutines=1"]), baseline, baseline)
	fmt.Fprintf(w, "%-30s %3s %9s %6s %8s %6s %12s %13s %9s %6s\n",
		"case", "g", "µs/op", "speed", "p99 µs", "p99×", "redis µs/op", "redis µs/call", "calls/op", "errors")
	for _, g := range goroutines {
		base := median(figures[baseline+"/goroutines="+strconv.Itoa(g)])
		for _, name := range names {
			f := median(figures[name+"/goroutines="+strconv.Itoa(g)])
			perCall := 0.0
			if f.calls > 0 {
				perCall = f.redisUs / f.calls
			}
			fmt.Fprintf(w, "%-30s %3d %9.1f %6.2f %8.1f %6.2f %12.1f %13.1f %9.2f %6d\n",
				name, g, f.nsPerOp/1e3, base.nsPerOp/f.nsPerOp,
				float64(f.p99.Nanoseconds())/1e3, float64(f.p99)/float64(base.p99),
				f.redisUs, perCall, f.calls, f.errs)
		}
	}
}

// median returns the field-wise median of fs (errors: the sum).
func median(fs []figure) figure {
	pick := func(get func(figure) float64) float64 {
		v := make([]float64, len(fs))
		for i, f := range fs {
			v[i] = get(f)
		}
		slices.Sort(v)
		if len(v) == 0 {
			return 0
		}
		return v[len(v)/2]
	}
	var m figure
	m.nsPerOp = pick(func(f figure) float64 { return f.nsPerOp })
	m.p99 = time.Duration(pick(func(f figure) float64 { return float64(f.p99) }))
	m.redisUs = pick(func(f figure) float64 { return f.redisUs })
	m.calls = pick(func(f figure) float64 { return f.calls })
	for _, f := range fs {
		m.errs += f.errs
	}
	return m
}

// percentile returns the p-quantile of lat (sorting it).
func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[min(len(lat)-1, int(float64(len(lat))*p))]
}

// scriptCounts are INFO commandstats' totals for EVALSHA and EVAL.
type scriptCounts struct{ calls, usec int64 }

// scriptStats reads from INFO commandstats the calls of EVALSHA and EVAL
// and the total µs Redis spent in them.
func scriptStats(b *testing.B, c *redis.Client) scriptCounts {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total scriptCounts
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, f := range strings.Split(line[strings.IndexByte(line, ':')+1:], ",") {
			k, v, _ := strings.Cut(f, "=")
			if k != "usec" && k != "calls" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatalf("commandstats %q: %v", line, err)
			}
			if k == "usec" {
				total.usec += n
			} else {
				total.calls += n
			}
		}
	}
	return total
}
