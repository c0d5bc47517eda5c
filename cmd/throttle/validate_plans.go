package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/fleetquota/throttle/providers"
)

// printTenants writes how many businesses the configuration's tenants map
// puts on each plan.
func printTenants(w io.Writer, cfg *providers.Config) {
	tenants := cfg.Tenants()
	if len(tenants) == 0 {
		return
	}
	per := map[string]int{}
	for _, pl := range tenants {
		per[pl]++
	}
	names := make([]string, 0, len(per))
	for pl := range per {
		names = append(names, pl)
	}
	sort.Strings(names)
	for i, pl := range names {
		names[i] = fmt.Sprintf("%s %d", pl, per[pl])
	}
	fmt.Fprintf(w, "tenants: %d business%s mapped to plans (%s); any other is on each provider's default plan\n",
		len(tenants), map[bool]string{true: "", false: "es"}[len(tenants) == 1], strings.Join(names, ", "))
}

// printPlans writes a provider's plans: per plan its weight and the
// figures it gives (headroom applied, as the store enforces them).
func printPlans(w io.Writer, p *providers.Provider) {
	def := p.DefaultPlan()
	for _, pl := range p.Plans() {
		what := []string{fmt.Sprintf("weight %d", pl.Weight)}
		if pl == def {
			what = append(what, "default")
		}
		figures := "the limits as written"
		if len(pl.Limits) > 0 {
			var fs []string
			for i := range pl.Limits {
				fs = append(fs, pl.Limits[i].Quota.Name+" "+spec(pl.Limits[i].Quota))
			}
			figures = strings.Join(fs, ", ")
		}
		fmt.Fprintf(w, "  plan %s (%s): %s\n", pl.Name, strings.Join(what, ", "), figures)
	}
	if p.Plans() != nil && def == nil {
		fmt.Fprintf(w, "  a business on no plan of %s gets the limits as written (no default_plan)\n", p.Name)
	}
}
