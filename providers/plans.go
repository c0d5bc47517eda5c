package providers

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrUnknownPlan is wrapped by the error Resolve returns when Input.PlanOf
// names, for a request to a provider that has plans, a plan that no
// provider of the configuration defines: a database and a configuration
// out of step, or a typing error. The request is refused rather than
// given some other plan's figures, which would overspend a vendor account
// (a free tier given the default's tokens) or starve the tenant, both
// silently. A PlanOf that prefers the default plan returns "" instead.
var ErrUnknownPlan = errors.New("providers: unknown plan")

// MaxWeight is the largest weight a plan may give its tenants.
const MaxWeight = 1000

// maxPlans bounds the plans of one provider. Every plan's limits are
// built at load time, and the Redis store caches the arguments of a few
// hundred limits: plans are tiers of a price list, not one per tenant.
const maxPlans = 64

// A Plan is a named set of figures for some of a provider's per-business
// limits (scope: business): the tenants on the plan are held to its
// figures instead of the limits as written. A plan changes how much a
// limit admits, never which key holds its state, so moving a tenant from
// one plan to another moves nothing: its next request is decided, against
// the same state, at the new figures.
type Plan struct {
	// Name is the plan's key in the provider's plans.
	Name string
	// Weight is the share of a fair-shared limit the plan's tenants are
	// guaranteed, relative to the other active tenants' weights: 1 unless
	// the plan says otherwise, at most MaxWeight.
	Weight int64
	// Limits are the limits the plan changes, in file order: each has the
	// scope, missing and only of the provider's limit it replaces and the
	// plan's figures (Quota with the provider's headroom applied,
	// Published as written). Do not modify them.
	Limits []Limit

	// over maps a limit of the provider (its own or a route's) to the
	// plan's, for the limits the plan changes.
	over map[*Limit]*Limit
}

// Override returns the plan's version of lim, a limit of the plan's
// provider (its own or a route's), or lim itself when the plan leaves it
// as written. A nil plan leaves every limit as written.
func (pl *Plan) Override(lim *Limit) *Limit {
	if pl != nil {
		if o := pl.over[lim]; o != nil {
			return o
		}
	}
	return lim
}

// planSet is a provider's plans.
type planSet struct {
	list   []*Plan
	byName map[string]*Plan
	def    *Plan // default_plan, or nil: the limits as written
}

// Plans returns the provider's plans in the order of the file; none when
// it has no plans field.
func (p *Provider) Plans() []*Plan {
	if p.plans == nil {
		return nil
	}
	return append([]*Plan(nil), p.plans.list...)
}

// Plan returns the provider's plan called name.
func (p *Provider) Plan(name string) (*Plan, bool) {
	if p.plans == nil {
		return nil, false
	}
	pl, ok := p.plans.byName[name]
	return pl, ok
}

// DefaultPlan returns the plan of the businesses that have none, or whose
// plan the provider does not define (default_plan); nil when the provider
// names none: those businesses get its limits as written.
func (p *Provider) DefaultPlan() *Plan {
	if p.plans == nil {
		return nil
	}
	return p.plans.def
}

// planIndex is what a configuration knows of plans across its providers:
// the static tenants map and every plan name some provider defines.
type planIndex struct {
	tenants map[string]string // business -> plan name
	names   map[string]bool
}

// Tenants returns a copy of the configuration's tenants map: business to
// plan name.
func (c *Config) Tenants() map[string]string {
	out := make(map[string]string, len(c.plans.tenants))
	for b, pl := range c.plans.tenants {
		out[b] = pl
	}
	return out
}

// PlanNames returns every plan name some provider of the configuration
// defines, sorted.
func (c *Config) PlanNames() []string {
	out := make([]string, 0, len(c.plans.names))
	for n := range c.plans.names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// PlanSource says where the plan that PlanFor chose came from.
type PlanSource uint8

const (
	// PlanNone: the provider has no plans; its limits apply as written.
	PlanNone PlanSource = iota
	// PlanFromFunc: Input.PlanOf named it.
	PlanFromFunc
	// PlanFromTenants: the configuration's tenants map named it.
	PlanFromTenants
	// PlanDefault: nothing named a plan this provider defines, so its
	// default plan (or, without one, its limits as written) applies.
	PlanDefault
)

// String returns "none", "func", "tenants" or "default".
func (s PlanSource) String() string {
	switch s {
	case PlanNone:
		return "none"
	case PlanFromFunc:
		return "func"
	case PlanFromTenants:
		return "tenants"
	case PlanDefault:
		return "default"
	}
	return fmt.Sprintf("PlanSource(%d)", uint8(s))
}

// PlanFor returns the plan that applies to business's requests to p,
// and where it came from, as Resolve chooses it: the plan planOf names
// (when planOf is not nil and names one), else the one the
// configuration's tenants map names, else p's default plan. A name that
// another provider defines but p does not gives p's default plan too
// (plans are tiers of the caller's customers, and a vendor may not tell
// some of them apart). A nil plan with a nil error means p's limits as
// written. A name that no provider defines is an error wrapping
// ErrUnknownPlan. A request without a business gets the default plan.
func (c *Config) PlanFor(p *Provider, business string, planOf func(business string) string) (*Plan, PlanSource, error) {
	if p == nil || p.plans == nil {
		return nil, PlanNone, nil
	}
	name, src := "", PlanDefault
	if business != "" {
		if planOf != nil {
			if name = planOf(business); name != "" {
				src = PlanFromFunc
			}
		}
		if name == "" {
			if name = c.plans.tenants[business]; name != "" {
				src = PlanFromTenants
			}
		}
	}
	if name == "" {
		return p.plans.def, PlanDefault, nil
	}
	if pl := p.plans.byName[name]; pl != nil {
		return pl, src, nil
	}
	if c.plans.names[name] {
		return p.plans.def, PlanDefault, nil
	}
	return p.plans.def, src, fmt.Errorf("%w %s for business %s (provider %s): no provider of %s defines it; the plans defined: %s",
		ErrUnknownPlan, quote(name), quote(business), p.Name, c.name, strings.Join(c.PlanNames(), ", "))
}
