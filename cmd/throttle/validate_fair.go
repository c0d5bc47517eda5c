package main

import (
	"fmt"
	"io"

	"github.com/fleetquota/throttle/providers"
)

// minFairBurst is the least burst a fair limit works well with: its
// standings differ by a tenth of the burst (package quota's "Fair
// share"), which rounds to nothing below 10 (docs/decisions.md, "Small
// bursts").
const minFairBurst = 10

// printFair writes who shares each of p's fair limits, and with what
// weights, for throttle validate.
func printFair(w io.Writer, p *providers.Provider) {
	for _, l := range allLimits(p) {
		f := l.lim.Fair
		if f == nil {
			continue
		}
		who, weights := "each business (WithBusiness, Throttle-Business)", "weight 1"
		if f.Label != "" {
			who = fmt.Sprintf("each value of the label %s (WithLabel, Throttle-Label)", f.Label)
		} else if p.Plans() != nil {
			weights = "its plan's weight"
		}
		fmt.Fprintf(w, "  limit %s is shared fairly by %s: %s is a tenant, of %s; while the limit is contended each active tenant gets at least its weight's share of %s, and a lone tenant all of it; requests without a value share as one tenant\n",
			l.lim.Quota.Name, f, who, weights, spec(l.lim.Quota))
	}
}

// warnFair writes a warning for a fair limit of p whose burst is too
// small to tell its tenants' standings apart.
func warnFair(w io.Writer, cfg *providers.Config, p *providers.Provider, l *providers.Limit) {
	if q := l.Quota; l.Fair != nil && q.Capacity() < minFairBurst {
		fmt.Fprintf(w, "%s: warning: %s: limit %s: fair with a burst of %d: a tenant over its share leaves a tenth of the burst to those within theirs, which rounds to nothing below %d, so tenants that fail fast get shares nearer their demand than their weights; give it a burst of %d or more\n",
			cfg.Name(), p.Name, q.Name, q.Capacity(), minFairBurst, minFairBurst)
	}
}
