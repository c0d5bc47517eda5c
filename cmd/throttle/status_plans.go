package main

import (
	"fmt"
	"strings"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// This file is status's part of plans: --tenant and --plan, and the plan
// whose figures each tenant's rows are read at.

// tenantView says, with --tenant, whose state a provider's rows are and
// at which plan's figures.
type tenantView struct {
	Business string `json:"business"`
	// Plan is the plan whose figures apply ("" when the provider has
	// none, or the business has none and the provider no default_plan:
	// its limits as written).
	Plan string `json:"plan"`
	// From says where the plan came from: "tenants" (the configuration's
	// map), "--plan", "default" (the provider's default_plan, or its
	// limits as written) or "none" (the provider has no plans).
	From string `json:"from"`
}

// statusPlans is what status knows of the tenants' plans: the
// configuration's tenants map by key part, and --plan.
type statusPlans struct {
	byPart map[string]string // quota.SafePart(business) -> plan name
	flag   string            // --plan: the plan of the --tenant business
}

// newStatusPlans indexes cfg's tenants map by key part, the form in
// which status finds the tenants in Redis.
func newStatusPlans(cfg *providers.Config, flag string) *statusPlans {
	sp := &statusPlans{byPart: map[string]string{}, flag: flag}
	for b, pl := range cfg.Tenants() {
		sp.byPart[quota.SafePart(b)] = pl
	}
	return sp
}

// planOf returns the plan of the tenant whose key part is part on p, as
// the transport would choose it without a WithPlans lookup (which status
// cannot ask), and where it came from.
func (w *watcher) planOf(p *providers.Provider, part string) (*providers.Plan, string) {
	if p.Plans() == nil {
		return nil, "none"
	}
	if w.plans == nil {
		w.plans = newStatusPlans(w.e.cfg, "")
	}
	name, from := w.plans.byPart[part], "tenants"
	if w.fixed != "" && w.plans.flag != "" {
		name, from = w.plans.flag, "--plan"
	}
	if pl, ok := p.Plan(name); ok {
		return pl, from
	}
	return p.DefaultPlan(), "default"
}

// tenantWatcher makes the watcher of --tenant: one business's state on
// the provider pos names, or on every provider with a limit scoped per
// business, at its plan's figures (--plan's when given).
func tenantWatcher(e *env, pos []string, o *statusOptions) (*watcher, error) {
	if o.plan != "" {
		known := false
		for _, n := range e.cfg.PlanNames() {
			known = known || n == o.plan
		}
		if !known {
			defined := "none"
			if names := e.cfg.PlanNames(); len(names) > 0 {
				defined = strings.Join(names, ", ")
			}
			return nil, usagef("--plan %q: no provider of %s defines it; the plans defined: %s", o.plan, e.cfg.Name(), defined)
		}
	}
	w := &watcher{e: e, top: o.top, steps: o.steps, known: map[*providers.Provider]map[string]bool{},
		fixed: o.tenant, business: true, plans: newStatusPlans(e.cfg, o.plan)}
	provs := e.cfg.Providers()
	if len(pos) == 1 {
		if strings.Contains(pos[0], "/") {
			return nil, usagef("%q and --tenant %q: name the tenant once", pos[0], o.tenant)
		}
		p, err := provider(e.cfg, pos[0])
		if err != nil {
			return nil, err
		}
		if !perBusiness(p) {
			return nil, usagef("provider %q has no limit scoped per business: --tenant shows a business's state (PROVIDER/SCOPE shows another scope's value)", p.Name)
		}
		provs = []*providers.Provider{p}
	}
	for _, p := range provs {
		if perBusiness(p) {
			w.provs = append(w.provs, p)
		}
	}
	if len(w.provs) == 0 {
		return nil, usagef("no provider of %s has a limit scoped per business: --tenant has nothing to show", e.cfg.Name())
	}
	w.prepare()
	return w, nil
}

// perBusiness reports whether p keeps state per business: a limit scoped
// per business, its own or a route's, or a fair limit shared by tenant
// (each business's lane).
func perBusiness(p *providers.Provider) bool {
	for _, l := range allLimits(p) {
		if l.lim.Scope.Kind == providers.ScopeBusiness || l.lim.Fair != nil && l.lim.Fair.Label == "" {
			return true
		}
	}
	return false
}

// tenantLines are the lines the table starts with under --tenant: the
// business's plan per provider.
func tenantLines(v *view) []string {
	var out []string
	for _, p := range v.Providers {
		if p.Tenant == nil {
			continue
		}
		t := p.Tenant
		what := ""
		switch {
		case t.From == "none":
			what = "no plans"
		case t.Plan == "":
			what = "no plan: the limits as written (no default_plan)"
		case t.From == "default":
			what = "plan " + t.Plan + " (the default plan)"
		case t.From == "--plan":
			what = "plan " + t.Plan + " (--plan)"
		default:
			what = "plan " + t.Plan + " (the configuration's tenants)"
		}
		out = append(out, fmt.Sprintf("%s on %s: %s", t.Business, p.Name, what))
	}
	return out
}
