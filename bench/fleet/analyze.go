package fleet

import (
	"container/heap"
	"math"
	"sort"
	"time"

	"github.com/fleetquota/throttle/throttletest"
)

// LimitFigures is what one vendor limit saw of one run.
type LimitFigures struct {
	Name string
	Spec string
	// Overshoot is the most requests the fleet sent beyond what the limit
	// allows, over every interval (GCRA, leaky bucket) or calendar day,
	// and every scope: 0 means every arrival conformed. For a fixed
	// window the other client's requests count first (overshootWindow).
	Overshoot int64
	// Scope is where the overshoot was largest.
	Scope string
	// MaxWindow is the most requests sent in any window of the limit's
	// own length (1 s for per-second limits and buckets, the UTC day for
	// a daily quota), in one scope; Allowed is what the limit allows in
	// one (burst + rate for a GCRA, size + leak for a bucket, the quota).
	MaxWindow, Allowed int64
	// Most429 is, for a fixed window (KindWindow), the most 429s the
	// fleet drew in one window, in one scope.
	Most429 int64
}

// Figures is the summary of one run.
type Figures struct {
	Algo string
	// Intents is the offered load; Decisions those that reached the
	// limiter (the rest were dropped: every goroutine was busy).
	Intents, Decisions int64
	// Sent reached the vendor; Served were admitted by it; Vendor429 were
	// throttled by it.
	Sent, Served, Vendor429 int64
	// OtherRefused is how many requests of the other client (the
	// phantoms) the vendor refused.
	OtherRefused int64
	// Ideal is what a perfect client would have had served from the same
	// offered load: the vendor's own enforcement run over the intents
	// (sending each at once, or, in wait mode, at the earliest time within
	// max wait), with the same unseen traffic.
	Ideal       int64
	Utilization float64
	Overshoot   int64
	Limits      []LimitFigures
	// Decision latency: one call to the limiter (throttle: the store's
	// Reserve).
	P50, P99, P999 time.Duration
	// Wait accuracy: sent - reserved slot, for requests that waited.
	Waited                 int
	AccP50, AccP99, AccMax time.Duration
	// Lag: vendor arrival - (decision start + wait), for every request
	// sent: how late after its slot the vendor saw it.
	LagP50, LagP99, LagP999, LagMax time.Duration
	// Per decision.
	CmdsSent, CmdsRan   float64
	ClientCPU, RedisCPU time.Duration
	Outcomes            map[string]int64
	// ScriptsPerDecision is throttle's script calls made by its decisions
	// per decision that could reach Redis (1.00: one round trip);
	// AfterPerRequest its script calls after a decision (release, renew,
	// settle, sync, cancel) per request sent; DecisionsPerRequest its
	// decisions per request that reached the limiter (not dropped): above
	// 1 when requests decided again, as a waiter for a lease does on each
	// wake. Zero for the other algorithms.
	ScriptsPerDecision, AfterPerRequest, DecisionsPerRequest float64
	// Kind is the quota kind the scenario measures (Scenario.kind), and
	// KindUtilization that kind's own utilization: concurrency, the mean
	// of the vendor's in-flight count over the cap (MaxInFlight is the
	// most it counted); settled, TokensServed over TokensAllowed (burst +
	// rate × the run); rolling, what the vendor served in each whole
	// period of the run over the limit, averaged.
	Kind                        string
	KindUtilization             float64
	MaxInFlight                 int64
	TokensServed, TokensAllowed int64
	// Far Redis (Scenario.FarRedis): the latency throttle added to the
	// requests it sent (from the client's call to the request leaving
	// for the vendor) and to all of them, refusals included; the Redis
	// commands its workers sent per request that reached it.
	AddedP50, AddedP99       time.Duration
	AddedAllP50, AddedAllP99 time.Duration
	CommandsPerRequest       float64
	// SteadyUtilization is Utilization over the last three quarters of
	// the run: what a busy spell's start (a process's first batches, the
	// slots taken ahead of the first) costs is left out.
	SteadyUtilization float64
	// Flows is the figures of a scenario with flows (classes, pacing,
	// tenants); nil for the others.
	Flows *FlowSummary `json:",omitempty"`
}

// Analyze computes the figures of one run.
func Analyze(r *RunResult) Figures {
	f := Figures{Algo: r.Algo, Intents: int64(len(r.Intents)), Outcomes: r.Outcomes, OtherRefused: r.OtherRefused}
	f.Decisions = f.Intents - r.Outcomes[OutDropped]
	for _, a := range r.Arrivals {
		f.Sent++
		if !a.Throttled {
			f.Served++
		} else {
			f.Vendor429++
		}
	}
	if r.Scenario.kind() == "concurrency" {
		f.Ideal = idealConcurrent(r)
	} else {
		f.Ideal = ideal(r)
	}
	if f.Ideal > 0 {
		f.Utilization = float64(f.Served) / float64(f.Ideal)
	}
	for _, l := range r.Scenario.Vendor {
		var lf LimitFigures
		switch {
		case l.Kind == KindWindow:
			lf = overshootWindow(l, r.Arrivals, r.Phantoms)
		case l.Kind == KindHour: // windows from the run's start
			lf = overshootWindow(l, shifted(r.Arrivals, -r.hourShift()), nil)
		case l.Kind == KindConcurrent:
			lf = overshootConcurrent(l, r.Arrivals)
		case r.Scenario.Estimate > 0 && l.Kind == KindGCRA:
			lf = overshootCosts(l, r.Arrivals)
		default:
			lf = overshoot(l, r.Arrivals)
		}
		f.Limits = append(f.Limits, lf)
		f.Overshoot = max(f.Overshoot, lf.Overshoot)
	}
	var lags []int64
	for i := range r.Arrivals {
		lags = append(lags, lag(&r.Arrivals[i]))
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	f.LagP50, f.LagP99, f.LagP999 = pct(lags, 0.5), pct(lags, 0.99), pct(lags, 0.999)
	if len(lags) > 0 {
		f.LagMax = time.Duration(lags[len(lags)-1])
	}
	lat := append([]int64(nil), r.Latencies...)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	f.P50, f.P99, f.P999 = pct(lat, 0.50), pct(lat, 0.99), pct(lat, 0.999)
	acc := append([]int64(nil), r.Accuracy...)
	sort.Slice(acc, func(i, j int) bool { return acc[i] < acc[j] })
	f.Waited = len(acc)
	f.AccP50, f.AccP99 = pct(acc, 0.50), pct(acc, 0.99)
	if len(acc) > 0 {
		f.AccMax = time.Duration(acc[len(acc)-1])
	}
	kindFigures(&f, r)
	addedFigures(&f, r)
	f.Flows = flowSummary(r, &f)
	if r.Decisions > 0 {
		f.ScriptsPerDecision = float64(r.DecisionScripts) / float64(r.Decisions)
	}
	if f.Sent > 0 {
		f.AfterPerRequest = float64(r.AfterScripts) / float64(f.Sent)
	}
	if f.Decisions > 0 {
		f.DecisionsPerRequest = float64(r.Decisions) / float64(f.Decisions)
	}
	if f.Decisions > 0 {
		d := float64(f.Decisions)
		f.CmdsSent = float64(r.CmdsSent) / d
		f.CmdsRan = float64(r.CmdsRan) / d
		f.ClientCPU = time.Duration(float64(r.ClientCPU) / d)
		f.RedisCPU = time.Duration(float64(r.RedisCPU) / d)
	}
	return f
}

// addedFigures computes the added latency and the Redis commands per
// request of a far-redis run.
func addedFigures(f *Figures, r *RunResult) {
	if r.Scenario.FarRedis <= 0 {
		return
	}
	var sent, all []int64
	for i, d := range r.Added {
		all = append(all, d)
		if i < len(r.AddedSent) && r.AddedSent[i] {
			sent = append(sent, d)
		}
	}
	sort.Slice(sent, func(i, j int) bool { return sent[i] < sent[j] })
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	f.AddedP50, f.AddedP99 = pct(sent, 0.5), pct(sent, 0.99)
	f.AddedAllP50, f.AddedAllP99 = pct(all, 0.5), pct(all, 0.99)
	if f.Decisions > 0 {
		f.CommandsPerRequest = float64(r.Commands) / float64(f.Decisions)
	}
	from := r.Start + int64(r.Scenario.Duration)/4
	var served int64
	for _, a := range r.Arrivals {
		if !a.Throttled && a.At.UnixNano() >= from {
			served++
		}
	}
	if id := idealFrom(r, from); id > 0 {
		f.SteadyUtilization = float64(served) / float64(id)
	}
}

// shifted returns a copy of arrivals with every time moved by d ns.
func shifted(arrivals []throttletest.Arrival, d int64) []throttletest.Arrival {
	out := append([]throttletest.Arrival(nil), arrivals...)
	for i := range out {
		out[i].At = out[i].At.Add(time.Duration(d))
	}
	return out
}

// pct is the q-quantile of sorted (nearest rank).
func pct(sorted []int64, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return time.Duration(sorted[min(max(i, 0), len(sorted)-1)])
}

// overshoot checks the fleet's arrivals (served or not) against one limit,
// per scope.
func overshoot(l Limit, arrivals []throttletest.Arrival) LimitFigures {
	lf := LimitFigures{Name: l.Name, Spec: l.String()}
	byScope := map[string][]int64{}
	for _, a := range arrivals {
		s := ""
		if l.PerBusiness {
			s = a.Scope
		}
		byScope[s] = append(byScope[s], a.At.UnixNano())
	}
	switch l.Kind {
	case KindDay, KindRolling:
		lf.Allowed = l.Rate
	case KindGCRA:
		lf.Allowed = l.Burst + l.Rate*int64(time.Second)/int64(l.Period)
	case KindLeaky:
		lf.Allowed = l.Burst + l.Rate
	}
	for s, ts := range byScope {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		var over, most int64
		switch l.Kind {
		case KindDay:
			counts := map[int64]int64{}
			for _, t := range ts { // after the epoch: the division is the UTC day's number
				counts[t/int64(24*time.Hour)]++
			}
			for _, c := range counts {
				most = max(most, c)
			}
			over = max(0, most-l.Rate)
		case KindRolling:
			most = maxIn(ts, int64(l.Period))
			over = max(0, most-l.Rate)
		default:
			over = gcraOvershoot(ts, l.interval(), l.Burst)
			most = maxIn(ts, int64(time.Second))
		}
		if over > lf.Overshoot || (lf.Scope == "" && over == lf.Overshoot) {
			lf.Overshoot, lf.Scope = over, s
		}
		lf.MaxWindow = max(lf.MaxWindow, most)
	}
	return lf
}

// overshootWindow checks a fixed window against the fleet's arrivals and
// the other client's requests (the phantoms), per scope and window: the
// overshoot of a window is what both sent beyond the limit, at most what
// the fleet sent. The other client's requests count first: they are
// outside the fleet's control, and the fleet is to leave them their
// share, so 0 means the vendor could have served the other client and
// every fleet arrival whatever the order. MaxWindow counts both.
func overshootWindow(l Limit, arrivals []throttletest.Arrival, phantoms []throttletest.Other) LimitFigures {
	lf := LimitFigures{Name: l.Name, Spec: l.String(), Allowed: l.Rate}
	type win struct {
		scope string
		idx   int64
	}
	fleet, other, throttled := map[win]int64{}, map[win]int64{}, map[win]int64{}
	scope := func(b string) string {
		if l.PerBusiness {
			return b
		}
		return ""
	}
	// Times are after the epoch: a division gives the window's index.
	for _, a := range arrivals {
		w := win{scope(a.Scope), a.At.UnixNano() / int64(l.Period)}
		fleet[w]++
		if a.Throttled {
			throttled[w]++
		}
	}
	for _, p := range phantoms {
		other[win{scope(p.Scope), p.At.UnixNano() / int64(l.Period)}]++
	}
	for w, n := range fleet {
		over := min(n, max(0, n+other[w]-l.Rate))
		if over > lf.Overshoot || (lf.Scope == "" && over == lf.Overshoot) {
			lf.Overshoot, lf.Scope = over, w.scope
		}
		lf.MaxWindow = max(lf.MaxWindow, n+other[w])
		lf.Most429 = max(lf.Most429, throttled[w])
	}
	return lf
}

// gcraOvershoot is the most arrivals beyond what a GCRA of interval t and
// burst b allows in any interval [a_i, a_j]: max over i <= j of
// (j-i+1) - b - floor((a_j-a_i)/t), at least 0. With g(k) = k*t - a_k,
// (j-i)*t - (a_j-a_i) = g(j) - g(i), and the maximum M of that over
// i <= j gives the answer ceil(M/t) + 1 - b. A sequence with overshoot 0
// is exactly one that a GCRA starting idle admits in full.
func gcraOvershoot(sorted []int64, t, b int64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	var m int64
	minG := int64(math.MaxInt64)
	for k, a := range sorted {
		g := int64(k)*t - a
		minG = min(minG, g)
		m = max(m, g-minG)
	}
	return max(0, (m+t-1)/t+1-b)
}

// maxIn is the most times in any half-open window [x, x+w).
func maxIn(sorted []int64, w int64) int64 {
	var best int64
	lo := 0
	for hi := range sorted {
		for sorted[hi]-sorted[lo] >= w {
			lo++
		}
		best = max(best, int64(hi-lo+1))
	}
	return best
}

// ideal runs the vendor's own enforcement over the offered load: what a
// perfect client would have had served. In wait mode a request may go at
// the earliest time within max wait (and before the run's end), in
// arrival order, as slots are reserved.
func ideal(r *RunResult) int64 { return idealFrom(r, 0) }

// idealFrom is ideal counting only the intents at or after from (ns
// since the epoch); the ones before it still take their share of the
// limits.
func idealFrom(r *RunResult, from int64) int64 {
	type ev struct {
		at, cost int64
		biz      string
		phantom  bool
	}
	evs := make([]ev, 0, len(r.Intents)+len(r.Phantoms))
	// A compressed hour's windows start at the run's start: the ledger's
	// at multiples of their length, so its times are moved back.
	sh := r.hourShift()
	for _, in := range r.Intents {
		c := int64(1)
		if r.Scenario.Estimate > 0 {
			c = actualCost(r.Scenario.Estimate, in.At)
		}
		evs = append(evs, ev{at: in.At - sh, cost: c, biz: in.Business})
	}
	for _, p := range r.Phantoms {
		evs = append(evs, ev{at: p.At.UnixNano() - sh, cost: 1, biz: p.Scope, phantom: true})
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	st := throttletest.NewLedger(enforcer(r.Scenario.Vendor))
	// Against fixed windows only, the other client's share is left to it:
	// its requests are counted in their windows first, so the ideal is
	// what it left (a window's count does not depend on the order).
	windows := true
	for _, l := range r.Scenario.Vendor {
		windows = windows && l.Kind == KindWindow
	}
	if windows {
		for _, p := range r.Phantoms {
			st.Charge(p.At.Add(-time.Duration(sh)), p.Scope, 1)
		}
	}
	var n int64
	for _, e := range evs {
		if e.phantom && windows {
			continue
		}
		if e.phantom || !r.Scenario.Wait {
			if ok, _ := st.Admit(time.Unix(0, e.at), e.biz, e.cost); ok && !e.phantom && e.at >= from {
				n++
			}
			continue
		}
		t := st.Earliest(time.Unix(0, e.at), e.biz, e.cost)
		if t.UnixNano()-e.at > int64(r.Scenario.MaxWait) || t.UnixNano() >= r.End-sh {
			continue
		}
		if ok, _ := st.Admit(t, e.biz, e.cost); ok {
			n++
		}
	}
	return n
}

// overshootConcurrent checks the fleet's arrivals against a concurrency
// cap: an admitted request is in flight from its arrival until its
// response was written (throttletest.Arrival.Done), and the overshoot is the most
// requests in flight beyond the cap at any arrival, the arriving one
// counted whether the vendor admitted it or not. MaxWindow is the most
// in flight at once.
func overshootConcurrent(l Limit, arrivals []throttletest.Arrival) LimitFigures {
	lf := LimitFigures{Name: l.Name, Spec: l.String(), Allowed: l.Rate}
	type edge struct {
		at    int64
		delta int64 // +1 an admitted arrival, -1 its end, 0 a refused arrival
	}
	var edges []edge
	for _, a := range arrivals {
		at := a.At.UnixNano()
		if !a.Throttled {
			edges = append(edges, edge{at, 1}, edge{max(a.Done.UnixNano(), at), -1})
		} else {
			edges = append(edges, edge{at, 0})
		}
	}
	// At one instant, ends go first: a place given back is free again.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta < edges[j].delta
	})
	var cur int64
	for _, e := range edges {
		switch e.delta {
		case -1:
			cur--
		case 1:
			cur++
			lf.MaxWindow = max(lf.MaxWindow, cur)
			lf.Overshoot = max(lf.Overshoot, cur-l.Rate)
		case 0:
			lf.Overshoot = max(lf.Overshoot, cur+1-l.Rate)
		}
	}
	return lf
}

// overshootCosts is overshoot for a GCRA whose requests cost their
// throttletest.Arrival.Cost (tokens): a GCRA that charges every arrival, admitted or
// not, and the most tokens by which its tat went beyond the tolerance at
// any arrival. With costs of 1 it is gcraOvershoot. MaxWindow is the
// most tokens in any second; Allowed burst + rate.
func overshootCosts(l Limit, arrivals []throttletest.Arrival) LimitFigures {
	lf := LimitFigures{Name: l.Name, Spec: l.String(), Allowed: l.Burst + l.Rate*int64(time.Second)/int64(l.Period)}
	as := append([]throttletest.Arrival(nil), arrivals...)
	sort.Slice(as, func(i, j int) bool { return as[i].At.Before(as[j].At) })
	t, dvt := l.interval(), l.Burst*l.interval()
	var tat, sum int64
	lo := 0
	for k, a := range as {
		c, at := max(a.Cost, 1), a.At.UnixNano()
		tat = max(tat, at) + c*t
		lf.Overshoot = max(lf.Overshoot, (tat-at-dvt+t-1)/t)
		sum += c
		for as[k].At.Sub(as[lo].At) >= time.Second {
			sum -= max(as[lo].Cost, 1)
			lo++
		}
		lf.MaxWindow = max(lf.MaxWindow, sum)
	}
	return lf
}

// kindFigures computes the figures of a scenario of one of issue #11's
// quota kinds (Figures.Kind).
func kindFigures(f *Figures, r *RunResult) {
	sc := &r.Scenario
	f.Kind = sc.kind()
	if f.Kind == "" {
		return
	}
	l := sc.Vendor[0]
	span := r.End - r.Start
	switch f.Kind {
	case "concurrency":
		// The mean in flight over [Start, End - Period): every request
		// sent in it has ended by the run's end.
		from, to := r.Start, r.End-int64(l.Period)
		var held int64
		for _, a := range r.Arrivals {
			if !a.Throttled {
				held += max(0, min(a.Done.UnixNano(), to)-max(a.At.UnixNano(), from))
			}
		}
		if to > from {
			f.KindUtilization = float64(held) / float64(l.Rate*(to-from))
		}
		f.MaxInFlight = overshootConcurrent(l, r.Arrivals).MaxWindow
	case "settled":
		for _, a := range r.Arrivals {
			if !a.Throttled {
				f.TokensServed += a.Cost
			}
		}
		f.TokensAllowed = l.Burst + l.Rate*span/int64(l.Period)
		f.KindUtilization = float64(f.TokensServed) / float64(f.TokensAllowed)
	case "rolling":
		periods := span / int64(l.Period)
		if periods == 0 {
			return
		}
		var served int64
		for _, a := range r.Arrivals {
			if !a.Throttled && a.At.UnixNano() < r.Start+periods*int64(l.Period) {
				served++
			}
		}
		f.KindUtilization = float64(served) / float64(periods*l.Rate)
	}
}

// idealConcurrent is ideal for a vendor whose one limit is a concurrency
// cap of Rate places, each request served in Period: the offered
// requests in arrival order, each taking the place that frees first, at
// once or (in wait mode) within max wait and before the run's end.
func idealConcurrent(r *RunResult) int64 {
	l := r.Scenario.Vendor[0]
	free := make([]int64, l.Rate) // when each place is free again; kept as a min-heap
	h := &int64Heap{free}
	ins := append([]Intent(nil), r.Intents...)
	sort.Slice(ins, func(i, j int) bool { return ins[i].At < ins[j].At })
	var n int64
	for _, in := range ins {
		t := max(in.At, h.s[0])
		ok := t == in.At || (r.Scenario.Wait && t-in.At <= int64(r.Scenario.MaxWait) && t < r.End)
		if ok {
			h.s[0] = t + int64(l.Period)
			heap.Fix(h, 0)
			n++
		}
	}
	return n
}

type int64Heap struct{ s []int64 }

func (h *int64Heap) Len() int           { return len(h.s) }
func (h *int64Heap) Less(i, j int) bool { return h.s[i] < h.s[j] }
func (h *int64Heap) Swap(i, j int)      { h.s[i], h.s[j] = h.s[j], h.s[i] }
func (h *int64Heap) Push(x any)         { h.s = append(h.s, x.(int64)) }
func (h *int64Heap) Pop() any           { x := h.s[len(h.s)-1]; h.s = h.s[:len(h.s)-1]; return x }
