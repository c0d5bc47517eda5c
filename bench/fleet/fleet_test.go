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
		st := newStackState([]Limit{l})
		all := true
		for _, a := range ts {
			if ok, _ := st.decide(a, "", 1); !ok {
				all = false
				break
			}
		}
		if over := gcraOvershoot(ts, l.interval(), l.Burst); (over == 0) != all {
			t.Fatalf("trial %d: overshoot %d but vendor served all: %v", trial, over, all)
		}
	}
}

func TestDayWindow(t *testing.T) {
	t.Parallel()
	l := Limit{Name: "daily", Kind: KindDay, Rate: 2}
	st := newStackState([]Limit{l})
	day := int64(24 * time.Hour)
	base := 20000 * day
	for i, c := range []struct {
		at   int64
		want bool
	}{{base + 1, true}, {base + 2, true}, {base + 3, false}, {base + day - 1, false}, {base + day, true}} {
		if ok, _ := st.decide(c.at, "", 1); ok != c.want {
			t.Errorf("request %d: admitted %v, want %v", i, ok, c.want)
		}
	}
	if e := st.earliest(base+5, "", 1); e != base+day {
		t.Errorf("earliest = %d, want the next day's start %d", e, base+day)
	}
}

func TestLeakyBucket(t *testing.T) {
	t.Parallel()
	l := Limit{Name: "bucket", Kind: KindLeaky, Rate: 2, Burst: 3}
	st := newStackState([]Limit{l})
	s := int64(time.Second)
	base := int64(1e18)
	for i, c := range []struct {
		at   int64
		want bool
	}{{base, true}, {base, true}, {base, true}, {base, false}, {base + s/2, true}, {base + s/2, false}, {base + 2*s, true}, {base + 2*s, true}, {base + 2*s, true}} {
		if ok, _ := st.decide(c.at, "", 1); ok != c.want {
			t.Errorf("request %d: admitted %v, want %v", i, ok, c.want)
		}
	}
}

// TestWindowVendor: a fixed window admits its count per window of Unix
// time, all of it back at the reset, and publishes what remains of it and
// when it resets.
func TestWindowVendor(t *testing.T) {
	t.Parallel()
	l := Limit{Name: "core", Kind: KindWindow, Rate: 2, Period: 2 * time.Second, Counters: true}
	st := newStackState([]Limit{l})
	s := int64(time.Second)
	base := int64(1e18) // a multiple of 2 s: a window starts there
	for i, c := range []struct {
		at        int64
		want      bool
		remaining int64
	}{{base, true, 1}, {base + s, true, 0}, {base + s + s/2, false, 0}, {base + 2*s, true, 1}, {base + 3*s, true, 0}} {
		if ok, _ := st.decide(c.at, "", 1); ok != c.want {
			t.Errorf("request %d: admitted %v, want %v", i, ok, c.want)
		}
		limit, rem, reset, ok := st.counter(c.at, "")
		if wantReset := base + (c.at-base)/(2*s)*2*s + 2*s; !ok || limit != 2 || rem != c.remaining || reset != wantReset {
			t.Errorf("request %d: counter %d, %d left, reset %d, %v; want 2, %d, %d, true", i, limit, rem, reset, ok, c.remaining, wantReset)
		}
	}
	if _, wait := st.decide(base+3*s+s/2, "", 1); wait != s/2 {
		t.Errorf("refused with wait %v, want the %v to the window's end", time.Duration(wait), time.Duration(s/2))
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
	arrivals := []Arrival{{At: base, OK: true}, {At: base + 1, OK: true}, {At: base + 2, OK: false}, // window 0: 3 of the fleet
		{At: base + s, OK: true}, {At: base + s + 1, OK: false}} // window 1: 2 of the fleet
	other := []Phantom{{At: base + 3}, {At: base + s + 2}, {At: base + s + 3}, {At: base + s + 4}, {At: base + s + 5}}
	lf := overshootWindow(l, arrivals, other)
	// Window 0: 3 + 1 - 3 = 1. Window 1: 2 + 4 - 3 = 3, at most the fleet's 2.
	if lf.Overshoot != 2 || lf.MaxWindow != 6 || lf.Allowed != 3 || lf.Most429 != 1 {
		t.Errorf("got overshoot %d, max %d / %d, most 429 %d; want 2, 6 / 3, 1", lf.Overshoot, lf.MaxWindow, lf.Allowed, lf.Most429)
	}
}

// TestRollingVendor: at most Rate in any trailing Period, exactly: a
// request is admitted once the oldest of the last Rate has left the
// period, not a moment sooner.
func TestRollingVendor(t *testing.T) {
	t.Parallel()
	l := Limit{Name: "api", Kind: KindRolling, Rate: 2, Period: 2 * time.Second}
	st := newStackState([]Limit{l})
	s := int64(time.Second)
	base := int64(1e18) + 123
	for i, c := range []struct {
		at   int64
		want bool
	}{{base, true}, {base + s, true}, {base + 2*s - 1, false}, {base + 2*s, true}, {base + 3*s - 1, false}, {base + 3*s, true}} {
		if ok, _ := st.decide(c.at, "", 1); ok != c.want {
			t.Errorf("request %d at +%v: admitted %v, want %v", i, time.Duration(c.at-base), ok, c.want)
		}
	}
	if _, wait := st.decide(base+3*s+s/2, "", 1); wait != s/2 {
		t.Errorf("refused with wait %v, want 0.5s (until the one at +2s leaves)", time.Duration(wait))
	}
	lf := overshoot(l, []Arrival{{At: base}, {At: base + s}, {At: base + 2*s - 1}, {At: base + 2*s}})
	if lf.Overshoot != 1 || lf.MaxWindow != 3 || lf.Allowed != 2 {
		t.Errorf("overshoot %d, max %d / %d; want 1, 3 / 2", lf.Overshoot, lf.MaxWindow, lf.Allowed)
	}
}

// TestConcurrentVendor: the live vendor holds a place from a request's
// arrival until done; the ideal client's leave Period after arriving;
// the overshoot counts a refused arrival beyond the cap.
func TestConcurrentVendor(t *testing.T) {
	t.Parallel()
	l := Limit{Name: "streams", Kind: KindConcurrent, Rate: 2, Period: 100 * time.Millisecond}
	ms := int64(time.Millisecond)
	live := newStackState([]Limit{l})
	live.live = true
	if ok, _ := live.decide(0, "", 1); !ok {
		t.Fatal("first request refused")
	}
	live.decide(1, "", 1)
	if ok, _ := live.decide(500*ms, "", 1); ok {
		t.Error("third request admitted while two are served (the live vendor's requests never end by themselves)")
	}
	live.done(600*ms, "")
	if ok, _ := live.decide(600*ms, "", 1); !ok {
		t.Error("request refused after one ended")
	}
	ideal := newStackState([]Limit{l})
	ideal.decide(0, "", 1)
	ideal.decide(ms, "", 1)
	if ok, wait := ideal.decide(50*ms, "", 1); ok || wait != 50*ms {
		t.Errorf("ideal: admitted %v, wait %v; want refused for 50ms", ok, time.Duration(wait))
	}
	if ok, _ := ideal.decide(100*ms, "", 1); !ok {
		t.Error("ideal: refused once the first left")
	}
	arrivals := []Arrival{{At: 0, Done: 100 * ms, OK: true}, {At: ms, Done: 101 * ms, OK: true}, {At: 50 * ms, OK: false}, {At: 100 * ms, Done: 200 * ms, OK: true}}
	if lf := overshootConcurrent(l, arrivals); lf.Overshoot != 1 || lf.MaxWindow != 2 {
		t.Errorf("overshoot %d, most in flight %d; want 1 (the refused arrival), 2", lf.Overshoot, lf.MaxWindow)
	}
	arrivals[2].OK, arrivals[2].Done = true, 60*ms
	if lf := overshootConcurrent(l, arrivals); lf.Overshoot != 1 || lf.MaxWindow != 3 {
		t.Errorf("overshoot %d, most in flight %d; want 1, 3", lf.Overshoot, lf.MaxWindow)
	}
}

// TestCostsVendor: a GCRA of tokens charges each request its actual
// cost; overshootCosts is gcraOvershoot with costs, and actualCost stays
// within a fifth of the estimate and all of it.
func TestCostsVendor(t *testing.T) {
	t.Parallel()
	l := Limit{Name: "tokens", Kind: KindGCRA, Rate: 100, Period: time.Second, Burst: 10} // 10 ms a token
	st := newStackState([]Limit{l})
	if ok, _ := st.decide(0, "", 10); !ok {
		t.Fatal("a request of the whole burst refused from idle")
	}
	if ok, wait := st.decide(0, "", 5); ok || wait != int64(50*time.Millisecond) {
		t.Errorf("admitted %v, wait %v; want refused for 50ms", ok, time.Duration(wait))
	}
	ms := int64(time.Millisecond)
	conform := []Arrival{{At: 0, Cost: 10}, {At: 50 * ms, Cost: 5}, {At: 100 * ms, Cost: 5}}
	if lf := overshootCosts(l, conform); lf.Overshoot != 0 {
		t.Errorf("conforming arrivals: overshoot %d, want 0", lf.Overshoot)
	}
	if lf := overshootCosts(l, append(conform, Arrival{At: 100 * ms, Cost: 3})); lf.Overshoot != 3 {
		t.Errorf("3 tokens too many: overshoot %d, want 3", lf.Overshoot)
	}
	ones := []int64{0, 5 * ms, 6 * ms, 30 * ms, 31 * ms}
	var as []Arrival
	for _, a := range ones {
		as = append(as, Arrival{At: a, Cost: 1})
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
		if f.ScriptsPerDecision < 1 {
			t.Errorf("%s: %.2f script calls per decision, want at least 1 (every decision is a round trip)", r.Scenario.Name, f.ScriptsPerDecision)
		}
		if f.Kind != "rolling" && f.AfterPerRequest == 0 {
			t.Errorf("%s: no after-calls counted (release or settle)", r.Scenario.Name)
		}
	}
}
