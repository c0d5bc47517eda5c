package fleet

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// FlowFigures is what a flow, or a group of flows alike (noisy-tenant's
// twenty light tenants), got in one phase of a run.
type FlowFigures struct {
	// Flow names it; Members is how many flows it groups.
	Flow    string
	Members int
	Class   string
	Tenant  string
	Weight  int
	// Asked is each member's offered rate (req/s).
	Asked float64
	// Offered, Admitted (sent: the limiter admitted them), Refused and
	// Lost (dropped, ended waiting, errors) count the requests intended
	// in the phase, all members together.
	Offered, Admitted, Refused, Lost int64
	// Waits of the admitted requests: the store's reserved wait, on the
	// store's clock (compressed in daily-pacing).
	WaitP50, WaitP99, WaitMax time.Duration
	// Share is each member's share of what every flow of the phase had
	// admitted (the mean, for a group); Weighted its weighted share
	// (weight ÷ the weights of the phase's flows); MaxMin its share of
	// the limit in a weighted max-min fair allocation of the flows'
	// asks (what a work-conserving fair share gives it).
	Share, Weighted, MaxMin float64
	// Heavy: a member asked for at least its weighted share of the limit.
	Heavy bool
	// MinGot is the least any member had admitted of what it asked
	// (admitted ÷ offered).
	MinGot float64
}

// PhaseFigures is one phase of a run with flows: the flows of the
// phase are the same from its start to its end.
type PhaseFigures struct {
	From, To time.Duration
	Flows    []FlowFigures
	// Used is what the vendor served of arrivals in the phase over what
	// the first limit allows in its length (rate × length).
	Used float64
}

// FlowSummary is the figures of a run of a scenario with flows
// (Scenario.Flows), for issues 20 and 21's targets.
type FlowSummary struct {
	Phases []PhaseFigures
	// ScriptsPerRequest is throttle's script calls (decisions and after
	// them) per request that reached the limiter.
	ScriptsPerRequest float64

	// Priority classes over a GCRA limit (priority). Top is the top
	// class; its waits (admitted requests) are checked against the
	// bound: Interval, one slot of the whole limit, plus what its own
	// requests queued in its lane (ownQueue). TopWithin of TopAdmitted
	// met it; TopExcessP99 is the p99 of wait less own queue.
	// LowerOfLeft is what the lower classes had served over what the
	// top class left of the ideal.
	Top                                string `json:",omitempty"`
	TopWaitP50, TopWaitP99, TopWaitMax time.Duration
	TopWithin, TopAdmitted, TopRefused int64
	TopExcessP99, Interval             time.Duration
	Lane                               string `json:",omitempty"`
	LowerOfLeft                        float64
	// TopWaited is how many admitted requests of the top class waited at
	// all, and LastTopWait the intent (offset into the run, on the
	// store's clock) of the last of them.
	TopWaited   int64
	LastTopWait time.Duration

	// A compressed hourly window (daily-pacing), times on the compressed
	// clock from the window's start: Quota, and WindowServed of it
	// served in the run's first window; SpentAt when the count reached
	// the quota (0: never); LastAdmission the last served arrival of the
	// window, ToReset the time from it to the reset; LongestGap the
	// longest time without a served arrival in the window (its ends
	// included), from GapFrom.
	Quota, WindowServed                                  int64
	QuotaUsed                                            float64
	SpentAt, LastAdmission, ToReset, LongestGap, GapFrom time.Duration
	Window                                               time.Duration

	// Tenants (noisy-tenant): the lowest share ÷ weighted share of a
	// tenant that asked for at least its weighted share, and the lowest
	// admitted ÷ asked of one that asked for less, over every phase;
	// the p99 wait of the latter.
	MinHeavyRatio, MinLightGot float64
	LightWaitP99               time.Duration
	HasLight, HasHeavy         bool
}

// flowGroup is the name a flow is reported under: light01..light20 as
// "light", any other flow as itself.
func flowGroup(name string) string {
	if s, ok := strings.CutPrefix(name, "light"); ok && s != "" && strings.Trim(s, "0123456789") == "" {
		return "light"
	}
	return name
}

// phases returns the boundaries of a run's phases: its start, its end,
// and every flow's start and end between them.
func phases(sc *Scenario) []time.Duration {
	bs := []time.Duration{0, sc.Duration}
	for i := range sc.Flows {
		f := &sc.Flows[i]
		for _, b := range []time.Duration{f.From, f.end(sc.Duration)} {
			if b > 0 && b < sc.Duration {
				bs = append(bs, b)
			}
		}
	}
	slices.Sort(bs)
	return slices.Compact(bs)
}

// limitPerSec is the first vendor limit's rate per second.
func limitPerSec(sc *Scenario) float64 {
	l := sc.Vendor[0]
	if l.Period <= 0 {
		return float64(l.Rate)
	}
	return float64(l.Rate) / l.Period.Seconds()
}

// maxMin is the weighted max-min fair allocation of capacity c among
// asks a (weights w): every flow that asks for less than its weighted
// share of what is left gets what it asks, the rest share the remainder
// by weight.
func maxMin(c float64, a []float64, w []float64) []float64 {
	out := make([]float64, len(a))
	left := make([]bool, len(a))
	for i := range left {
		left[i] = true
	}
	for {
		var sw float64
		for i := range a {
			if left[i] {
				sw += w[i]
			}
		}
		if sw == 0 {
			return out
		}
		moved := false
		for i := range a {
			if left[i] && a[i] <= c*w[i]/sw {
				out[i], left[i], moved = a[i], false, true
				c -= a[i]
			}
		}
		if !moved {
			for i := range a {
				if left[i] {
					out[i] = c * w[i] / sw
				}
			}
			return out
		}
	}
}

// flowSummary computes the figures of a run with flows; f is the run's
// figures so far (its Ideal).
func flowSummary(r *RunResult, f *Figures) *FlowSummary {
	sc := &r.Scenario
	if len(sc.Flows) == 0 {
		return nil
	}
	fs := &FlowSummary{MinHeavyRatio: math.Inf(1), MinLightGot: math.Inf(1)}
	if f.Decisions > 0 {
		fs.ScriptsPerRequest = float64(r.DecisionScripts+r.AfterScripts) / float64(f.Decisions)
	}
	perSec := limitPerSec(sc)
	bs := phases(sc)
	var lightWaits []int64
	for p := 0; p+1 < len(bs); p++ {
		from, to := bs[p], bs[p+1]
		ph := PhaseFigures{From: from, To: to}
		length := (to - from).Seconds()
		// The flows of the phase, and what each asked and got.
		type member struct {
			idx                              int
			offered, admitted, refused, lost int64
			waits                            []int64
		}
		var ms []*member
		byFlow := map[int]*member{}
		for j := range sc.Flows {
			fl := &sc.Flows[j]
			if fl.Rate > 0 && fl.From < to && fl.end(sc.Duration) > from {
				m := &member{idx: j}
				ms = append(ms, m)
				byFlow[j] = m
			}
		}
		for _, rec := range r.Records {
			off := time.Duration(rec.At - r.Start)
			m := byFlow[rec.Flow]
			if m == nil || off < from || off >= to {
				continue
			}
			m.offered++
			switch rec.Out {
			case OutSent, OutThrottled:
				m.admitted++
				m.waits = append(m.waits, max(rec.Wait, 0))
			case OutRefused:
				m.refused++
			default:
				m.lost++
			}
		}
		var total int64
		var sw float64
		asks, ws := make([]float64, len(ms)), make([]float64, len(ms))
		for i, m := range ms {
			total += m.admitted
			w := float64(sc.Flows[m.idx].weight())
			sw += w
			asks[i], ws[i] = sc.Flows[m.idx].Rate, w
		}
		alloc := maxMin(perSec, asks, ws)
		// Per member, then per group in the order of first appearance.
		type groupAcc struct {
			ff    FlowFigures
			waits []int64
			share float64
		}
		var order []string
		groups := map[string]*groupAcc{}
		for i, m := range ms {
			fl := &sc.Flows[m.idx]
			w := float64(fl.weight())
			share, weighted := 0.0, w/sw
			if total > 0 {
				share = float64(m.admitted) / float64(total)
			}
			got := 1.0
			if m.offered > 0 {
				got = float64(m.admitted) / float64(m.offered)
			}
			heavy := fl.Rate >= weighted*perSec
			// A flow that offered nothing in the phase is judged by nothing.
			if m.offered > 0 {
				if heavy {
					fs.HasHeavy = true
					fs.MinHeavyRatio = min(fs.MinHeavyRatio, share/weighted)
				} else {
					fs.HasLight = true
					fs.MinLightGot = min(fs.MinLightGot, got)
					lightWaits = append(lightWaits, m.waits...)
				}
			}
			name := flowGroup(fl.Name)
			g := groups[name]
			if g == nil {
				g = &groupAcc{ff: FlowFigures{Flow: name, Class: fl.Class, Tenant: fl.Tenant, Weight: fl.weight(), Asked: fl.Rate,
					Weighted: weighted, MaxMin: alloc[i] / perSec, Heavy: heavy, MinGot: got}}
				groups[name] = g
				order = append(order, name)
			}
			g.ff.Members++
			g.ff.Offered += m.offered
			g.ff.Admitted += m.admitted
			g.ff.Refused += m.refused
			g.ff.Lost += m.lost
			g.ff.MinGot = min(g.ff.MinGot, got)
			g.share += share
			g.waits = append(g.waits, m.waits...)
		}
		for _, name := range order {
			g := groups[name]
			if g.ff.Members > 1 {
				g.ff.Tenant = ""
			}
			g.ff.Share = g.share / float64(g.ff.Members)
			slices.Sort(g.waits)
			g.ff.WaitP50, g.ff.WaitP99 = pct(g.waits, 0.5), pct(g.waits, 0.99)
			if len(g.waits) > 0 {
				g.ff.WaitMax = time.Duration(g.waits[len(g.waits)-1])
			}
			ph.Flows = append(ph.Flows, g.ff)
		}
		var served int64
		for _, a := range r.Arrivals {
			if off := time.Duration(a.At.UnixNano() - r.Start); !a.Throttled && off >= from && off < to {
				served++
			}
		}
		if length > 0 {
			ph.Used = float64(served) / (perSec * length)
		}
		fs.Phases = append(fs.Phases, ph)
	}
	slices.Sort(lightWaits)
	fs.LightWaitP99 = pct(lightWaits, 0.99)
	if !fs.HasHeavy {
		fs.MinHeavyRatio = 0
	}
	if !fs.HasLight {
		fs.MinLightGot = 0
	}
	if len(sc.Classes) > 0 {
		classFigures(fs, r, f)
	}
	if sc.Vendor[0].Kind == KindHour {
		hourFigures(fs, r)
	}
	return fs
}

// classFigures computes the figures of the top class (Scenario.Classes[0]).
func classFigures(fs *FlowSummary, r *RunResult, f *Figures) {
	sc := &r.Scenario
	fs.Top = sc.Classes[0]
	var waits, excess []int64
	var topServed, lowerServed int64
	for _, rec := range r.Records {
		top := sc.Flows[rec.Flow].Class == fs.Top
		switch {
		case top && (rec.Out == OutSent || rec.Out == OutThrottled):
			fs.TopAdmitted++
			waits = append(waits, max(rec.Wait, 0))
			if rec.Wait > 0 {
				fs.TopWaited++
				at := time.Duration(float64(rec.At-r.Start) * max(sc.Compress, 1))
				fs.LastTopWait = max(fs.LastTopWait, at)
			}
		case top && rec.Out == OutRefused:
			fs.TopRefused++
		}
		if rec.Out == OutSent {
			if top {
				topServed++
			} else {
				lowerServed++
			}
		}
	}
	slices.Sort(waits)
	fs.TopWaitP50, fs.TopWaitP99 = pct(waits, 0.5), pct(waits, 0.99)
	if len(waits) > 0 {
		fs.TopWaitMax = time.Duration(waits[len(waits)-1])
	}
	if left := f.Ideal - topServed; left > 0 {
		fs.LowerOfLeft = float64(lowerServed) / float64(left)
	}
	// The bound applies to a GCRA limit kept as lanes.
	lim := sc.Configured()[0]
	bp, ok := sc.Reserve[fs.Top]
	if lim.Kind != KindGCRA || !ok {
		return
	}
	ql := quota.Limit{Name: lim.Name, Kind: quota.GCRA, Rate: lim.Rate, Period: lim.Period, Burst: lim.Burst,
		Reserve: []int64{int64(bp) * quota.BasisPoints / 100}}
	lane := ql.Lanes()[0]
	fs.Interval = lim.Period / time.Duration(lim.Rate)
	fs.Lane = fmt.Sprintf("%d/%s burst %d", lane.Rate, durName(lane.Period), lane.Burst)
	queue := ownQueue(r, fs.Top, lane)
	for _, rec := range r.Records {
		if sc.Flows[rec.Flow].Class != fs.Top || (rec.Out != OutSent && rec.Out != OutThrottled) {
			continue
		}
		q := queue[rec.At]
		// The store counts in whole µs: a µs of rounding is no excess.
		if time.Duration(rec.Wait) <= fs.Interval+q+time.Microsecond {
			fs.TopWithin++
		}
		excess = append(excess, max(rec.Wait-int64(q), 0))
	}
	slices.Sort(excess)
	fs.TopExcessP99 = pct(excess, 0.99)
}

// ownQueue is, for each request of class (by its intent time), how long
// it would wait in its class's lane alone: the class's own requests run
// through a GCRA of the lane, each at its intent or as soon as the lane
// admits it.
func ownQueue(r *RunResult, class string, lane quota.Limit) map[int64]time.Duration {
	var ats []int64
	for _, in := range r.Intents {
		if r.Scenario.Flows[in.Flow].Class == class {
			ats = append(ats, in.At)
		}
	}
	slices.Sort(ats)
	t := int64(lane.Period) / lane.Rate
	if int64(lane.Period)%lane.Rate != 0 { // the lane's interval is rounded up
		t++
	}
	tol := (max(lane.Burst, 1) - 1) * t
	out := make(map[int64]time.Duration, len(ats))
	var tat int64
	for _, at := range ats {
		e := max(at, tat-tol)
		out[at] = time.Duration(e - at)
		tat = max(tat, e) + t
	}
	return out
}

// hourFigures computes the figures of a compressed hourly window
// (KindHour), on the compressed clock.
func hourFigures(fs *FlowSummary, r *RunResult) {
	sc := &r.Scenario
	l := sc.Vendor[0]
	k := max(sc.Compress, 1)
	virt := func(ns int64) time.Duration { return time.Duration(float64(ns) * k).Round(time.Second) }
	fs.Quota, fs.Window = l.Rate, virt(int64(l.Period))
	end := r.Start + int64(l.Period)
	var ts []int64
	for _, a := range r.Arrivals {
		if at := a.At.UnixNano(); !a.Throttled && at >= r.Start && at < end {
			ts = append(ts, at)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	fs.WindowServed = int64(len(ts))
	fs.QuotaUsed = float64(len(ts)) / float64(l.Rate)
	if int64(len(ts)) >= l.Rate {
		fs.SpentAt = virt(ts[l.Rate-1] - r.Start)
	}
	prev := r.Start
	for _, t := range append(ts, end) {
		if g := virt(t - prev); g > fs.LongestGap {
			fs.LongestGap, fs.GapFrom = g, virt(prev-r.Start)
		}
		prev = t
	}
	if len(ts) > 0 {
		fs.LastAdmission = virt(ts[len(ts)-1] - r.Start)
		fs.ToReset = fs.Window - fs.LastAdmission
	}
}

// hourShift is how far a run's KindHour windows are from multiples of
// their length: they start at the run's start (the vendor's clock is
// moved back by it).
func (r *RunResult) hourShift() int64 {
	for _, l := range r.Scenario.Vendor {
		if l.Kind == KindHour {
			return r.Start % int64(l.Period)
		}
	}
	return 0
}
