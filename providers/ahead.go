package providers

import (
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fleetquota/throttle/quota"
)

// MinAheadPeriod is the shortest period of quota taken ahead (the "ahead"
// field): below it a batch would last less than a store's round trip on
// a local network, and taking ahead would only add calls.
const MinAheadPeriod = time.Millisecond

// aheadFields are the fields of an "ahead" mapping.
var aheadFields = []string{"period"}

// aheads decodes the provider's "ahead" field (pn, nil when not given)
// and each limit's, and sets Limit.Ahead: a limit's own field, else the
// provider's for each of its GCRA limits. It reports a limit that
// cannot take quota ahead where the field that asked for it is
// (docs/decisions.md, "Quota taken ahead"): a calendar or rolling window,
// a concurrency cap, a limit that learns the vendor's figure, that has
// priority classes or pacing, or that a sync counter or a settled figure
// is mapped to, and a period above half the limit's burst span. It runs
// after limitPriority, which sets each limit's Reserve and Pace.
func (l *loader) aheads(p *Provider, pn *yaml.Node, path string, nodes []*limitNodes) {
	var all time.Duration
	if pn != nil {
		all, _ = l.aheadPeriod(pn, path+".ahead")
		p.Ahead = all
	}
	mapped := mappedLimits(p)
	for _, ln := range nodes {
		if ln.lim == nil {
			continue
		}
		lim, q := ln.lim, ln.lim.Quota
		n, npath := mappingValue(ln.node, "ahead"), join(ln.path, "ahead")
		period := all
		if n != nil {
			d, ok := l.aheadPeriod(n, npath)
			if !ok {
				continue
			}
			period = d
		} else if q.Kind != quota.GCRA {
			continue // the provider's field covers its GCRA limits
		} else {
			n, npath = pn, path+".ahead"
		}
		if period == 0 {
			continue
		}
		if why := aheadRefused(q, mapped[q.Name]); why != "" {
			l.add(n, npath, "limit %s cannot take quota ahead: %s", q.Name, why)
			continue
		}
		if most := aheadLongest(q); period > most {
			l.add(n, npath, "period %v is above half of limit %s's burst span (%d × %v = %v): its slots would lie further ahead than "+
				"half its burst, which is what the other processes keep; want at most %v, or a larger burst",
				period, q.Name, q.Capacity(), time.Duration(q.Interval())*time.Microsecond, time.Duration(q.Tolerance())*time.Microsecond, most)
			continue
		}
		lim.Ahead = period
	}
}

// aheadPeriod decodes one "ahead" field: a mapping {period: <duration>},
// or false (off, to leave one limit out of the provider's).
func (l *loader) aheadPeriod(n *yaml.Node, path string) (time.Duration, bool) {
	if n.Kind == yaml.ScalarNode && n.Value == "false" {
		return 0, true
	}
	f := l.fields(n, path, aheadFields...)
	if f == nil {
		return 0, false
	}
	pn := f["period"]
	if pn == nil {
		l.add(n, path+".period", "missing: how long one batch taken ahead should last, e.g. period: 200ms")
		return 0, false
	}
	d, ok := l.duration(pn, path+".period", false)
	if ok && d < MinAheadPeriod {
		l.add(pn, path+".period", "period %v is below %v: a batch would not outlast a round trip to the store", d, MinAheadPeriod)
		return 0, false
	}
	return d, ok
}

// aheadRefused says why limit q cannot take quota ahead, or "". mapped
// says a sync counter or a settled figure is mapped to it.
func aheadRefused(q *quota.Limit, mapped bool) string {
	switch {
	case q.Kind == quota.Window:
		return "a calendar window counts slots in the window they were taken in, so slots held past its end would be spent " +
			"in the next one uncounted; only GCRA limits take quota ahead"
	case q.Kind == quota.Rolling:
		return "a rolling window counts a slot where it was taken, so a slot spent later would leave its trailing period early; " +
			"only GCRA limits take quota ahead"
	case q.Kind == quota.Concurrency:
		return "a concurrency cap counts requests in flight: a lease held for a request not yet made is a lease nobody uses"
	case q.Learn:
		return "it learns the vendor's figure, and slots taken at one rate would be spent at another"
	case q.Reserve != nil || q.Pace:
		return "it keeps reserves for priority classes (its own or its provider's) or is paced, and a batch taken ahead would be charged in one class's lane " +
			"and spent by requests of any class; taking quota ahead within a class's lane is not supported yet: " +
			"leave ahead off for this limit (ahead: false) or give it no reserve"
	case q.Fair:
		return "it is shared fairly among tenants (fair), and is booked only near now in its tenants' turns: " +
			"slots taken ahead by one process would be no tenant's"
	case mapped:
		return "a vendor counter (sync) or a settled cost (settle) is mapped to it: the vendor's figures cannot know what a process " +
			"holds, so a drain or a refund would count the held slots twice"
	}
	return ""
}

// aheadLongest is the longest period of quota taken ahead that limit q
// allows: half its tolerance, so that the other half of its burst stays
// with the processes that are not holding slots.
func aheadLongest(q *quota.Limit) time.Duration {
	return time.Duration(q.Tolerance()/2) * time.Microsecond
}

// mappedLimits returns the names of the limits that a sync counter or a
// settled figure of p or of one of its routes is mapped to.
func mappedLimits(p *Provider) map[string]bool {
	out := map[string]bool{}
	add := func(s *Sync, st *Settle) {
		if s != nil {
			for _, name := range s.Counters {
				out[name] = true
			}
		}
		if st != nil {
			for _, name := range st.Usage {
				out[name] = true
			}
		}
	}
	add(p.Sync, p.Settle)
	for i := range p.Routes {
		add(p.Routes[i].Sync, p.Routes[i].Settle)
	}
	return out
}

// Ahead returns the period of quota taken ahead for the resolved request
// (docs/decisions.md, "Quota taken ahead"): the shortest Limit.Ahead of
// its stack when every limit of the stack has one, else zero. A request
// with a limit that does not take quota ahead (a daily quota, a
// concurrency cap) is decided by the store as before.
func (r *Resolution) Ahead() time.Duration {
	if r.Provider == nil || len(r.Request.Items) == 0 {
		return 0
	}
	var period time.Duration
	for i := range r.Request.Items {
		d := r.aheadOf(r.Request.Items[i].Limit)
		if d == 0 {
			return 0
		}
		if period == 0 || d < period {
			period = d
		}
	}
	return period
}

// aheadOf returns the Ahead of the limit of r's provider or route whose
// Quota is q, or zero.
func (r *Resolution) aheadOf(q *quota.Limit) time.Duration {
	for i := range r.Provider.Limits {
		if r.Provider.Limits[i].Quota == q {
			return r.Provider.Limits[i].Ahead
		}
	}
	if r.Route != nil {
		for i := range r.Route.Limits {
			if r.Route.Limits[i].Quota == q {
				return r.Route.Limits[i].Ahead
			}
		}
	}
	return 0
}
