package fleet

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// The scenarios of issues 20 (priority classes, pacing) and 21 (fair
// share): their load is made of flows, each of one priority class or one
// tenant, and each is run with throttle as configured and with
// throttle-fcfs, the same limits first come first served, as the
// baseline of the same run.

// A Flow is one stream of a scenario's offered load: the requests of one
// priority class or of one tenant, evenly spaced at a steady rate
// between two offsets into the run.
type Flow struct {
	// Name names the flow in the report. It is also the X-Business
	// header the vendor records as the arrival's scope, so the analysis
	// tells the flows apart at the vendor too (no scenario with flows
	// has a limit per business).
	Name string `json:"name"`
	// Class is the priority class its requests name
	// (throttle.WithPriority); empty: none.
	Class string `json:"class,omitempty"`
	// Tenant is the business its requests are for
	// (throttle.WithBusiness), the tenant of a fair share; empty: none.
	Tenant string `json:"tenant,omitempty"`
	// Weight is the fair-share weight of the tenant's plan; zero means 1.
	Weight int `json:"weight,omitempty"`
	// Rate is the flow's requests per second, fleet-wide, from From to
	// To (To zero: the run's end).
	Rate float64       `json:"rate"`
	From time.Duration `json:"from,omitempty"`
	To   time.Duration `json:"to,omitempty"`
}

func (f *Flow) weight() int { return max(f.Weight, 1) }

// end is the flow's end in a run of length d.
func (f *Flow) end(d time.Duration) time.Duration {
	if f.To <= 0 || f.To > d {
		return d
	}
	return f.To
}

// shareLimit is the limit that priority and noisy-tenant share among
// classes and tenants: 100/s, burst 20 (burst 18 configured, after the
// 20 ms arrival-jitter allowance).
func shareLimit(name string) Limit {
	return Limit{Name: name, Kind: KindGCRA, Rate: 100, Period: time.Second, Burst: 20}
}

func priorityScenario(d time.Duration) Scenario {
	return Scenario{
		Name: "priority", Title: "Priority classes: batch at 5× the limit, an interactive trickle",
		Doc: "A vendor GCRA of 100/s (burst 20); a batch job offers 500 req/s (5× the limit) and interactive " +
			"requests trickle in at 5 req/s, every request in wait mode (max wait 1 s). throttle: `priority: {classes: " +
			"[interactive, batch], reserve: {interactive: 20%}}`, each request naming its class (WithPriority): the " +
			"limit is kept as two lanes, interactive's 20/s burst 3 and batch's 80/s burst 15, and batch borrows " +
			"interactive's lane only while it is full. throttle-fcfs: the same limit without classes, one queue. " +
			"Measured: interactive's wait (the store's reserved wait) against its bound, one slot interval of the " +
			"whole limit (10 ms) plus what interactive's own requests queued in its lane; what batch receives of what " +
			"interactive leaves; utilization; overshoot at the vendor.",
		Vendor:    []Limit{shareLimit("peak")},
		Allowance: 20 * time.Millisecond,
		Flows: []Flow{
			{Name: "interactive", Class: "interactive", Rate: 5},
			{Name: "batch", Class: "batch", Rate: 500},
		},
		Classes: []string{"interactive", "batch"}, Reserve: map[string]int{"interactive": 20},
		Businesses: 1, Wait: true, MaxWait: time.Second, Duration: 2 * d,
		Algos: []string{AlgoThrottle, AlgoThrottleFCFS},
	}
}

// pacedWindow is the real length of daily-pacing's compressed hour, in
// runs of length d: 30 s at the default 4 s.
func pacedWindow(d time.Duration) time.Duration { return d * 15 / 2 }

func dailyPacingScenario(d time.Duration) Scenario {
	window := pacedWindow(d)
	perSec := 100.0 // the quota's mean rate, real requests per second
	quota := int64(perSec * window.Seconds())
	return Scenario{
		Name: "daily-pacing", Title: "A quota paced to its reset: demand at 3× an hourly quota, compressed",
		Doc: fmt.Sprintf("A vendor's quota of %d per calendar hour (UTC), on a clock %.0f× the real one so that the hour "+
			"passes in %v: throttle's store and transport run on that clock (redisstore's Clock, WithClock), shared by every "+
			"worker, and the vendor counts per %v window from the run's start, each window one hour of that clock. "+
			"(A day is a calendar window too, but a day compressed into a run of seconds would need a clock %.0f× as fast; "+
			"the hour is the same rule at a usable scale.) A batch job offers 3× the quota (%.0f req/s, class batch) and an "+
			"interactive trickle 5%% of it (%.0f req/s, class interactive), wait mode, max wait one compressed minute "+
			"(%v real). throttle: `priority: {classes: [interactive, batch]}` and the window `pace: {reserve: 10%%}`; "+
			"throttle-fcfs: the same window without pace or classes. The run covers the hour and the first 3 minutes of "+
			"the next. Measured, in compressed time: the quota used in the hour, when it ran out, the last admission "+
			"before the reset and the longest gap between admissions (the dark time), the interactive refusals.",
			quota, float64(time.Hour)/float64(window), window, window, float64(24*time.Hour)/float64(window),
			3*perSec, 0.05*perSec, window/60),
		Vendor: []Limit{{Name: "hourly", Kind: KindHour, Rate: quota, Period: window, Pace: "{reserve: 10%}"}},
		Flows: []Flow{
			{Name: "interactive", Class: "interactive", Rate: 0.05 * perSec},
			{Name: "batch", Class: "batch", Rate: 3 * perSec},
		},
		Classes:    []string{"interactive", "batch"},
		Businesses: 1, Wait: true, MaxWait: window / 60, Duration: window + window/20,
		Compress: float64(time.Hour) / float64(window),
		Algos:    []string{AlgoThrottle, AlgoThrottleFCFS},
	}
}

func noisyTenantScenario(d time.Duration) Scenario {
	// A phase is 4 runs long: a share is a steady-state figure, and the
	// active set turns over for a second after each phase starts (the
	// tenants of the phase before leave it only once they have been
	// quiet for the limit's fair span), which a phase of a few seconds
	// would mostly measure.
	d *= 4
	flows := []Flow{{Name: "noisy", Tenant: "noisy", Rate: 2000, To: 2 * d}}
	for i := 1; i <= 20; i++ {
		n := fmt.Sprintf("light%02d", i)
		flows = append(flows, Flow{Name: n, Tenant: n, Rate: 2, From: d, To: 2 * d})
	}
	for _, w := range []int{1, 2, 4} {
		n := fmt.Sprintf("weight%d", w)
		flows = append(flows, Flow{Name: n, Tenant: n, Weight: w, Rate: 200, From: 2 * d})
	}
	account := shareLimit("account")
	account.Fair = "tenant"
	return Scenario{
		Name: "noisy-tenant", Title: "A noisy tenant: weighted fair share of one provider-wide limit",
		Doc: fmt.Sprintf("A vendor GCRA of 100/s (burst 20) for the whole account, shared by the tenants (WithBusiness), "+
			"wait mode (max wait 1 s), three phases of %v: (1) one tenant, noisy, offers 2,000 req/s (20× the limit) "+
			"alone; (2) it goes on while 20 light tenants offer 2 req/s each; (3) three tenants on plans of weight 1, 2 "+
			"and 4 offer 200 req/s each (all saturate). throttle: the limit with `fair: tenant` and the plans' "+
			"`weight`; throttle-fcfs: the same limit first come first served. Measured per phase and tenant: its "+
			"share of what the phase admitted against its weighted share (weight ÷ the active tenants' weights), "+
			"what it got of what it asked, its waits; utilization, overshoot, Redis calls per request.", d),
		Vendor:     []Limit{account},
		Allowance:  20 * time.Millisecond,
		Flows:      flows,
		Businesses: 1, Wait: true, MaxWait: time.Second, Duration: 3 * d,
		Algos: []string{AlgoThrottle, AlgoThrottleFCFS},
	}
}

// flowIntents returns one process's share of a scenario's flows, in time
// order: flow j's requests are evenly spaced fleet-wide, 1/Rate apart
// from From (shifted by j/len(flows) of a spacing, so that flows of the
// same rate do not arrive together), and process i of n sends every
// n-th of them from the i-th.
func flowIntents(sc *Scenario, index, processes int, start time.Time) []Intent {
	var out []Intent
	for j := range sc.Flows {
		f := &sc.Flows[j]
		if f.Rate <= 0 {
			continue
		}
		step := float64(time.Second) / f.Rate
		end := f.end(sc.Duration)
		biz := f.Name
		for m := float64(index) + float64(j)/float64(len(sc.Flows)); ; m += float64(processes) {
			off := f.From + time.Duration(m*step)
			if off >= end {
				break
			}
			out = append(out, Intent{At: start.Add(off).UnixNano(), Business: biz, Flow: j})
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].At < out[b].At })
	return out
}

// scaledClock is a quota.Clock k times as fast as the real clock: at the
// real time r0 it reads v0. Every worker builds the same one from its
// spec, so the fleet shares it; its timers fire after a k-th of their
// duration.
type scaledClock struct {
	r0, v0 time.Time
	k      float64
}

var _ quota.Clock = scaledClock{}

func (c scaledClock) Now() time.Time {
	return c.v0.Add(time.Duration(float64(time.Since(c.r0)) * c.k))
}

func (c scaledClock) NewTimer(d time.Duration) quota.Timer {
	return realTimer{time.NewTimer(c.real(d))}
}

// real is the real duration of d on the clock.
func (c scaledClock) real(d time.Duration) time.Duration { return time.Duration(float64(d) / c.k) }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// virtualStart is where a compressed run's clock starts: the calendar
// hour (UTC) the run starts in, so that the run's start is the start of
// an hourly window.
func virtualStart(start time.Time) time.Time { return start.UTC().Truncate(time.Hour) }

// A Record is what happened to one request of a scenario with flows.
type Record struct {
	Flow int   `json:"f"`
	At   int64 `json:"t"` // its intent, ns since the epoch
	// Out is its outcome (OutSent, ...).
	Out string `json:"o"`
	// Wait is the store's reserved wait of the decision it went on, on
	// the store's clock (compressed in daily-pacing); -1 when it was not
	// admitted.
	Wait int64 `json:"w"`
}

// needsFair reports whether the scenario's throttle configuration has a
// fair share.
func (s *Scenario) needsFair() bool {
	for _, l := range s.Vendor {
		if l.Fair != "" {
			return true
		}
	}
	return false
}

// flowConfig writes what a scenario with flows adds to the providers
// YAML of throttle (fcfs false): the priority field, and the plans with
// their weights; tenants (the top-level map) is written by the caller.
func flowConfig(b *strings.Builder, sc *Scenario) {
	if len(sc.Classes) > 0 {
		fmt.Fprintf(b, "    priority: {classes: [%s]", strings.Join(sc.Classes, ", "))
		var rs []string
		for _, c := range sc.Classes {
			if p, ok := sc.Reserve[c]; ok {
				rs = append(rs, fmt.Sprintf("%s: %d%%", c, p))
			}
		}
		if len(rs) > 0 {
			fmt.Fprintf(b, ", reserve: {%s}", strings.Join(rs, ", "))
		}
		b.WriteString("}\n")
	}
	if ws := planWeights(sc); len(ws) > 0 {
		b.WriteString("    plans:\n")
		for _, w := range ws {
			fmt.Fprintf(b, "      %s: {weight: %d}\n", planName(w), w)
		}
	}
}

// tenantsConfig is the top-level tenants map of a scenario's tenants on
// a plan (weight above 1), or "".
func tenantsConfig(sc *Scenario) string {
	var ts []string
	for _, f := range sc.Flows {
		if f.Tenant != "" && f.weight() > 1 {
			ts = append(ts, f.Tenant+": "+planName(f.weight()))
		}
	}
	if len(ts) == 0 {
		return ""
	}
	return "tenants: {" + strings.Join(ts, ", ") + "}\n"
}

// planWeights are the weights above 1 of a scenario's tenants, each once,
// in increasing order.
func planWeights(sc *Scenario) []int {
	seen := map[int]bool{}
	var ws []int
	for _, f := range sc.Flows {
		if w := f.weight(); f.Tenant != "" && w > 1 && !seen[w] {
			seen[w] = true
			ws = append(ws, w)
		}
	}
	sort.Ints(ws)
	return ws
}

func planName(w int) string { return fmt.Sprintf("weight%d", w) }
