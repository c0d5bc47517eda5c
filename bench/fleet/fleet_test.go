package fleet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/throttletest"
)

// TestMain lets the test binary serve as the harness's worker processes,
// as the fleetbench binary does.
func TestMain(m *testing.M) {
	if os.Getenv(WorkerEnv) != "" {
		if err := RunWorker(); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestEndToEnd runs one short scenario with throttle and one alternative,
// with real worker processes and a real redis-server, and writes the
// report: the harness must not rot silently. It checks that the run
// measured something, not the figures, which depend on the machine.
func TestEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not in PATH: run `make redis` at the repository root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runs, err := Run(ctx, Options{
		Duration: 2 * time.Second, Processes: 2, Goroutines: 8,
		Scenarios: []string{"steady"}, Algorithms: []string{AlgoThrottle, AlgoLocalRate},
		Exe: os.Args[0],
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("got %d runs, want 2", len(runs))
	}
	for _, r := range runs {
		f := Analyze(r)
		if f.Intents == 0 || f.Served == 0 || f.Ideal == 0 || len(r.Latencies) == 0 {
			t.Errorf("%s: intents %d, served %d, ideal %d, %d latencies: want all above 0",
				r.Algo, f.Intents, f.Served, f.Ideal, len(r.Latencies))
		}
		if f.Served > f.Ideal+int64(r.Scenario.Vendor[0].Burst) {
			t.Errorf("%s: served %d, more than the ideal %d: the vendor or the ideal is wrong", r.Algo, f.Served, f.Ideal)
		}
		if r.Algo == AlgoThrottle && f.CmdsSent == 0 {
			t.Errorf("throttle: no Redis commands counted")
		}
	}
	dir := t.TempDir()
	if err := WriteReport(dir, runs, Meta{Command: "`go test`", Began: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"REPORT.md", "steady-rate.svg", "steady-latency.svg", "summary.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v, %d bytes", name, err, len(b))
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "REPORT.md")); !strings.Contains(string(b), "| throttle |") {
		t.Errorf("REPORT.md has no throttle row")
	}
}

// TestSharedAccountScenario runs the shared-account scenario briefly with
// throttle (sync) and checks that the window vendor, the other client and
// the window figures were measured, not the figures themselves.
func TestSharedAccountScenario(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not in PATH: run `make redis` at the repository root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runs, err := Run(ctx, Options{
		Duration: 2 * time.Second, Processes: 2, Goroutines: 8,
		Scenarios: []string{"shared-account"}, Algorithms: []string{AlgoThrottle},
		Exe: os.Args[0],
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("got %d runs, want 1", len(runs))
	}
	f := Analyze(runs[0])
	if f.Served == 0 || f.Ideal == 0 || len(runs[0].Phantoms) == 0 {
		t.Errorf("served %d, ideal %d, %d requests of the other client: want all above 0", f.Served, f.Ideal, len(runs[0].Phantoms))
	}
	if lf := f.Limits[0]; lf.Allowed != 400 || lf.MaxWindow == 0 {
		t.Errorf("window figures %+v: want allowed 400 and a window counted", lf)
	}
	dir := t.TempDir()
	if err := WriteReport(dir, runs, Meta{Command: "`go test`", Began: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "REPORT.md")); !strings.Contains(string(b), "429 in one window") {
		t.Errorf("REPORT.md has no per-window 429 figure")
	}
}

// TestFarRedisScenario runs far-redis-1000 briefly, Redis behind the
// delaying proxy, with throttle and throttle-ahead, and checks that the
// far-redis figures were measured (added latency, Redis commands per
// request) and that taking ahead took batches (fewer commands per
// request than decisions alone), not the figures themselves.
func TestFarRedisScenario(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not in PATH: run `make redis` at the repository root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runs, err := Run(ctx, Options{
		Duration: 2 * time.Second, Processes: 2, Goroutines: 8,
		Scenarios: []string{"far-redis-1000"}, Exe: os.Args[0],
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Algo != AlgoThrottle || runs[1].Algo != AlgoThrottleAhead {
		t.Fatalf("got %d runs, want throttle and throttle-ahead", len(runs))
	}
	plain, ahead := Analyze(runs[0]), Analyze(runs[1])
	for _, f := range []Figures{plain, ahead} {
		if f.Served == 0 || f.AddedP50 == 0 || f.CommandsPerRequest == 0 || f.Overshoot != 0 {
			t.Errorf("%s: served %d, added p50 %v, %.3f commands per request, overshoot %d: want figures, and no overshoot",
				f.Algo, f.Served, f.AddedP50, f.CommandsPerRequest, f.Overshoot)
		}
	}
	// Plain decisions through a 40 ms round trip share calls (about two
	// in flight per process); a batch serves several requests.
	if ahead.CommandsPerRequest >= plain.CommandsPerRequest {
		t.Errorf("taking ahead: %.3f commands per request, plain %.3f: want fewer", ahead.CommandsPerRequest, plain.CommandsPerRequest)
	}
	dir := t.TempDir()
	if err := WriteReport(dir, runs, Meta{Command: "`go test`", Began: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "REPORT.md")); !strings.Contains(string(b), "| far-redis-1000 | throttle-ahead |") {
		t.Errorf("REPORT.md has no far-redis row")
	}
}

// TestProxyScenario runs the proxy scenario briefly, with a real
// "throttle proxy" process built from this checkout, and writes its
// report section. It checks that both paths were measured, not the
// figures.
func TestProxyScenario(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not in PATH: run `make redis` at the repository root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := RunProxy(ctx, ProxyOptions{Duration: 300 * time.Millisecond, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []PathResult{r.Direct, r.Proxy} {
		if p.Requests == 0 || p.P50 <= 0 || p.P99 < p.P50 || p.RPS <= 0 || p.Errors != 0 {
			t.Errorf("path figures %+v: want requests, latencies and a rate, no errors", p)
		}
	}
	if r.ProxyCPU <= 0 {
		t.Errorf("proxy CPU per request %v, want above 0", r.ProxyCPU)
	}
	dir := t.TempDir()
	if err := WriteReport(dir, nil, Meta{Command: "`go test`", Began: time.Now(), Proxy: r}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "REPORT.md")); !strings.Contains(string(b), "added by the proxy") {
		t.Errorf("REPORT.md has no proxy section:\n%s", b)
	}
}

func TestGCRAOvershoot(t *testing.T) {
	t.Parallel()
	const T = int64(10 * time.Millisecond)
	at := func(ms ...int64) []int64 {
		out := make([]int64, len(ms))
		for i, m := range ms {
			out[i] = m * int64(time.Millisecond)
		}
		return out
	}
	tests := []struct {
		name  string
		ts    []int64
		burst int64
		want  int64
	}{
		{"none", nil, 3, 0},
		{"a burst at once", at(0, 0, 0), 3, 0},
		{"one past the burst", at(0, 0, 0, 0), 3, 1},
		{"burst then the rate", at(0, 0, 0, 10, 20, 30), 3, 0},
		{"burst then one early", at(0, 0, 0, 9), 3, 1},
		{"two fast at the end", at(0, 100, 200, 205, 205), 2, 1},
		{"sustained twice the rate", at(0, 5, 10, 15, 20, 25, 30, 35, 40), 1, 4},
	}
	for _, tt := range tests {
		if got := gcraOvershoot(tt.ts, T, tt.burst); got != tt.want {
			t.Errorf("%s: gcraOvershoot = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestOvershootAgreesWithVendor: an arrival sequence has overshoot 0
// exactly when the vendor's own GCRA, starting idle, serves all of it.
func TestOvershootAgreesWithVendor(t *testing.T) {
	t.Parallel()
	l := Limit{Name: "peak", Kind: KindGCRA, Rate: 100, Period: time.Second, Burst: 5}
	seed := uint64(1)
	next := func() int64 { // xorshift: deterministic
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return int64(seed % uint64(12*time.Millisecond))
	}
	for trial := 0; trial < 300; trial++ {
		var ts []int64
		now := int64(1e18)
		for i := 0; i < 40; i++ {
			now += next()
			ts = append(ts, now)
		}
		st := throttletest.NewLedger(enforcer([]Limit{l}))
		all := true
		for _, a := range ts {
			if ok, _ := st.Admit(time.Unix(0, a), "", 1); !ok {
				all = false
				break
			}
		}
		if over := gcraOvershoot(ts, l.interval(), l.Burst); (over == 0) != all {
			t.Fatalf("trial %d: overshoot %d but vendor served all: %v", trial, over, all)
		}
	}
}

// arrival is an admitted arrival at ns since the epoch.
func arrival(at int64) throttletest.Arrival { return throttletest.Arrival{At: time.Unix(0, at)} }

// TestVendorStack: the scenario's vendor enforces each limit per business
// or for all, and advertises the counted limit's counters, whatever its
// place in the stack, under the counter name throttle's sync maps.
func TestVendorStack(t *testing.T) {
	t.Parallel()
	limits := []Limit{
		{Name: "business", Kind: KindGCRA, Rate: 1, Period: time.Hour, Burst: 1, PerBusiness: true},
		{Name: "daily", Kind: KindDay, Rate: 2, Counters: true},
	}
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	l := throttletest.NewLedger(enforcer(limits))
	var got []bool
	for _, biz := range []string{"a", "a", "b", "c"} { // a's own limit, then the shared day's
		ok, _ := l.Admit(at, biz, 1)
		got = append(got, ok)
	}
	if fmt.Sprint(got) != "[true false true false]" {
		t.Errorf("admitted %v, want [true false true false]", got)
	}

	v := startVendor(limits, nil, 0, 0, 0)
	defer v.Close()
	resp, err := v.Client().Get(v.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if lim, rem := resp.Header.Get("X-RateLimit-Limit"), resp.Header.Get("X-RateLimit-Remaining"); lim != "2" || rem != "1" {
		t.Errorf("counters: limit %q, remaining %q; want the daily quota's 2, 1", lim, rem)
	}
	// throttle syncs to the counter the vendor names.
	cfg := throttleConfig(&Scenario{}, limits, v.Host(), 0, true, false, 0)
	if name := resp.Header.Get("X-RateLimit-Resource"); !strings.Contains(cfg, "counters: {"+name+": daily}") {
		t.Errorf("the vendor names its counter %q; throttle's configuration maps another:\n%s", name, cfg)
	}
}

// TestOvershootWindow: the other client's requests count first; the
// fleet is charged what both sent beyond the window's count, at most what
// it sent itself.
func TestOvershootWindow(t *testing.T) {
	t.Parallel()
	l := Limit{Name: "core", Kind: KindWindow, Rate: 3, Period: time.Second}
	s := int64(time.Second)
	base := int64(1e18)
	refused := func(at int64) throttletest.Arrival {
		a := arrival(at)
		a.Throttled = true
		return a
	}
	arrivals := []throttletest.Arrival{arrival(base), arrival(base + 1), refused(base + 2), // window 0: 3 of the fleet
		arrival(base + s), refused(base + s + 1)} // window 1: 2 of the fleet
	var other []throttletest.Other
	for _, at := range []int64{base + 3, base + s + 2, base + s + 3, base + s + 4, base + s + 5} {
		other = append(other, throttletest.Other{At: time.Unix(0, at)})
	}
	lf := overshootWindow(l, arrivals, other)
	// Window 0: 3 + 1 - 3 = 1. Window 1: 2 + 4 - 3 = 3, at most the fleet's 2.
	if lf.Overshoot != 2 || lf.MaxWindow != 6 || lf.Allowed != 3 || lf.Most429 != 1 {
		t.Errorf("got overshoot %d, max %d / %d, most 429 %d; want 2, 6 / 3, 1", lf.Overshoot, lf.MaxWindow, lf.Allowed, lf.Most429)
	}
}

// TestOvershootRolling: a rolling limit's overshoot is the most arrivals
// beyond Rate in any trailing Period.
func TestOvershootRolling(t *testing.T) {
	t.Parallel()
	l := Limit{Name: "api", Kind: KindRolling, Rate: 2, Period: 2 * time.Second}
	s := int64(time.Second)
	base := int64(1e18) + 123
	lf := overshoot(l, []throttletest.Arrival{arrival(base), arrival(base + s), arrival(base + 2*s - 1), arrival(base + 2*s)})
	if lf.Overshoot != 1 || lf.MaxWindow != 3 || lf.Allowed != 2 {
		t.Errorf("overshoot %d, max %d / %d; want 1, 3 / 2", lf.Overshoot, lf.MaxWindow, lf.Allowed)
	}
}

// TestOvershootConcurrent: the overshoot counts a refused arrival beyond
// the cap, and an admitted one is in flight until its response was
// written.
func TestOvershootConcurrent(t *testing.T) {
	t.Parallel()
	l := Limit{Name: "streams", Kind: KindConcurrent, Rate: 2, Period: 100 * time.Millisecond}
	ms := int64(time.Millisecond)
	served := func(at, done int64) throttletest.Arrival {
		a := arrival(at)
		a.Done = time.Unix(0, done)
		return a
	}
	arrivals := []throttletest.Arrival{served(0, 100*ms), served(ms, 101*ms), arrival(50 * ms), served(100*ms, 200*ms)}
	arrivals[2].Throttled = true
	if lf := overshootConcurrent(l, arrivals); lf.Overshoot != 1 || lf.MaxWindow != 2 {
		t.Errorf("overshoot %d, most in flight %d; want 1 (the refused arrival), 2", lf.Overshoot, lf.MaxWindow)
	}
	arrivals[2] = served(50*ms, 60*ms)
	if lf := overshootConcurrent(l, arrivals); lf.Overshoot != 1 || lf.MaxWindow != 3 {
		t.Errorf("overshoot %d, most in flight %d; want 1, 3", lf.Overshoot, lf.MaxWindow)
	}
}

// TestOvershootCosts: overshootCosts is gcraOvershoot with costs, and
// actualCost stays within a fifth of the estimate and all of it.
func TestOvershootCosts(t *testing.T) {
	t.Parallel()
	l := Limit{Name: "tokens", Kind: KindGCRA, Rate: 100, Period: time.Second, Burst: 10} // 10 ms a token
	ms := int64(time.Millisecond)
	costing := func(at, c int64) throttletest.Arrival {
		a := arrival(at)
		a.Cost = c
		return a
	}
	conform := []throttletest.Arrival{costing(0, 10), costing(50*ms, 5), costing(100*ms, 5)}
	if lf := overshootCosts(l, conform); lf.Overshoot != 0 {
		t.Errorf("conforming arrivals: overshoot %d, want 0", lf.Overshoot)
	}
	if lf := overshootCosts(l, append(conform, costing(100*ms, 3))); lf.Overshoot != 3 {
		t.Errorf("3 tokens too many: overshoot %d, want 3", lf.Overshoot)
	}
	ones := []int64{0, 5 * ms, 6 * ms, 30 * ms, 31 * ms}
	var as []throttletest.Arrival
	for _, a := range ones {
		as = append(as, costing(a, 1))
	}
	if got, want := overshootCosts(Limit{Kind: KindGCRA, Rate: 100, Period: time.Second, Burst: 2}, as).Overshoot, gcraOvershoot(ones, 10*ms, 2); got != want {
		t.Errorf("costs of 1: overshoot %d, gcraOvershoot says %d", got, want)
	}
	for at := int64(0); at < 1000; at++ {
		if c := actualCost(100, at*7919); c < 20 || c > 100 {
			t.Fatalf("actualCost(100, %d) = %d, want 20..100", at*7919, c)
		}
	}
}

// TestKindScenarios runs the scenarios of the quota kinds briefly with
// throttle and checks that each kind's figures were measured, and that
// the vendor never counted more requests in flight than the cap: a lease
// spans the vendor's count, so that holds whatever the machine's speed
// (the other kinds' overshoot depends on arrival lag, not checked here).
func TestKindScenarios(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not in PATH: run `make redis` at the repository root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runs, err := Run(ctx, Options{
		Duration: 2 * time.Second, Processes: 2, Goroutines: 8,
		Scenarios: []string{"concurrency", "settled", "rolling"}, Exe: os.Args[0],
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Fatalf("got %d runs, want 3", len(runs))
	}
	for _, r := range runs {
		f := Analyze(r)
		if f.Kind == "" || f.KindUtilization <= 0 || f.Served == 0 {
			t.Errorf("%s: kind %q, utilization %v, served %d: want a kind's figures", r.Scenario.Name, f.Kind, f.KindUtilization, f.Served)
		}
		if f.Kind == "concurrency" && f.Overshoot != 0 {
			t.Errorf("%s: overshoot %d, want 0", r.Scenario.Name, f.Overshoot)
		}
		// At most one round trip a decision; fewer when the store
		// coalesced concurrent decisions of one tag into one call (a
		// GCRA stack, as settled's, under load).
		if f.ScriptsPerDecision <= 0 || f.ScriptsPerDecision > 1.001 {
			t.Errorf("%s: %.2f script calls per decision, want above 0 and at most 1 (a decision is one round trip, or shares one)", r.Scenario.Name, f.ScriptsPerDecision)
		}
		if f.Kind != "rolling" && f.AfterPerRequest == 0 {
			t.Errorf("%s: no after-calls counted (release or settle)", r.Scenario.Name)
		}
	}
}
