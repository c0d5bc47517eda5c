package providers

import (
	"gopkg.in/yaml.v3"

	"github.com/fleetquota/throttle/quota"
)

// This file reads a limit's learn field (docs/configuration.md, "sync"):
//
//	learn: true               the configured rate and burst are the floor
//	learn: {ceiling: 10000}   and the learned rate stops at 10000 per period
//
// A learning limit runs at the limit the vendor states on its responses
// (quota.Limit.Learn, package quota's doc "Learning"), which only a
// counter that sync maps to the limit states: a learning limit no sync
// maps is an error (checkLearners).

// learn decodes the field learn of a GCRA limit q, whose count was
// scaled by headroom bp: q.Learn and q.Ceiling (scaled alike).
func (d *limitDecoder) learn(q *quota.Limit, bp int64) {
	n := d.f["learn"]
	if n == nil {
		return
	}
	path := d.path + ".learn"
	d.ln.learn = n
	var ceiling int64
	switch {
	case n.Kind == yaml.ScalarNode && (n.Value == "true" || n.Value == "false"):
		if n.Value == "false" {
			return
		}
	case n.Kind == yaml.MappingNode:
		f := d.fields(n, path, "ceiling")
		if f == nil {
			d.good = false
			return
		}
		cn := f["ceiling"]
		if cn == nil {
			d.bad(n, path+".ceiling", "missing: want learn: true, or learn: {ceiling: N} with N the most events per period to learn")
			return
		}
		v, ok := d.integer(cn, path+".ceiling", 1, maxCount)
		if !ok {
			d.good = false
			return
		}
		if v < d.sf.rate {
			d.bad(cn, path+".ceiling", "ceiling %d is below the rate %d, the floor a learning limit never goes under", v, d.sf.rate)
			return
		}
		ceiling = v
	default:
		d.bad(n, path, "want true, false or {ceiling: N}, got %s", kindName(n))
		return
	}
	switch {
	case !d.good: // the limit is dropped already
	case d.sf.kind != quota.GCRA:
		d.bad(n, path, "only a GCRA limit (a rate per period) can learn the vendor's limit, not a %v limit", d.sf.kind)
	case q.Period != d.sf.period:
		d.bad(n, path, "the headroom turns %d per %v into %d per %v, which a stated limit per %v cannot scale: choose a headroom that leaves a whole count", d.sf.rate, d.sf.period, q.Rate, q.Period, d.sf.period)
	default:
		q.Learn = true
		if ceiling != 0 {
			q.Ceiling = max(scale(ceiling, bp), q.Rate)
		}
	}
}

// checkLearners reports every learning limit among nodes that no sync of
// the provider maps a counter to: only a counter states its limit.
func (l *loader) checkLearners(p *Provider, nodes []*limitNodes) {
	syncs := []*Sync{p.Sync}
	for i := range p.Routes {
		syncs = append(syncs, p.Routes[i].Sync)
	}
	mapped := map[string]bool{}
	for _, sc := range syncs {
		if sc != nil {
			for _, name := range sc.Counters {
				mapped[name] = true
			}
		}
	}
	for _, ln := range nodes {
		if ln.lim != nil && ln.lim.Quota.Learn && !mapped[ln.lim.Quota.Name] {
			l.add(ln.learn, join(ln.path, "learn"), "limit %s learns the vendor's limit, but no sync counter is mapped to it: add sync: {format: ..., counters: {<counter>: %s}} to the provider or its route", ln.lim.Quota.Name, ln.lim.Quota.Name)
		}
	}
}
