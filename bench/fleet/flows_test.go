package fleet

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/throttletest"
)

func scenarioNamed(t *testing.T, d time.Duration, name string) Scenario {
	t.Helper()
	for _, sc := range Scenarios(d) {
		if sc.Name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %q", name)
	return Scenario{}
}

// TestFlowIntents: a flow's requests are evenly spaced fleet-wide within
// its part of the run, the processes taking turns, and the flows of a
// scenario are offset from each other.
func TestFlowIntents(t *testing.T) {
	t.Parallel()
	sc := &Scenario{Duration: 2 * time.Second, Flows: []Flow{
		{Name: "a", Rate: 4},
		{Name: "b", Rate: 2, From: time.Second},
	}}
	start := time.Unix(1000, 0)
	ms := func(in Intent) int64 { return (in.At - start.UnixNano()) / int64(time.Millisecond) }
	var got [2][]int64
	for p := 0; p < 2; p++ {
		for _, in := range flowIntents(sc, p, 2, start) {
			if in.Business != sc.Flows[in.Flow].Name {
				t.Fatalf("intent of flow %d names business %q", in.Flow, in.Business)
			}
			got[in.Flow] = append(got[in.Flow], ms(in))
		}
	}
	// Flow a: every 250 ms, process 0 the even ones; flow b: every 500 ms
	// from 1 s, shifted by half of its spacing (flow 1 of 2).
	wantA := []int64{0, 500, 1000, 1500, 250, 750, 1250, 1750}
	wantB := []int64{1250, 1750}
	if len(got[0]) != len(wantA) || len(got[1]) != len(wantB) {
		t.Fatalf("intents %v, want %v and %v", got, wantA, wantB)
	}
	for i := range wantA {
		if got[0][i] != wantA[i] {
			t.Fatalf("flow a: %v, want %v", got[0], wantA)
		}
	}
	for i := range wantB {
		if got[1][i] != wantB[i] {
			t.Fatalf("flow b: %v, want %v", got[1], wantB)
		}
	}
}

// TestMaxMin: the weighted max-min allocation gives a light flow what it
// asks and divides the rest by weight.
func TestMaxMin(t *testing.T) {
	t.Parallel()
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	asks, ws := []float64{2000}, []float64{1}
	for i := 0; i < 20; i++ {
		asks, ws = append(asks, 2), append(ws, 1)
	}
	got := maxMin(100, asks, ws)
	if !near(got[0], 60) || !near(got[1], 2) || !near(got[20], 2) {
		t.Errorf("noisy and light: %v, want 60 and 2 each", got)
	}
	got = maxMin(100, []float64{200, 200, 200}, []float64{1, 2, 4})
	if !near(got[0], 100.0/7) || !near(got[1], 200.0/7) || !near(got[2], 400.0/7) {
		t.Errorf("weights 1, 2, 4: %v, want 100/7, 200/7, 400/7", got)
	}
	got = maxMin(100, []float64{10, 200}, []float64{1, 4})
	if !near(got[0], 10) || !near(got[1], 90) {
		t.Errorf("a light flow of weight 1 next to a heavy one of 4: %v, want 10, 90", got)
	}
}

// TestScaledClock: the compressed clock starts at its start and its
// timers last a k-th of their duration. No speed is asserted: only that
// it is not behind.
func TestScaledClock(t *testing.T) {
	t.Parallel()
	r0 := time.Now().Add(-time.Second)
	v0 := virtualStart(r0)
	c := scaledClock{r0: r0, v0: v0, k: 120}
	if got := c.Now().Sub(v0); got < 2*time.Minute {
		t.Errorf("a second after its start the clock is %v past it, want at least 2m", got)
	}
	if got := c.real(time.Hour); got != 30*time.Second {
		t.Errorf("an hour on the clock is %v of real time, want 30s", got)
	}
	if v0.Minute() != 0 || v0.Second() != 0 || v0.Nanosecond() != 0 || v0.After(r0) {
		t.Errorf("virtual start %v: want the calendar hour of %v", v0, r0)
	}
}

// TestFlowConfigs: the configuration of each scenario with flows loads,
// with its classes, pace and weights for throttle and none of them for
// throttle-fcfs.
func TestFlowConfigs(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"priority", "daily-pacing", "noisy-tenant"} {
		sc := scenarioNamed(t, 4*time.Second, name)
		for _, fcfs := range []bool{false, true} {
			yaml := throttleConfig(&sc, sc.Configured(), "127.0.0.1:9", 0, true, fcfs, 0)
			if sc.needsFair() && !fcfs {
				if !strings.Contains(yaml, "fair: tenant") || !strings.Contains(yaml, "weight4: {weight: 4}") ||
					!strings.Contains(yaml, "tenants: {weight2: weight2, weight4: weight4}") {
					t.Errorf("%s: no fair share or plans in\n%s", name, yaml)
				}
			}
			cfg, err := providers.Load("bench.yaml", []byte(yaml))
			if err != nil {
				t.Errorf("%s (fcfs %v): %v\n%s", name, fcfs, err, yaml)
				continue
			}
			p := cfg.Providers()[0]
			q := p.Limits[0].Quota
			switch {
			case fcfs && (q.Reserve != nil || q.Pace || strings.Contains(yaml, "priority") || strings.Contains(yaml, "plans")):
				t.Errorf("%s: throttle-fcfs keeps classes, pace or plans:\n%s", name, yaml)
			case !fcfs && name == "priority" && (len(q.Reserve) != 1 || q.Reserve[0] != 2000):
				t.Errorf("priority: reserve %v, want [2000]", q.Reserve)
			case !fcfs && name == "daily-pacing" && (!q.Pace || q.PaceReserve != 1000 || q.Kind != quota.Window || q.Rate != sc.Vendor[0].Rate):
				t.Errorf("daily-pacing: %+v, want a paced window of %d with a reserve of 1000 bp", *q, sc.Vendor[0].Rate)
			}
			if name == "daily-pacing" && p.MaxWait != time.Minute {
				t.Errorf("daily-pacing: max wait %v, want one compressed minute", p.MaxWait)
			}
		}
	}
}

// served is an arrival the vendor served at off into a run started at
// start, of flow name.
func served(start int64, off time.Duration, name string) throttletest.Arrival {
	return throttletest.Arrival{At: time.Unix(0, start+int64(off)), Scope: name}
}

// TestFlowSummaryPriority: the top class's waits are checked against one
// slot interval plus its own queue, and batch's share is of what the top
// class left.
func TestFlowSummaryPriority(t *testing.T) {
	t.Parallel()
	sc := scenarioNamed(t, time.Second, "priority")
	start := int64(1e18)
	r := &RunResult{Scenario: sc, Limits: sc.Configured(), Algo: AlgoThrottle, Start: start, End: start + int64(sc.Duration)}
	ms := int64(time.Millisecond)
	// Interactive: two at once (the second queues 0: the lane's burst is
	// 3), one waiting 9 ms (within 10 ms), one 25 ms (beyond), one refused.
	for i, w := range []int64{0, 0, 9 * ms, 25 * ms, -1} {
		at := start + int64(i/2)*300*ms
		r.Intents = append(r.Intents, Intent{At: at, Flow: 0})
		out := OutSent
		if w < 0 {
			out = OutRefused
		}
		r.Records = append(r.Records, Record{Flow: 0, At: at, Out: out, Wait: w})
	}
	for i := 0; i < 10; i++ {
		at := start + int64(i)*ms
		r.Intents = append(r.Intents, Intent{At: at, Flow: 1})
		r.Records = append(r.Records, Record{Flow: 1, At: at, Out: OutSent, Wait: 0})
	}
	f := Figures{Ideal: 16, Decisions: 15}
	fs := flowSummary(r, &f)
	if fs.Top != "interactive" || fs.TopAdmitted != 4 || fs.TopRefused != 1 || fs.TopWithin != 3 {
		t.Errorf("top %q: admitted %d, refused %d, within %d; want interactive, 4, 1, 3", fs.Top, fs.TopAdmitted, fs.TopRefused, fs.TopWithin)
	}
	if fs.Interval != 10*time.Millisecond || fs.Lane != "20/s burst 3" {
		t.Errorf("interval %v, lane %q; want 10ms, 20/s burst 3", fs.Interval, fs.Lane)
	}
	if want := 10.0 / 12; math.Abs(fs.LowerOfLeft-want) > 1e-9 {
		t.Errorf("batch of what interactive left: %v, want 10/12", fs.LowerOfLeft)
	}
	if len(fs.Phases) != 1 || len(fs.Phases[0].Flows) != 2 || fs.Phases[0].Flows[0].Admitted != 4 {
		t.Errorf("phases %+v: want one, of two flows, interactive admitted 4", fs.Phases)
	}
}

// TestOwnQueue: the own queue is a GCRA of the lane over the class's
// requests alone.
func TestOwnQueue(t *testing.T) {
	t.Parallel()
	sc := &Scenario{Flows: []Flow{{Name: "i", Class: "i"}}}
	ms := int64(time.Millisecond)
	r := &RunResult{Scenario: *sc}
	for _, at := range []int64{0, 0, 0, 10, 500} {
		r.Intents = append(r.Intents, Intent{At: at * ms})
	}
	lane := quota.Limit{Kind: quota.GCRA, Rate: 20, Period: time.Second, Burst: 2} // 50 ms, burst 2
	q := ownQueue(r, "i", lane)
	// At 0: two at once, the third at 50 ms; the one at 10 at 100 ms;
	// the one at 500 at once. The map is by intent: the last at 0 wins.
	if q[0] != 50*time.Millisecond || q[10*ms] != 90*time.Millisecond || q[500*ms] != 0 {
		t.Errorf("own queue %v", q)
	}
}

// TestFlowSummaryHour: a compressed hour's figures on the compressed
// clock: the quota used, when it ran out, the last admission, the longest
// gap.
func TestFlowSummaryHour(t *testing.T) {
	t.Parallel()
	sc := scenarioNamed(t, 4*time.Second, "daily-pacing") // the hour in 30 s: 120×, quota 3000
	start := int64(1e18)
	r := &RunResult{Scenario: sc, Algo: AlgoThrottleFCFS, Start: start, End: start + int64(sc.Duration)}
	q := sc.Vendor[0].Rate
	step := 10 * time.Second / time.Duration(q) // the quota spent in the hour's first 20 minutes
	for i := int64(0); i < q; i++ {
		r.Arrivals = append(r.Arrivals, served(start, step*time.Duration(i+1), "batch"))
	}
	r.Arrivals = append(r.Arrivals, served(start, 30*time.Second+time.Second, "batch")) // the next hour
	fs := flowSummary(r, &Figures{})
	if fs.WindowServed != q || fs.QuotaUsed != 1 || fs.SpentAt != 20*time.Minute || fs.LastAdmission != 20*time.Minute ||
		fs.ToReset != 40*time.Minute || fs.LongestGap != 40*time.Minute || fs.GapFrom != 20*time.Minute {
		t.Errorf("hour figures: served %d, used %v, spent at %v, last %v (%v before the reset), gap %v from %v; "+
			"want %d, 1, 20m, 20m (40m), 40m from 20m", fs.WindowServed, fs.QuotaUsed, fs.SpentAt, fs.LastAdmission, fs.ToReset,
			fs.LongestGap, fs.GapFrom, q)
	}
	over := overshootWindow(sc.Vendor[0], shifted(r.Arrivals, -r.hourShift()), nil)
	if over.Overshoot != 0 || over.MaxWindow != q {
		t.Errorf("overshoot %d, max %d: want 0, %d (the last arrival is in the next hour)", over.Overshoot, over.MaxWindow, q)
	}
}

// TestFlowSummaryTenants: per phase, a tenant's share is of what the
// phase admitted; a heavy tenant is judged by its share against its
// weighted share, a light one by what it got of what it asked; the
// light tenants are reported as one group.
func TestFlowSummaryTenants(t *testing.T) {
	t.Parallel()
	sc := scenarioNamed(t, time.Second, "noisy-tenant")
	d := 4 * time.Second // a phase of noisy-tenant is 4 runs long
	start := int64(1e18)
	r := &RunResult{Scenario: sc, Algo: AlgoThrottle, Start: start, End: start + int64(sc.Duration)}
	add := func(flow int, off time.Duration, out string) {
		r.Records = append(r.Records, Record{Flow: flow, At: start + int64(off), Out: out, Wait: 0})
	}
	// Phase 2: noisy 60 admitted, each light 2 of 2; phase 3: 10, 20, 40.
	for i := 0; i < 60; i++ {
		add(0, d+time.Duration(i)*time.Millisecond, OutSent)
	}
	for j := 1; j <= 20; j++ {
		add(j, d+time.Duration(j)*time.Millisecond, OutSent)
		add(j, d+500*time.Millisecond, OutSent)
	}
	for j, n := range []int{10, 20, 40} {
		for i := 0; i < n; i++ {
			add(21+j, 2*d+time.Duration(i)*time.Millisecond, OutSent)
		}
		add(21+j, 2*d+time.Duration(n)*time.Millisecond, OutRefused)
	}
	fs := flowSummary(r, &Figures{Decisions: 1})
	if len(fs.Phases) != 3 {
		t.Fatalf("%d phases, want 3", len(fs.Phases))
	}
	p2 := fs.Phases[1]
	if len(p2.Flows) != 2 || p2.Flows[1].Flow != "light" || p2.Flows[1].Members != 20 || p2.Flows[1].MinGot != 1 {
		t.Errorf("phase 2 flows %+v: want noisy and the light group of 20, each light given all it asked", p2.Flows)
	}
	if math.Abs(p2.Flows[0].MaxMin-0.6) > 1e-9 || math.Abs(p2.Flows[0].Weighted-1.0/21) > 1e-9 {
		t.Errorf("noisy in phase 2: max-min %v, weighted %v; want 0.6, 1/21", p2.Flows[0].MaxMin, p2.Flows[0].Weighted)
	}
	if !fs.HasLight || fs.MinLightGot != 1 || math.Abs(fs.MinHeavyRatio-1) > 1e-9 {
		t.Errorf("lowest light got %v, lowest heavy ratio %v: want 1 and 1 (10:20:40 is the weights' 1:2:4)", fs.MinLightGot, fs.MinHeavyRatio)
	}
}

// TestFlowReport writes the report of synthetic runs of the three
// scenarios: their summary, tables and plots.
func TestFlowReport(t *testing.T) {
	t.Parallel()
	var runs []*RunResult
	start := int64(1e18)
	for _, name := range []string{"priority", "daily-pacing", "noisy-tenant"} {
		sc := scenarioNamed(t, time.Second, name)
		for _, algo := range []string{AlgoThrottle, AlgoThrottleFCFS} {
			r := &RunResult{Scenario: sc, Limits: sc.Configured(), Algo: algo, Start: start, End: start + int64(sc.Duration), Outcomes: map[string]int64{}}
			for j, f := range sc.Flows {
				at := start + int64(f.From) + int64(j)
				r.Intents = append(r.Intents, Intent{At: at, Business: f.Name, Flow: j})
				r.Records = append(r.Records, Record{Flow: j, At: at, Out: OutSent, Wait: int64(j)})
				r.Arrivals = append(r.Arrivals, throttletest.Arrival{At: time.Unix(0, at), Scope: f.Name})
			}
			runs = append(runs, r)
		}
	}
	dir := t.TempDir()
	if err := WriteReport(dir, runs, Meta{Command: "`go test`", Began: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**priority**", "**daily-pacing**", "**noisy-tenant**", "| throttle-fcfs | 1: 0s–2s", "light (20 tenants)",
		"priority-flows.svg", "quota used in the hour"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("REPORT.md lacks %q", want)
		}
	}
	for _, name := range []string{"priority-flows.svg", "daily-pacing-flows.svg", "noisy-tenant-flows.svg"} {
		if s, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !strings.HasSuffix(string(s), "</svg>\n") {
			t.Errorf("%s: %v, %d bytes", name, err, len(s))
		}
	}
}

// TestFlowScenarios runs the three scenarios briefly, with real workers
// and a real redis-server, and checks that every flow was offered and
// measured, not the figures (they depend on the machine).
func TestFlowScenarios(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not in PATH: run `make redis` at the repository root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var runs []*RunResult
	for _, o := range []struct {
		d     time.Duration
		names []string
	}{{time.Second, []string{"priority", "noisy-tenant"}}, {500 * time.Millisecond, []string{"daily-pacing"}}} {
		rs, err := Run(ctx, Options{Duration: o.d, Processes: 2, Goroutines: 8, Scenarios: o.names, Exe: os.Args[0]})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, rs...)
	}
	if len(runs) != 6 {
		t.Fatalf("got %d runs, want 6", len(runs))
	}
	for _, r := range runs {
		f := Analyze(r)
		name := r.Scenario.Name + " / " + r.Algo
		// The workers offered exactly the flows' schedule (they read
		// the scenario from their spec).
		var planned int64
		for p := 0; p < 2; p++ {
			planned += int64(len(flowIntents(&r.Scenario, p, 2, time.Unix(0, r.Start))))
		}
		if f.Intents != planned {
			t.Errorf("%s: %d intents, want the %d of the flows' schedule", name, f.Intents, planned)
		}
		if f.Flows == nil || int64(len(r.Records)) != f.Intents || f.Served == 0 {
			t.Errorf("%s: %d records of %d intents, served %d: want a record per intent and some served", name, len(r.Records), f.Intents, f.Served)
			continue
		}
		for _, ph := range f.Flows.Phases {
			for _, ff := range ph.Flows {
				if ff.Offered == 0 {
					t.Errorf("%s: flow %s offered nothing in phase %v–%v", name, ff.Flow, ph.From, ph.To)
				}
			}
		}
		if r.Scenario.Name == "daily-pacing" && (f.Flows.Quota == 0 || f.Flows.WindowServed == 0 || r.Virtual.IsZero()) {
			t.Errorf("%s: quota %d, served in the hour %d, clock start %v: want all set", name, f.Flows.Quota, f.Flows.WindowServed, r.Virtual)
		}
		// (Whether the top class was admitted depends on free goroutines:
		// 8 a process, which batch's waiters may hold.)
		if r.Scenario.Name == "priority" && (f.Flows.Top != "interactive" || f.Flows.Lane != "20/s burst 3") {
			t.Errorf("%s: top class %q, lane %q: want interactive's figures, its lane 20/s burst 3", name, f.Flows.Top, f.Flows.Lane)
		}
	}
}
