package providers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// plan is the precomputed stack of a provider's requests that match no
// route, or of one route.
type plan struct {
	limits []*Limit
	cost   int64
	// costs[i] is limits[i]'s own cost (a route's costs entry), or 0.
	costs []int64
	// static is set when every limit is provider-wide: the request is the
	// same for every call (Items, Tag and Pauses are shared).
	static bool
	items  []quota.Item
	// keys[i] is the key of limits[i] when it has no scope value: its
	// name (provider-wide or the shared bucket).
	keys []string
	// fair says who shares the stack's fair limits (fair.go); nil when
	// it has none.
	fair *Fair
}

// finish builds the plans of a provider and its limits by name.
func (l *loader) finish(p *Provider) {
	p.pauses = []string{pauseKey}
	if p.Keys == PerTenant { // the requests without a tenant value: see AllPauseKey
		p.pauses = append(p.pauses, allPauseKey)
	}
	p.plan = newPlan(p.Limits, nil, 1, nil)
	for i := range p.Routes {
		r := &p.Routes[i]
		r.plan = newPlan(p.Limits, r.Limits, r.Cost, r.Costs)
	}
	p.limits = make(map[string]*Limit)
	for _, lim := range p.allLimits() {
		p.limits[lim.Quota.Name] = lim
	}
}

// allLimits lists the provider's limits and then its routes', in file
// order.
func (p *Provider) allLimits() []*Limit {
	var out []*Limit
	for i := range p.Limits {
		out = append(out, &p.Limits[i])
	}
	for i := range p.Routes {
		for j := range p.Routes[i].Limits {
			out = append(out, &p.Routes[i].Limits[j])
		}
	}
	return out
}

func newPlan(base, route []Limit, cost int64, costs map[string]int64) plan {
	pl := plan{cost: cost, static: true}
	for _, ls := range [][]Limit{base, route} {
		for i := range ls {
			lim := &ls[i]
			pl.limits = append(pl.limits, lim)
			pl.costs = append(pl.costs, costs[lim.Quota.Name])
			pl.keys = append(pl.keys, joinKey(lim.Quota.Name, ""))
			if lim.Fair != nil {
				pl.fair = lim.Fair
			}
			if lim.Scope.Kind != ScopeProvider {
				pl.static = false
			}
		}
	}
	if pl.static {
		for i, lim := range pl.limits {
			pl.items = append(pl.items, quota.Item{Limit: lim.Quota, Key: pl.keys[i], Cost: pl.costs[i]})
		}
	}
	return pl
}

// Input is what the transport knows about a request beyond the request
// itself. The zero value is a request with no business, no labels, the
// route's cost and the provider's max wait.
type Input struct {
	// Business is the business (tenant) the request is made for; it is
	// the value of "business" scopes and the tenant of "fair: tenant"
	// limits. Empty means none.
	Business string
	// Labels are the values of "label:<name>" scopes and the tenants of
	// "fair: label:<name>" limits, e.g. {"class": "batch"}. A missing or
	// empty label means none.
	Labels map[string]string
	// Cost, when positive, replaces the route's cost (e.g. the tokens of
	// a request to a model API). Negative is an error.
	Cost int64
	// Costs, by limit name, gives limits a cost of their own for this
	// request, overriding Cost and the route's costs: e.g. {"tokens":
	// 1200} while the requests limit counts 1. Names of limits not in the
	// stack are ignored; a negative cost is an error.
	Costs map[string]int64
	// MaxWait, when not nil, replaces the provider's max wait.
	MaxWait *time.Duration
	// PlanOf, when set, names Business's plan for a provider that has
	// plans (Config.PlanFor): a lookup in the caller's database, e.g.
	// throttle.WithPlans. It is called only for such a provider and a
	// request with a business, and must be fast and safe for concurrent
	// use (cache it). "" means it does not know: the configuration's
	// tenants map, then the default plan, apply.
	PlanOf func(business string) (plan string)
	// Priority names the request's priority class, one of its
	// provider's classes; empty means the route's default, else the
	// provider's. A provider without classes ignores it; one that does
	// not declare it makes Resolve fail with ErrUnknownClass.
	Priority string
}

// A Resolution is what applies to one request.
type Resolution struct {
	// Provider is the matched provider: its behaviour (OnLimit, Mode,
	// OnStoreError, LocalShare, Signals) applies to the request.
	Provider *Provider
	// Route is the matched route, or nil.
	Route *Route
	// Request is ready for quota.Store.Reserve. Its Items and Pauses may
	// be shared with other resolutions: do not modify them. Items is
	// empty when every limit was skipped for a missing scope value: there
	// is nothing to decide.
	Request quota.Request
	// Pause is the key (within Request.Tag) to pause when the vendor
	// throttles this request: quota.Store.Pause(ctx, Request.Tag, Pause, d).
	Pause string
	// Sync is how the response reports the vendor's counters: the
	// route's Sync, else the provider's; nil when none is configured.
	Sync *Sync
	// Settle is how the response reports the request's actual cost: the
	// route's Settle, else the provider's; nil when none is configured.
	Settle *Settle
	// Plan is the business's plan whose figures Request holds (see
	// Config.PlanFor); nil when the provider has no plans, or the
	// business has none and the provider no default plan: its limits as
	// written apply.
	Plan *Plan
}

// Class returns the name of the request's priority class, whose index is
// Request.Class: "" when the provider declares no classes. (A method, not
// a field: every request's Resolution is that much smaller.)
func (r *Resolution) Class() string {
	return r.Provider.ClassName(r.Request.Class)
}

// A Registry resolves requests to their provider and limit stack under the
// current configuration. It is safe for concurrent use; Reload swaps the
// configuration atomically, and a resolution in progress finishes under
// the configuration it started with.
type Registry struct {
	cur atomic.Pointer[Config]
}

// NewRegistry returns a registry serving cfg. A nil cfg matches no
// request.
func NewRegistry(cfg *Config) *Registry {
	r := &Registry{}
	if cfg != nil {
		r.cur.Store(cfg)
	}
	return r
}

// config returns the configuration in use, or nil.
func (r *Registry) config() *Config { return r.cur.Load() }

// Reload makes cfg the configuration for every later Resolve. A nil cfg is
// an error and changes nothing.
//
// A configuration that would move a provider's keys to other hash tags
// (its keys field or its tenant scope changed: KeysMoved in Changes) is
// refused with an error wrapping ErrKeysMoved, and the old configuration
// stays: every tenant's spent quota would be forgotten, and during a
// rolling deploy old and new processes would keep two quotas. Pass
// AllowMovedKeys to accept it. Other changes (a limit renamed, removed or
// rescoped) are the configuration's own business; throttle validate
// --against lists them all.
func (r *Registry) Reload(cfg *Config, opts ...Option) error {
	if cfg == nil {
		return errors.New("providers: Reload with a nil configuration")
	}
	o := newOptions(opts)
	for {
		old := r.cur.Load()
		if !o.allowMoves {
			var moved []string
			for _, c := range Changes(old, cfg) {
				if c.Kind == KeysMoved {
					moved = append(moved, c.String())
				}
			}
			if len(moved) > 0 {
				return fmt.Errorf("%w (pass providers.AllowMovedKeys to accept): %s", ErrKeysMoved, strings.Join(moved, "; "))
			}
		}
		// Checked against the configuration it replaces, even when
		// another Reload got there first.
		if r.cur.CompareAndSwap(old, cfg) {
			return nil
		}
	}
}

// ReloadFile loads the configuration file at path and, only if it is
// valid (and, as Reload, moves no keys unless AllowMovedKeys is among
// opts), makes it the configuration in use. On error the old
// configuration stays, and the error (a *ConfigError for a bad file)
// lists every problem.
func (r *Registry) ReloadFile(path string, opts ...Option) error {
	cfg, err := LoadFile(path, opts...)
	if err != nil {
		return err
	}
	return r.Reload(cfg, opts...)
}

// Resolve finds the provider of req and the stack of limits that applies.
// ok is false when no provider claims the request's host: the transport
// sends it unthrottled. err is set when a limit refuses a missing scope
// value (errors.Is(err, ErrMissingScope)) or the Input is impossible
// (errors.Is(err, quota.ErrInvalid)); the Resolution then still names
// the provider.
func (r *Registry) Resolve(req *http.Request, in Input) (Resolution, bool, error) {
	cfg := r.cur.Load()
	if cfg == nil {
		return Resolution{}, false, nil
	}
	return cfg.Resolve(req, in)
}

// Resolve is Registry.Resolve for one configuration.
func (c *Config) Resolve(req *http.Request, in Input) (Resolution, bool, error) {
	if c == nil || req == nil {
		return Resolution{}, false, nil
	}
	host, scheme := req.Host, ""
	path := ""
	if u := req.URL; u != nil {
		if u.Host != "" {
			host = u.Host
		}
		scheme, path = u.Scheme, cleanPath(u.Path)
	}
	p := c.hosts.lookup(host, scheme)
	if p == nil {
		return Resolution{}, false, nil
	}
	res := Resolution{Provider: p, Sync: p.Sync, Settle: p.Settle}
	pl := &p.plan
	for i := range p.Routes {
		rt := &p.Routes[i]
		if matchMethod(rt.Methods, req.Method) && matchPath(rt.segs, path) {
			res.Route, pl = rt, &rt.plan
			if rt.Sync != nil {
				res.Sync = rt.Sync
			}
			if rt.Settle != nil {
				res.Settle = rt.Settle
			}
			break
		}
	}
	if p.Priority != nil {
		c, ok := p.class(res.Route, in.Priority)
		if !ok {
			return res, true, unknownClass(p, in.Priority)
		}
		res.Request.Class = c
	}
	cost := pl.cost
	if in.Cost < 0 {
		return res, true, fmt.Errorf("%w request: cost %d is negative", quota.ErrInvalid, in.Cost)
	}
	if in.Cost > 0 {
		cost = in.Cost
	}
	maxWait := p.MaxWait
	if in.MaxWait != nil {
		maxWait = *in.MaxWait
		if maxWait < 0 {
			maxWait = 0
		}
	}
	res.Request.Cost, res.Request.MaxWait = cost, maxWait
	for name, v := range in.Costs {
		if v < 0 {
			return res, true, fmt.Errorf("%w limit %q: cost %d is negative", quota.ErrInvalid, name, v)
		}
	}
	if p.plans != nil {
		var err error
		if res.Plan, _, err = c.PlanFor(p, in.Business, in.PlanOf); err != nil {
			return res, true, err
		}
	}
	if pl.fair != nil {
		res.Request.Share = pl.fair.share(&in, res.Plan)
	}
	if pl.static {
		res.Request.Tag, res.Request.Items, res.Request.Pauses = p.Name, pl.items, p.pauses
		res.Pause = pauseKey
		if len(in.Costs) > 0 {
			// The plan's items are shared: costs of this request's own
			// need a copy.
			items := make([]quota.Item, len(pl.items))
			for i := range pl.items {
				items[i] = pl.items[i]
				items[i].Cost = limitCost(pl, i, &in)
			}
			res.Request.Items = items
		}
		if in.Cost > 0 || len(in.Costs) > 0 {
			return res, true, checkCost(&res.Request)
		}
		return res, true, nil
	}
	err := c.dynamic(&res, p, pl, req, &in)
	return res, true, err
}

// limitCost is the cost of plan limit i for this request: the input's
// cost for it by name, else the route's costs entry, else 0 (the
// request's cost).
func limitCost(pl *plan, i int, in *Input) int64 {
	if v := in.Costs[pl.limits[i].Quota.Name]; v > 0 {
		return v
	}
	return pl.costs[i]
}

// checkCost refuses a cost the caller set that a limit could never admit.
func checkCost(r *quota.Request) error {
	for i := range r.Items {
		l := r.Items[i].Limit
		if cost, c := r.CostOf(i), l.Capacity(); cost > c {
			return fmt.Errorf("%w limit %q: cost %d exceeds its capacity %d, so it could never be admitted",
				quota.ErrInvalid, l.Name, cost, c)
		}
	}
	return nil
}

// scopeValue returns the request's value for a scope, normalised as its
// key part is made from it (see normalize); "" means none.
func scopeValue(s Scope, req *http.Request, in *Input) string {
	switch s.Kind {
	case ScopeBusiness:
		return in.Business
	case ScopeHeader:
		// Header.Get would canonicalise; the name already is canonical.
		if v := req.Header[s.Name]; len(v) > 0 {
			return normalize(s, v[0])
		}
	case ScopeLabel:
		return in.Labels[s.Name]
	case ScopeHost:
		h := req.Host
		if req.URL != nil && req.URL.Host != "" {
			h = req.URL.Host
		}
		h, _ = splitHostPort(h)
		return normalize(s, h)
	}
	return ""
}

// normalize is what a scope value goes through before it becomes a key
// part: a host is folded (foldHost), a header value loses surrounding
// space.
func normalize(s Scope, v string) string {
	switch s.Kind {
	case ScopeHeader:
		return strings.TrimSpace(v)
	case ScopeHost:
		return foldHost(v)
	}
	return v
}

// scratch holds a small stack's items and its pauses in one allocation.
type scratch struct {
	items  [8]quota.Item
	pauses [2]string
}

// dynamic builds the request of a stack with scoped limits: one
// allocation for every key, tag and pause string, one for the slices.
func (c *Config) dynamic(res *Resolution, p *Provider, pl *plan, req *http.Request, in *Input) error {
	var (
		vals [maxStack]string // SafePart of the scope value; "" = static key
		skip [maxStack]bool
		n    int
		size int
	)
	for i, lim := range pl.limits {
		if lim.Scope.Kind == ScopeProvider {
			n++
			continue
		}
		v := scopeValue(lim.Scope, req, in)
		if v == "" {
			switch lim.Missing {
			case Skip:
				skip[i] = true
			case Refuse:
				return fmt.Errorf("%w: provider %q limit %q needs a %s value", ErrMissingScope, p.Name, lim.Quota.Name, lim.Scope)
			default: // Shared: the key is the name alone.
				n++
			}
			continue
		}
		if len(lim.Only) > 0 && !contains(lim.Only, v) {
			skip[i] = true
			continue
		}
		vals[i] = quota.SafePart(v)
		size += keyLen(lim.Quota.Name, vals[i])
		n++
	}
	tenant := ""
	if p.Keys == PerTenant {
		if v := scopeValue(p.tenant, req, in); v != "" {
			tenant = quota.SafePart(v)
			size += keyLen(p.Name, tenant) + keyLen(pauseKey, tenant)
		}
	}
	var b strings.Builder
	b.Grow(size)
	var items []quota.Item
	var pauses []string
	if n <= len(scratch{}.items) {
		s := new(scratch)
		items, pauses = s.items[:0:n], s.pauses[:1]
	} else {
		items, pauses = make([]quota.Item, 0, n), make([]string, 1, 2)
	}
	// Every string is a slice of one builder's buffer.
	for i, lim := range pl.limits {
		if skip[i] {
			continue
		}
		key := pl.keys[i]
		if vals[i] != "" {
			key = writeKey(&b, lim.Quota.Name, vals[i])
		}
		items = append(items, quota.Item{Limit: res.Plan.Override(lim).Quota, Key: key, Cost: limitCost(pl, i, in)})
	}
	res.Request.Tag, pauses[0] = p.Name, pauseKey
	if tenant != "" {
		res.Request.Tag = writeKey(&b, p.Name, tenant)
		pauses[0] = writeKey(&b, pauseKey, tenant)
		res.Request.Over = p.OverPause(tenant)
	} else if p.Keys == PerTenant { // see AllPauseKey
		pauses = append(pauses, allPauseKey)
	}
	res.Pause = pauses[0]
	res.Request.Items, res.Request.Pauses = items, pauses
	if in.Cost > 0 || len(in.Costs) > 0 {
		return checkCost(&res.Request)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
