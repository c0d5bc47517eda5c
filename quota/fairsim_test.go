package quota_test

import (
	"container/heap"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// This file simulates tenants sharing a Fair limit in wait mode on the
// memory store, on an injected clock (package doc "Fair share"): each
// tenant's requests arrive evenly spaced with a fixed pattern of jitter
// (so that no tenant always asks first), a deferred request comes back
// at its appointment 0-3 ms late (a fixed pattern, as a caller's timer
// and round trip make it), an admitted one goes at its slot and a denied
// one is dropped. There is no wall clock and no randomness: every run
// gives the same figures, and a few seconds of simulated time take a
// few ms.

// simSecond is a second of simulated time, in µs.
const simSecond = int64(time.Second / time.Microsecond)

// simFlow is one tenant's requests: rate per second, evenly spaced, from
// `from` until `to` (µs of simulated time), and burst more at once at
// from.
type simFlow struct {
	tenant   string
	weight   int64
	rate     float64
	from, to int64
	burst    int
}

// simStats is what the simulation measured of one flow over the span it
// was asked about (by the slot of each admitted request).
type simStats struct {
	asked    int   // requests that arrived in the span
	admitted int   // requests admitted with a slot in the span
	maxWait  int64 // the longest wait from a request's arrival to its slot, µs
	atOnce   int   // burst requests admitted at their arrival
}

// simEvent is a request's arrival, or its return at an appointment.
type simEvent struct {
	at, seq int64
	flow    int
	arrived int64 // the request's arrival: its max wait counts from there
	appt    bool
	burst   bool
}

// simQueue orders the events by time, then by when they were queued.
type simQueue []simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any     { e := (*q)[len(*q)-1]; *q = (*q)[:len(*q)-1]; return e }

// simLateness is how late (µs) the k-th return at an appointment comes,
// cycling: 0 to 3 ms.
var simLateness = []int64{1200, 0, 2600, 400, 3000, 1800, 700, 2200, 100, 1500}

// simulate runs flows on the Fair limit lim, each request waiting up to
// maxWait from its arrival, and returns each flow's figures over [from,
// to) µs and how many requests were admitted there in all.
func simulate(t *testing.T, lim *quota.Limit, maxWait time.Duration, flows []simFlow, from, to int64) ([]simStats, int) {
	t.Helper()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := quotatest.NewClock(start)
	m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
	var q simQueue
	seq := int64(0)
	push := func(e simEvent) {
		seq++
		e.seq = seq
		heap.Push(&q, e)
	}
	for i, f := range flows {
		for range f.burst {
			push(simEvent{at: f.from, flow: i, arrived: f.from, burst: true})
		}
		if f.rate <= 0 {
			continue
		}
		step := 1e6 / f.rate
		x := uint32(i + 1)
		for n := 0; ; n++ {
			x = x*1103515245 + 12345 // a fixed jitter of up to a step
			at := f.from + int64(float64(n)*step) + int64(x>>8)%max(1, int64(step))
			if at >= f.to {
				break
			}
			push(simEvent{at: at, flow: i, arrived: at})
		}
	}
	stats := make([]simStats, len(flows))
	total, returns := 0, 0
	mw := maxWait.Microseconds()
	for q.Len() > 0 {
		e := heap.Pop(&q).(simEvent)
		clock.Set(start.Add(time.Duration(e.at) * time.Microsecond))
		f, st := &flows[e.flow], &stats[e.flow]
		if !e.appt && e.at >= from && e.at < to {
			st.asked++
		}
		req := quota.Request{Tag: "p", Items: []quota.Item{{Limit: lim, Key: "account"}},
			Share: quota.Share{Key: f.tenant, Weight: f.weight}, Appointment: e.appt,
			MaxWait: time.Duration(max(e.arrived+mw-e.at, 0)) * time.Microsecond}
		res, err := m.Reserve(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case res.Allowed:
			slot := e.at + res.Wait.Microseconds()
			if e.burst && slot == e.arrived {
				st.atOnce++
			}
			if slot >= from && slot < to {
				st.admitted++
				total++
				st.maxWait = max(st.maxWait, slot-e.arrived)
			}
		case res.Deferred:
			back := e.at + res.RetryAfter.Microseconds() + simLateness[returns%len(simLateness)]
			returns++
			push(simEvent{at: back, flow: e.flow, arrived: e.arrived, appt: true, burst: e.burst})
		}
	}
	return stats, total
}

// simLimit is the noisy-tenant bench's vendor limit, 100/s, with burst.
func simLimit(burst int64) *quota.Limit {
	return &quota.Limit{Name: "account", Kind: quota.GCRA, Rate: 100, Period: time.Second, Burst: burst, Fair: true}
}

// checkShares checks that each of flows[first:] got at least least of
// its weighted share of what they were admitted together, and returns
// the figures as text.
func checkShares(t *testing.T, flows []simFlow, stats []simStats, first int, least float64) string {
	t.Helper()
	var W int64
	sum := 0
	for i := first; i < len(flows); i++ {
		W += max(flows[i].weight, 1)
		sum += stats[i].admitted
	}
	out := ""
	for i := first; i < len(flows); i++ {
		got := float64(stats[i].admitted) / float64(sum)
		due := float64(max(flows[i].weight, 1)) / float64(W)
		out += fmt.Sprintf(" %s %.1f%% of its share %.1f%%;", flows[i].tenant, 100*got/due, 100*due)
		if got/due < least {
			t.Errorf("%s got %.1f%% of the admitted, %.1f%% of its weighted share %.1f%%: want at least %.0f%%",
				flows[i].tenant, 100*got, 100*got/due, 100*due, 100*least)
		}
	}
	return out
}

// TestFairSimSaturating: three tenants of weights 1, 2 and 4 each offer
// twice the limit (200/s against 100/s, burst 20), waiting up to 1 s, as
// the noisy-tenant bench's third phase does, but with no tenants before
// them. Measured from 2 s to 12 s, each gets its weighted share (99.9%
// to 100.1% of it) and the limit is used whole: the appointments keep
// the limit busy and leave a request over its share next to nothing,
// coming back 0-3 ms late (0-21 ms late gave the same within 0.2%).
func TestFairSimSaturating(t *testing.T) {
	t.Parallel()
	const end = 12 * simSecond
	var flows []simFlow
	for _, w := range []int64{1, 2, 4} {
		flows = append(flows, simFlow{tenant: fmt.Sprint("weight", w), weight: w, rate: 200, to: end})
	}
	stats, total := simulate(t, simLimit(20), time.Second, flows, 2*simSecond, end)
	util := float64(total) / (100 * float64(end-2*simSecond) / float64(simSecond))
	if util < 0.99 {
		t.Errorf("utilisation %.1f%%, want at least 99%%", 100*util)
	}
	t.Logf("utilisation %.1f%%;%s", 100*util, checkShares(t, flows, stats, 0, 0.97))
}

// TestFairSimTurnover runs the noisy-tenant bench's three phases of 16 s
// (a noisy tenant at 2,000/s alone, then beside 20 light ones at 2/s,
// then three tenants of weights 1, 2 and 4 at 200/s each; 100/s with the
// bench clients' burst of 18, max wait 1 s) and measures the third: each
// tenant must get at least 97% of its weighted share over the whole
// phase, 99% from 2 s into it on, and the limit must be used to 99%.
//
// The phase's first 2 s are the active set's turnover: for FairSpan the
// 21 tenants of the phase before still count in W (28 instead of 7), so
// the new tenants' lanes run at a quarter of their rates, and for a
// second more the appointments booked at those rates come back sparse;
// most of the limit is left to requests over their share. When those
// took it in the order they asked, leaving FairOverHold, and charged no
// lane, the weight-4 tenant got 96.8% of its share over the phase (1, 2:
// 114.9%, 98.9%; the bench measured 94.7%), though 99.7% from 2 s on.
// Charging their lanes alone made it worse (95.1%, capped at FairSpan
// ahead; 91.3% uncapped): the lanes are booked ahead already, and the
// spare still went to whoever asked first. What the rule does now (a
// request over its share charges its lane while the lane could book it
// within FairSpan, and leaves FairIdleHold once it could not) gives
// 103.6%, 100.3%, 99.0% over the phase and 100.0% each from 2 s on.
func TestFairSimTurnover(t *testing.T) {
	t.Parallel()
	const d = 16 * simSecond
	flows := []simFlow{{tenant: "noisy", rate: 2000, to: 2 * d}}
	for i := 1; i <= 20; i++ {
		flows = append(flows, simFlow{tenant: fmt.Sprint("light", i), rate: 2, from: d, to: 2 * d})
	}
	for _, w := range []int64{1, 2, 4} {
		flows = append(flows, simFlow{tenant: fmt.Sprint("weight", w), weight: w, rate: 200, from: 2 * d, to: 3 * d})
	}
	for _, tt := range []struct {
		skip  int64   // from the phase's start
		least float64 // of the weighted share
	}{
		{0, 0.97},
		{2 * simSecond, 0.99},
	} {
		stats, total := simulate(t, simLimit(18), time.Second, flows, 2*d+tt.skip, 3*d)
		util := float64(total) / (100 * float64(d-tt.skip) / float64(simSecond))
		if util < 0.99 {
			t.Errorf("from %v into the phase: utilisation %.1f%%, want at least 99%%", time.Duration(tt.skip)*time.Microsecond, 100*util)
		}
		t.Logf("from %v into the phase: utilisation %.1f%%;%s", time.Duration(tt.skip)*time.Microsecond, 100*util,
			checkShares(t, flows, stats, 21, tt.least))
	}
}

// TestFairSimWorkConserving: a tenant takes what the others leave idle,
// and keeps its burst and short waits when it is alone again: alone at
// the limit's rate; at 90% beside another of the same weight at 10%;
// and after that other has left, a burst of the whole burst at once,
// then the limit's rate again.
func TestFairSimWorkConserving(t *testing.T) {
	t.Parallel()
	lim := simLimit(20)
	T := lim.Interval()
	t.Run("alone", func(t *testing.T) {
		t.Parallel()
		flows := []simFlow{{tenant: "a", rate: 100, to: 5 * simSecond}}
		stats, _ := simulate(t, lim, time.Second, flows, 0, 6*simSecond)
		if st := stats[0]; st.admitted < st.asked || st.maxWait > T {
			t.Errorf("alone at the rate: %+v, want every request admitted within an interval", st)
		}
	})
	t.Run("90-10", func(t *testing.T) {
		t.Parallel()
		flows := []simFlow{{tenant: "a", rate: 90, to: 5 * simSecond}, {tenant: "b", rate: 10, to: 5 * simSecond}}
		stats, _ := simulate(t, lim, time.Second, flows, 0, 6*simSecond)
		for i, st := range stats {
			if st.admitted < st.asked || st.maxWait > T {
				t.Errorf("%s: %+v, want every request admitted within an interval", flows[i].tenant, st)
			}
		}
	})
	for _, mw := range []time.Duration{0, time.Second, 10 * time.Second} {
		t.Run(fmt.Sprint("left, max wait ", mw), func(t *testing.T) {
			t.Parallel()
			// b leaves at 4 s; a goes on at 90% to 6 s, is quiet for
			// the burst's time, sends the whole burst at 6.5 s and goes
			// on at the limit's rate from 6.7 s. Before b left, a took
			// what b left idle, charged to its lane up to FairSpan ahead:
			// b is forgotten FairSpan after its last request, and a's
			// lane is its own again within FairSpan and its tolerance.
			flows := []simFlow{
				{tenant: "a", rate: 90, to: 6 * simSecond},
				{tenant: "b", rate: 10, to: 4 * simSecond},
				{tenant: "a", burst: int(lim.Capacity()), from: 6*simSecond + simSecond/2},
				{tenant: "a", rate: 100, from: 6*simSecond + 7*simSecond/10, to: 9 * simSecond},
			}
			before, _ := simulate(t, lim, mw, flows, 0, 4*simSecond)
			for i, st := range before[:2] {
				if st.admitted < st.asked || st.maxWait > T {
					t.Errorf("%s beside the other: %+v, want every request admitted within an interval", flows[i].tenant, st)
				}
			}
			stats, _ := simulate(t, lim, mw, flows, 6*simSecond, 10*simSecond)
			if st := stats[2]; st.atOnce != int(lim.Capacity()) {
				t.Errorf("alone again, a burst of %d: %d went at once, want all", lim.Capacity(), st.atOnce)
			}
			if st := stats[3]; st.admitted < st.asked || st.maxWait > 2*T {
				t.Errorf("alone again at the rate: %+v, want every request admitted within two intervals", st)
			}
		})
	}
}
