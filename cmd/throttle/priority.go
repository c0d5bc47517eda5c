package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// printPriority writes p's priority classes, and the class reserves and
// pacing of each of its limits that has any, for throttle validate.
func printPriority(w io.Writer, p *providers.Provider) {
	pr := p.Priority
	if pr != nil {
		fmt.Fprintf(w, "  priority: classes %s (the top first), default %s; a reserve in a window, rolling or concurrency limit stays held %v after its class's last request\n",
			strings.Join(pr.Classes, ", "), pr.Classes[pr.Default], pr.ActiveFor)
		for i := range p.Routes {
			if r := &p.Routes[i]; r.Priority != "" {
				fmt.Fprintf(w, "  route %s priority: %s\n", routeString(r), r.Priority)
			}
		}
	}
	for _, l := range allLimits(p) {
		q := l.lim.Quota
		var parts []string
		switch {
		case q.Reserve != nil && q.Kind == quota.GCRA:
			parts = append(parts, "reserve "+providers.ReserveString(p, q)+" ("+lanesString(p, q)+")")
		case q.Reserve != nil:
			parts = append(parts, "reserve "+providers.ReserveString(p, q)+" ("+holdsString(p, q)+")")
		case pr != nil:
			parts = append(parts, "no class reserve")
		}
		if q.Pace {
			pace := "paced over each window"
			if q.PaceReserve > 0 {
				pace += fmt.Sprintf(", %d kept for %s until the last 1%% of the window", quota.Portion(q.PaceReserve, q.Rate), pr.Classes[0])
			}
			parts = append(parts, pace)
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "  limit %s: %s\n", q.Name, strings.Join(parts, "; "))
		}
	}
}

// lanesString describes the lanes of a classed GCRA limit, e.g.
// "lanes interactive 3000/1h burst 3000, batch 12000/1h burst 12000".
func lanesString(p *providers.Provider, q *quota.Limit) string {
	lanes := q.Lanes()
	parts := make([]string, len(lanes))
	for k := range lanes {
		parts[k] = fmt.Sprintf("%s %s", p.ClassName(k), spec(&lanes[k]))
	}
	return "lanes " + strings.Join(parts, ", ")
}

// holdsString describes what each class holds of a classed window,
// rolling or concurrency limit while it is active, e.g. "holds
// interactive 3000, default 1500".
func holdsString(p *providers.Provider, q *quota.Limit) string {
	parts := make([]string, len(q.Reserve))
	for k := range q.Reserve {
		parts[k] = fmt.Sprintf("%s %d", p.ClassName(k), q.Hold(k))
	}
	return "holds " + strings.Join(parts, ", ")
}
