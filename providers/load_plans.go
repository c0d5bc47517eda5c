package providers

import (
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fleetquota/throttle/quota"
)

// This file decodes plans: a provider's plans and default_plan, and the
// configuration's tenants map (package doc "Plans").

var planFields = []string{"limits", "weight"}

// planLimitFields are the fields of a plan's limit written as a mapping:
// the figures of a limit, without what a plan cannot change (its name,
// scope, missing, only, learn).
var planLimitFields = []string{"limit", "rate", "period", "burst", "quota", "per", "resets", "timezone", "rolling"}

// plans decodes a provider's plans and default_plan (in f, the provider's
// fields) into p. lims are the nodes of the provider's limits, its own
// and its routes', and bp its headroom in basis points.
func (l *loader) plans(p *Provider, f map[string]*yaml.Node, path string, bp int64, lims []*limitNodes) {
	pn, dn := f["plans"], f["default_plan"]
	if pn == nil {
		if dn != nil {
			l.add(dn, path+".default_plan", "default_plan names one of the provider's plans, but provider %q has no plans: add plans, or remove default_plan", p.Name)
		}
		return
	}
	pp := path + ".plans"
	if pn.Kind != yaml.MappingNode {
		l.wrongKind(pn, pp, "a mapping of plan names to plans, e.g. {enterprise: {limits: {core: 15000/h}, weight: 3}}")
		return
	}
	if len(pn.Content) == 0 {
		l.add(pn, pp, "empty: define at least one plan, or remove plans")
		return
	}
	set := &planSet{byName: map[string]*Plan{}}
	for i := 0; i+1 < len(pn.Content); i += 2 {
		k, v := pn.Content[i], pn.Content[i+1]
		kp := join(pp, k.Value)
		switch {
		case k.Kind != yaml.ScalarNode:
			l.add(k, pp, "a plan name must be a string")
			continue
		case set.byName[k.Value] != nil:
			l.add(k, kp, "plan %q is already defined: plan names are unique within a provider", k.Value)
			continue
		case !validName(k.Value):
			l.add(k, kp, "invalid plan name %q: %s", k.Value, nameRule)
			continue
		case len(set.list) == maxPlans:
			l.add(k, kp, "more than %d plans: a plan is a tier of a price list; give a tenant's own figures through a plan shared by the tenants that pay for them", maxPlans)
			return
		}
		// A plan with problems is kept (the configuration is refused
		// anyway), so that default_plan and tenants naming it report
		// nothing more.
		pl := l.plan(p, k.Value, v, kp, bp, lims)
		set.list = append(set.list, pl)
		set.byName[pl.Name] = pl
	}
	p.plans = set
	if dn == nil {
		return
	}
	if name, ok := l.str(dn, path+".default_plan", "a plan name"); ok {
		if pl := set.byName[name]; pl != nil {
			set.def = pl
		} else {
			l.add(dn, path+".default_plan", "default_plan %q is not a plan of provider %q; its plans: %s", name, p.Name, planList(set))
		}
	}
}

// planList is the names of a provider's plans, for messages.
func planList(set *planSet) string {
	names := make([]string, len(set.list))
	for i, pl := range set.list {
		names[i] = pl.Name
	}
	return strings.Join(names, ", ")
}

// plan decodes one plan of provider p, v at path. It never returns nil.
func (l *loader) plan(p *Provider, name string, v *yaml.Node, path string, bp int64, lims []*limitNodes) *Plan {
	pl := &Plan{Name: name, Weight: 1, over: map[*Limit]*Limit{}}
	f := l.fields(v, path, planFields...)
	if f == nil {
		return pl
	}
	if wn := f["weight"]; wn != nil {
		if w, ok := l.integer(wn, path+".weight", 1, MaxWeight); ok {
			pl.Weight = w
		}
	}
	ln := f["limits"]
	if ln == nil {
		return pl
	}
	lp := path + ".limits"
	if ln.Kind != yaml.MappingNode {
		l.wrongKind(ln, lp, "a mapping of limit names to figures, e.g. {core: 15000/h}")
		return pl
	}
	var bases []*Limit
	var nodes []*limitNodes
	for i := 0; i+1 < len(ln.Content); i += 2 {
		k, v := ln.Content[i], ln.Content[i+1]
		kp := join(lp, k.Value)
		if k.Kind != yaml.ScalarNode {
			l.add(k, lp, "a limit name must be a string")
			continue
		}
		base := planBase(l, p, k, kp, lims)
		if base == nil {
			continue
		}
		dup := false
		for _, b := range bases {
			dup = dup || b == base
		}
		if dup {
			l.add(k, kp, "limit %s is already set in this plan", k.Value)
			continue
		}
		if o, on := l.planLimit(v, lp, k.Value, bp, base); o != nil {
			bases = append(bases, base)
			pl.Limits = append(pl.Limits, *o)
			nodes = append(nodes, on)
		}
	}
	for i := range pl.Limits {
		nodes[i].lim = &pl.Limits[i]
		pl.over[bases[i]] = &pl.Limits[i]
	}
	// Every route's cost must fit the plan's figures of its stack, as it
	// must fit the limits as written.
	for i := range p.Routes {
		r := &p.Routes[i]
		var stack []*limitNodes
		for j, b := range bases {
			if inStack(b, p.Limits) || inStack(b, r.Limits) {
				stack = append(stack, nodes[j])
			}
		}
		l.stackAdmits(r, bp, stack)
	}
	return pl
}

// inStack reports whether lim is one of lims.
func inStack(lim *Limit, lims []Limit) bool {
	for i := range lims {
		if &lims[i] == lim {
			return true
		}
	}
	return false
}

// planBase finds the limit of p that a plan's limit named by k (at path)
// changes, recording a problem when there is none or a plan cannot change
// it. lims are the nodes of p's limits, its own and its routes'.
func planBase(l *loader, p *Provider, k *yaml.Node, path string, lims []*limitNodes) *Limit {
	var base *limitNodes
	names := make([]string, 0, len(lims))
	for _, ln := range lims {
		if ln.lim.Scope.Kind == ScopeBusiness {
			names = append(names, ln.lim.Quota.Name)
		}
		if ln.lim.Quota.Name == k.Value {
			base = ln
		}
	}
	scoped := "provider " + p.Name + " has no limit scoped per business, which is what a plan changes"
	if len(names) > 0 {
		scoped = "a plan changes the limits scoped per business: " + strings.Join(names, ", ")
	}
	switch {
	case base == nil:
		l.add(k, path, "provider %q has no limit %q (its own or its routes'); %s", p.Name, k.Value, scoped)
		return nil
	case base.lim.Scope.Kind == ScopeProvider:
		l.add(k, path, "limit %s is provider-wide: its one state is shared by every tenant, so no tenant's plan can change it (a fair share divides it by the plans' weights); %s", k.Value, scoped)
		return nil
	case base.lim.Scope.Kind != ScopeBusiness:
		l.add(k, path, "limit %s is scoped by %s, but a plan belongs to a business (WithBusiness, Throttle-Business); %s", k.Value, base.lim.Scope, scoped)
		return nil
	}
	return base.lim
}

// planLimit decodes a plan's figures for base, n under the key key of
// the plan's limits at parent: a short form ("15000/h") or a mapping of
// the figure fields. The result is base with the plan's figures, headroom
// bp applied: its kind, calendar, rolling period, lease and learning are
// base's, which a plan cannot change (the store reads the state by them).
// It returns nil after a problem.
func (l *loader) planLimit(n *yaml.Node, parent, key string, bp int64, base *Limit) (*Limit, *limitNodes) {
	path := join(parent, key)
	var f map[string]*yaml.Node
	at := path // where engineAccepts reports
	if n.Kind == yaml.ScalarNode {
		f = map[string]*yaml.Node{"limit": n}
		// The figure is the value itself: the decoder's problems name its
		// field "limit", which this form does not have.
		first := len(l.problems)
		defer func() {
			for i := first; i < len(l.problems); i++ {
				if p := l.problems[i].Path; p == path+".limit" || p == parent {
					l.problems[i].Path = path
				}
			}
		}()
		at = parent
	} else if f = l.fields(n, path, planLimitFields...); f == nil {
		return nil, nil
	}
	d := l.limitDecoder(f, n, path)
	d.figures()
	q := &quota.Limit{Name: base.Quota.Name}
	d.calendar(q)
	if !d.good {
		return nil, nil
	}
	if at == parent && d.ln.capField == "limit" {
		d.ln.path, d.ln.capField = parent, key
	}
	b := base.Quota
	if d.sf.kind == quota.Window && !d.hasReset && d.tzNode == nil {
		// A window keeps the limit's reset time and time zone unless the
		// plan restates them.
		q.Calendar.Reset, q.Calendar.Location = b.Calendar.Reset, b.Calendar.Location
	}
	if msg := samePlace(b, d.sf.kind, d.sf.period, q.Calendar, f["limit"]); msg != "" {
		l.add(n, path, "%s", msg)
		return nil, nil
	}
	o, pub := *b, *base.Published
	pub.Rate, pub.Burst = d.sf.rate, d.sf.burst
	if b.Kind == quota.GCRA {
		var burst int64
		if d.sf.burst != 0 {
			burst = scale(d.sf.burst, bp)
		}
		pub.Period = d.sf.period
		o.Rate, o.Period, o.Burst = scaleRate(d.sf.rate, d.sf.period, burst, bp)
		if o.Learn && o.Period != d.sf.period {
			l.add(n, path, "limit %s learns the vendor's limit, but the headroom turns the plan's %d per %v into %d per %v, which a stated limit per %v cannot scale: choose figures that leave a whole count", b.Name, d.sf.rate, d.sf.period, o.Rate, o.Period, d.sf.period)
			return nil, nil
		}
		if o.Learn && o.Ceiling != 0 && o.Ceiling < o.Rate {
			l.add(n, path, "limit %s learns up to its ceiling, %d per %v after headroom, and the plan's rate %d is above it: raise the limit's ceiling (learn: {ceiling: N}) to the most any plan allows", b.Name, o.Ceiling, b.Period, o.Rate)
			return nil, nil
		}
	} else {
		o.Rate = scale(d.sf.rate, bp)
	}
	if !l.engineAccepts(&o, d.ln, n, at) {
		return nil, nil
	}
	return &Limit{Quota: &o, Published: &pub, Scope: base.Scope, Missing: base.Missing, Only: base.Only}, d.ln
}

// samePlace returns why a plan's figure of kind, period and calendar
// cannot replace limit b, or "" when it can: a plan changes the counts
// (and a GCRA limit's period), never how the store reads the state. short
// is the figure's short form node, if any.
func samePlace(b *quota.Limit, kind quota.Kind, period time.Duration, cal quota.Calendar, short *yaml.Node) string {
	const form = "write the plan's figure in the limit's own form"
	switch {
	case kind != b.Kind:
		return fmt.Sprintf("limit %s is %s, but the plan's figure is %s: a plan changes a limit's figures, not its kind (the store reads the limit's state by its kind); %s",
			b.Name, describe(b.Kind, b.Calendar), describe(kind, cal), form)
	case kind == quota.Window && cal.Unit != b.Calendar.Unit:
		return fmt.Sprintf("limit %s counts per %s, but the plan's figure per %s: a plan cannot change a window's unit (a tenant's count would be read against another window); %s",
			b.Name, b.Calendar.Unit, cal.Unit, form)
	case kind == quota.Window && !sameCalendar(cal, b.Calendar):
		return fmt.Sprintf("limit %s counts %s, but the plan's figure %s: a plan cannot move a window; leave the reset time and time zone out of the plan's figure (it keeps the limit's), or state the limit's",
			b.Name, calendarString(b.Calendar), calendarString(cal))
	case kind == quota.Rolling && period != b.Period:
		return fmt.Sprintf("limit %s counts over a trailing %v, but the plan's figure over %v: a plan cannot change a rolling window's period (its buckets are laid out by it); %s",
			b.Name, b.Period, period, form)
	case kind == quota.Concurrency && short != nil && strings.Contains(short.Value, "lease") && period != b.Period:
		return fmt.Sprintf("limit %s holds leases for %v, but the plan's figure for %v: a plan cannot change a lease; leave it out (the plan keeps the limit's)",
			b.Name, b.Period, period)
	}
	return ""
}

// describe says what kind of limit a figure is, for messages.
func describe(kind quota.Kind, cal quota.Calendar) string {
	switch kind {
	case quota.GCRA:
		return "a GCRA limit (a rate per period)"
	case quota.Window:
		return "a calendar window " + calendarString(cal)
	case quota.Rolling:
		return "a rolling window"
	case quota.Concurrency:
		return "a concurrency limit"
	}
	return kind.String()
}

// tenants decodes the configuration's tenants map, n (nil when absent):
// business to plan name, each plan defined by some provider of cfg.
func (l *loader) tenants(cfg *Config, n *yaml.Node) {
	cfg.plans.names = map[string]bool{}
	for _, p := range cfg.providers {
		if p.plans != nil {
			for _, pl := range p.plans.list {
				cfg.plans.names[pl.Name] = true
			}
		}
	}
	if n == nil {
		return
	}
	if n.Kind != yaml.MappingNode {
		l.wrongKind(n, "tenants", "a mapping of businesses to plan names, e.g. {acme: enterprise}")
		return
	}
	cfg.plans.tenants = make(map[string]string, len(n.Content)/2)
	lines := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kp := join("tenants", k.Value)
		if k.Kind != yaml.ScalarNode || k.Tag == "!!null" || k.Value == "" {
			l.add(k, "tenants", "a business must be a non-empty string, as the requests name it (WithBusiness, Throttle-Business)")
			continue
		}
		if line, dup := lines[k.Value]; dup {
			l.add(k, kp, "business %q is already mapped at line %d", k.Value, line)
			continue
		}
		lines[k.Value] = k.Line
		name, ok := l.str(v, kp, "a plan name")
		if !ok {
			continue
		}
		if !cfg.plans.names[name] {
			defined := "no provider defines plans"
			if len(cfg.plans.names) > 0 {
				defined = "the plans defined: " + strings.Join(cfg.PlanNames(), ", ")
			}
			l.add(v, kp, "business %q is mapped to plan %q, which no provider defines; %s", k.Value, name, defined)
			continue
		}
		cfg.plans.tenants[k.Value] = name
	}
}
