package main

import (
	"context"
	"sort"
	"time"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/redisstore"
)

// view is one refresh, as --json writes it.
type view struct {
	Now          time.Time      `json:"now"`
	Prefix       string         `json:"prefix"`
	ScanComplete bool           `json:"scan_complete"`
	Error        string         `json:"error,omitempty"`
	Providers    []providerView `json:"providers"`
	Pauses       []pauseView    `json:"pauses"`   // status_notes.go
	Refusals     []refusalView  `json:"refusals"` // status_notes.go
	// RefusalsError says why Refusals could not be read.
	RefusalsError string `json:"refusals_error,omitempty"`
}

// providerView is one provider's part of a view: its own rows, then its
// busiest tenants'.
type providerView struct {
	Name        string     `json:"name"`
	TenantScope string     `json:"tenant_scope,omitempty"`
	PausedUntil *time.Time `json:"paused_until"`
	// AllPausedUntil: the provider's pause of every tenant ("throttle
	// pause PROVIDER" with keys per tenant), apart from its own pause of
	// the requests without a tenant value.
	AllPausedUntil *time.Time  `json:"all_paused_until,omitempty"`
	ScopesKnown    int         `json:"scopes_known"`
	ScopesShown    int         `json:"scopes_shown"`
	Tenant         *tenantView `json:"tenant,omitempty"`
	Rows           []row       `json:"rows"`
}

// row is one limit's state for one scope value (the schema is in the
// usage text).
type row struct {
	Limit        string     `json:"limit"`
	Kind         string     `json:"kind"`
	Spec         string     `json:"spec"`
	Published    string     `json:"published"`
	Effective    string     `json:"effective"`
	Scope        string     `json:"scope"`
	Value        string     `json:"value"`
	Capacity     int64      `json:"capacity"`
	Used         int64      `json:"used"`
	Remaining    int64      `json:"remaining"`
	Ahead        int64      `json:"ahead"`
	Debt         int64      `json:"debt"`
	NextExpiryMS int64      `json:"next_expiry_ms"`
	ResetAfterMS int64      `json:"reset_after_ms"`
	PausedUntil  *time.Time `json:"paused_until"`
	Plan         string     `json:"plan,omitempty"`
	Key          string     `json:"key"`
	Exists       bool       `json:"exists"`
	// Classes and Fair: status_shares.go.
	Classes []classView `json:"classes,omitempty"`
	Fair    *fairView   `json:"fair,omitempty"`
}

// maxKnown bounds the scope values remembered per provider.
const maxKnown = 10000

// watcher holds what status learns across refreshes.
type watcher struct {
	e     *env
	provs []*providers.Provider
	fixed string // PROVIDER/SCOPE: the one scope value shown
	top   int
	steps int
	// business: fixed is a business (--tenant), shown on the limits
	// scoped per business alone; plans: the tenants' plans (built when
	// first needed).
	business bool
	plans    *statusPlans

	scan     *redisstore.KeyScan
	scoped   []*providers.Provider // those of provs with a scoped limit
	complete bool
	known    map[*providers.Provider]map[string]bool
}

// prepare lists the providers with scoped limits and starts the scan when
// there are any (and no one scope value was asked for).
func (w *watcher) prepare() {
	tenant := false
	for _, p := range w.provs {
		if _, ok := p.TenantScope(); ok {
			tenant = true
		}
		for _, l := range allLimits(p) {
			if l.lim.Scope.Kind != providers.ScopeProvider {
				w.scoped = append(w.scoped, p)
				break
			}
		}
	}
	if w.fixed != "" || len(w.scoped) == 0 {
		w.complete = true
		return
	}
	// One provider with keys per provider keeps every key in its own
	// tag: match only that tag.
	match := "*"
	if len(w.provs) == 1 && !tenant {
		match = redisstore.TagMatch(w.provs[0].Tag(""))
	}
	w.scan = w.e.store.NewKeyScan(match, 0)
}

// learn records the scope values of keys a scan found.
func (w *watcher) learn(keys []string) {
	for _, k := range keys {
		tag, key, kind, ok := w.e.store.ParseKey(k)
		if !ok {
			continue
		}
		for _, p := range w.scoped {
			ref, ok := p.ParseKey(tag, key, kind == redisstore.KeyPause)
			if !ok {
				continue
			}
			if ref.Part != "" {
				m := w.known[p]
				if m == nil {
					m = map[string]bool{}
					w.known[p] = m
				}
				if len(m) < maxKnown {
					m[ref.Part] = true
				}
			}
			break
		}
	}
}

// group is one read: a tag's keys, and the rows they become.
type group struct {
	p     *providers.Provider
	part  string // "" for the provider's own group
	lims  []*providers.Limit
	plan  *providers.Plan // a tenant's plan, whose figures lims have
	req   quota.Request
	snap  redisstore.Snapshot
	score float64 // lowest share of capacity remaining
	out   []row   // the rows it became
}

// refresh advances the scan and reads every known key in one round.
func (w *watcher) refresh(ctx context.Context) (*view, error) {
	if w.scan != nil {
		keys, complete, err := w.scan.Step(ctx, w.steps)
		if err != nil {
			return nil, err
		}
		w.learn(keys)
		w.complete = w.complete || complete
	}
	groups := w.groups()
	reqs := make([]*quota.Request, len(groups))
	for i, g := range groups {
		reqs[i] = &g.req
	}
	snaps, err := w.e.store.InspectAll(ctx, reqs)
	if err != nil {
		return nil, err
	}
	v := &view{Prefix: w.e.store.Prefix(), ScanComplete: w.complete}
	for i, g := range groups {
		g.snap = snaps[i]
		if g.snap.Now.After(v.Now) {
			v.Now = g.snap.Now
		}
	}
	v.Now = v.Now.UTC()
	if err := w.annotate(ctx, v, groups); err != nil {
		return nil, err
	}
	for _, p := range w.provs {
		// groups holds each provider's own group, then its tenants'.
		n := 1
		for n < len(groups) && groups[n].p == p && groups[n].part != "" {
			n++
		}
		v.Providers = append(v.Providers, w.providerView(p, groups[0], groups[1:n]))
		groups = groups[n:]
	}
	return v, nil
}

// groups lists the reads of a refresh: per provider its own group, then
// one per scope value known (or the one asked for).
func (w *watcher) groups() []*group {
	var groups []*group
	for _, p := range w.provs {
		groups = append(groups, w.baseGroup(p))
		for _, part := range w.parts(p) {
			if g := w.tenantGroup(p, part); g != nil {
				groups = append(groups, g)
			}
		}
	}
	return groups
}

// parts lists the key parts of the scope values of p to read, sorted.
func (w *watcher) parts(p *providers.Provider) []string {
	if w.fixed == "" {
		parts := make([]string, 0, len(w.known[p]))
		for part := range w.known[p] {
			parts = append(parts, part)
		}
		sort.Strings(parts)
		return parts
	}
	s, _ := p.TenantScope()
	for _, l := range allLimits(p) {
		if l.lim.Scope.Kind != providers.ScopeProvider {
			s = l.lim.Scope
			break
		}
	}
	if w.business {
		s = providers.Scope{Kind: providers.ScopeBusiness}
	}
	if part := scopePart(s, w.fixed); part != "" {
		return []string{part}
	}
	return nil
}

// providerView turns a provider's groups, read, into its part of the
// view: its own rows, then its busiest tenants'. Tenants found idle are
// forgotten: their keys expired.
func (w *watcher) providerView(p *providers.Provider, base *group, tenants []*group) providerView {
	own, all := base.snap.PausedUntil, time.Time{}
	if ps := base.snap.Pauses; len(base.req.Pauses) > 1 && len(ps) > 1 {
		own, all = ps[0], ps[1]
	}
	pv := providerView{Name: p.Name, PausedUntil: timePtr(own), AllPausedUntil: timePtr(all)}
	if s, ok := p.TenantScope(); ok {
		pv.TenantScope = s.String()
	}
	pv.Rows = base.rows(laterOf(own, all))
	if w.business && (len(tenants) == 1 || base.req.Share.Key != "") {
		pl, from := w.planOf(p, scopePart(providers.Scope{Kind: providers.ScopeBusiness}, w.fixed))
		pv.Tenant = &tenantView{Business: w.fixed, From: from}
		if pl != nil {
			pv.Tenant.Plan = pl.Name
		}
	}
	var live []*group
	for _, g := range tenants {
		idle := !g.snap.PausedUntil.After(g.snap.Now)
		for _, it := range g.snap.Items {
			if it.Exists {
				idle = false
			}
		}
		if idle && w.fixed == "" {
			delete(w.known[p], g.part) // expired: forget it
			continue
		}
		live = append(live, g)
	}
	for _, g := range live {
		pause := g.snap.PausedUntil
		if len(g.req.Pauses) == 0 {
			pause = base.snap.PausedUntil
		}
		g.out = g.rows(laterOf(pause, all))
	}
	sort.SliceStable(live, func(a, b int) bool { return live[a].score < live[b].score })
	pv.ScopesKnown = len(live)
	if w.top > 0 && len(live) > w.top {
		live = live[:w.top]
	}
	pv.ScopesShown = len(live)
	for _, g := range live {
		pv.Rows = append(pv.Rows, g.out...)
	}
	return pv
}

// baseGroup reads a provider's provider-wide limits, the shared state of
// its scoped limits, and its pause.
func (w *watcher) baseGroup(p *providers.Provider) *group {
	g := &group{p: p}
	tag, pause := p.PauseKey("")
	g.req = quota.Request{Tag: tag, Pauses: []string{pause}}
	if _, all := p.AllPauseKey(); all != pause { // Pauses[1]: the pause of every tenant
		g.req.Pauses = append(g.req.Pauses, all)
	}
	g.plan = p.DefaultPlan() // a request without a business is on it
	// --tenant: the business's lane of a fair limit.
	if w.business {
		part := scopePart(providers.Scope{Kind: providers.ScopeBusiness}, w.fixed)
		pl, _ := w.planOf(p, part)
		g.req.Share = fairShare(p, part, pl)
	}
	for _, l := range allLimits(p) {
		if l.lim.Scope.Kind != providers.ScopeProvider && l.lim.Missing != providers.Shared {
			continue
		}
		t, k := p.StateKey(l.lim, "")
		if t != tag {
			continue // cannot happen: a value-less request is tagged by the provider
		}
		lim := g.plan.Override(l.lim)
		g.lims = append(g.lims, lim)
		g.req.Items = append(g.req.Items, quota.Item{Limit: lim.Quota, Key: k})
	}
	return g
}

// tenantGroup reads the scoped limits of one scope value (and, for a
// provider tagged per tenant, its pause); nil when no limit applies.
func (w *watcher) tenantGroup(p *providers.Provider, part string) *group {
	g := &group{p: p, part: part}
	if _, ok := p.TenantScope(); ok {
		tag, pause := p.PauseKey(part)
		g.req = quota.Request{Tag: tag, Pauses: []string{pause}}
	}
	g.plan, _ = w.planOf(p, part)
	for _, l := range allLimits(p) {
		if l.lim.Scope.Kind == providers.ScopeProvider || !applies(l.lim, part) ||
			w.business && l.lim.Scope.Kind != providers.ScopeBusiness {
			continue
		}
		tag, k := p.StateKey(l.lim, part)
		lim := g.plan.Override(l.lim) // the same key, the plan's figures
		g.req.Tag = tag
		g.lims = append(g.lims, lim)
		g.req.Items = append(g.req.Items, quota.Item{Limit: lim.Quota, Key: k})
	}
	if len(g.req.Items) == 0 {
		return nil
	}
	return g
}

// applies reports whether a limit restricted by Only applies to the scope
// value whose key part is part.
func applies(lim *providers.Limit, part string) bool {
	if len(lim.Only) == 0 {
		return true
	}
	for _, o := range lim.Only {
		if quota.SafePart(o) == part {
			return true
		}
	}
	return false
}

// rows turns a group's snapshot into rows, and sets its score.
func (g *group) rows(pause time.Time) []row {
	var out []row
	g.score = 1
	for i, lim := range g.lims {
		it := g.snap.Items[i]
		q := lim.Quota.Learned(it.Rate) // a learning limit as decisions run it now
		sp, eff := spec(q), readable(q)
		if q != lim.Quota {
			sp += " (learned)"
			eff += " (learned)"
		}
		pub := lim.Published
		if pub == nil {
			pub = lim.Quota
		}
		r := row{
			Limit: q.Name, Kind: q.Kind.String(), Spec: sp, Published: readable(pub), Effective: eff,
			Scope: lim.Scope.String(), Value: g.part,
			Capacity: q.Capacity(), Used: it.Used, Remaining: it.Remaining, Ahead: it.Ahead, Debt: it.Debt,
			NextExpiryMS: ceilMS(it.NextExpiry), ResetAfterMS: ceilMS(it.ResetAfter),
			Key: it.Key, Exists: it.Exists,
			Classes: classViews(g.p, g.snap, i, q), Fair: g.fairOf(i, lim),
		}
		if pause.After(g.snap.Now) {
			r.PausedUntil = timePtr(pause)
		}
		if g.plan != nil && lim.Scope.Kind == providers.ScopeBusiness {
			r.Plan = g.plan.Name
		}
		if s := float64(it.Remaining) / float64(q.Capacity()); s < g.score {
			g.score = s
		}
		out = append(out, r)
	}
	if pause.After(g.snap.Now) {
		g.score = -1 // a paused scope is the busiest of all
	}
	return out
}

// ceilMS is d in milliseconds, rounded up.
func ceilMS(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// laterOf returns the later of two pauses' ends.
func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
