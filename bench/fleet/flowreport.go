package fleet

import (
	"fmt"
	"strings"
	"time"
)

// The report's sections for the scenarios with flows (issues 20 and 21):
// a summary against each issue's targets, and per scenario a table of
// every phase and flow.

// mark says whether a figure met its target.
func mark(ok bool) string {
	if ok {
		return " ✓"
	}
	return " ✗"
}

// flowsSummary writes the summary of the scenarios of issues 20 and 21,
// when any ran: throttle and its first-come-first-served baseline, each
// figure marked against its target.
func flowsSummary(b *strings.Builder, order []string, figs map[string][]Figures) {
	var any bool
	for _, name := range order {
		for _, f := range figs[name] {
			any = any || f.Flows != nil
		}
	}
	if !any {
		return
	}
	b.WriteString("\n## Who slows first, and fair share: priority, daily-pacing, noisy-tenant\n\n")
	b.WriteString("Issues 20 and 21: throttle as configured (classes, a paced window, a fair share) against " +
		"throttle-fcfs, the same limits first come first served, in the same run. ✓ / ✗: the figure met / missed " +
		"the issue's target (marked for the baseline too, to show what the feature changes).\n")
	for _, name := range order {
		fs := figs[name]
		if len(fs) == 0 || fs[0].Flows == nil {
			continue
		}
		switch name {
		case "priority":
			fmt.Fprintf(b, "\n**priority** (targets: interactive within one slot interval of the whole limit plus its own "+
				"class's queue; batch ≥ 95%% of what interactive leaves; utilization ≥ 99%%; overshoot 0):\n\n")
			b.WriteString("| algorithm | interactive wait p50 / p99 / max | within the bound | interactive refused | batch of what interactive left | utilization | max overshoot |\n")
			b.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
			for _, f := range fs {
				x := f.Flows
				fmt.Fprintf(b, "| %s | %s / %s / %s | %d of %d%s | %d | %s%s | %s%s | %d%s |\n", f.Algo,
					dur(x.TopWaitP50), dur(x.TopWaitP99), dur(x.TopWaitMax), x.TopWithin, x.TopAdmitted, mark(x.TopWithin == x.TopAdmitted && x.TopAdmitted > 0),
					x.TopRefused, pctStr(x.LowerOfLeft), mark(x.LowerOfLeft >= 0.95), pctStr(f.Utilization), mark(f.Utilization >= 0.99),
					f.Overshoot, mark(f.Overshoot == 0))
			}
		case "daily-pacing":
			fmt.Fprintf(b, "\n**daily-pacing**, times on the compressed clock from the hour's start (targets: the quota "+
				"lasts to the reset, no dark hour; ≥ 99%% of the quota used; overshoot 0; the top class never refused):\n\n")
			b.WriteString("| algorithm | quota used in the hour | quota spent at | last admission (before the reset) | longest gap | interactive refused | interactive wait p50 / p99 / max | interactive that waited (the last at) | max overshoot |\n")
			b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
			for _, f := range fs {
				x := f.Flows
				spent := "never"
				if x.SpentAt > 0 {
					spent = clockStr(x.SpentAt)
				}
				waited := "none"
				if x.TopWaited > 0 {
					waited = fmt.Sprintf("%d of %d (%s)", x.TopWaited, x.TopAdmitted, clockStr(x.LastTopWait))
				}
				fmt.Fprintf(b, "| %s | %d of %d (%s)%s | %s | %s (%s)%s | %s from %s | %d%s | %s / %s / %s | %s | %d%s |\n", f.Algo,
					x.WindowServed, x.Quota, pctStr(x.QuotaUsed), mark(x.QuotaUsed >= 0.99), spent,
					clockStr(x.LastAdmission), clockStr(x.ToReset), mark(x.ToReset < time.Hour/60),
					clockStr(x.LongestGap), clockStr(x.GapFrom), x.TopRefused, mark(x.TopRefused == 0),
					dur(x.TopWaitP50), dur(x.TopWaitP99), dur(x.TopWaitMax), waited, f.Overshoot, mark(f.Overshoot == 0))
			}
			b.WriteString("\nThe quota lasting to the reset is marked met when the last admission came within the hour's last minute.\n")
		case "noisy-tenant":
			fmt.Fprintf(b, "\n**noisy-tenant** (targets: every tenant asking for at least its weighted share gets ≥ 95%% of "+
				"it; every tenant asking for less gets ≥ 99%% of what it asks; utilization ≥ 99%%; overshoot 0):\n\n")
			b.WriteString("| algorithm | lowest share ÷ weighted share (tenants asking for it) | lowest admitted ÷ asked (tenants asking less) | light tenants' wait p99 | utilization | max overshoot | script calls per request | Redis cmds per decision |\n")
			b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
			for _, f := range fs {
				x := f.Flows
				fmt.Fprintf(b, "| %s | %s%s | %s%s | %s | %s%s | %d%s | %.2f | %.2f |\n", f.Algo,
					pctStr(x.MinHeavyRatio), mark(x.MinHeavyRatio >= 0.95), pctStr(x.MinLightGot), mark(x.MinLightGot >= 0.99),
					dur(x.LightWaitP99), pctStr(f.Utilization), mark(f.Utilization >= 0.99), f.Overshoot, mark(f.Overshoot == 0),
					x.ScriptsPerRequest, f.CmdsSent)
			}
		}
	}
}

// flowTables writes a scenario's per-phase, per-flow figures.
func flowTables(b *strings.Builder, sc *Scenario, figs []Figures) {
	if len(sc.Flows) == 0 {
		return
	}
	clock := "the store's clock"
	if sc.Compress > 1 {
		clock = "the compressed clock"
	}
	fmt.Fprintf(b, "\nPer phase and flow, by the requests' intended times: asked (req/s, each member), offered, admitted "+
		"(sent), refused, lost (dropped, ended waiting, errors); waits of the admitted requests (the store's reserved wait, "+
		"on %s); a member's share of what the phase admitted, its weighted share (weight ÷ the phase's weights) and its "+
		"max-min fair share of the limit (%.0f/s) given every flow's ask. Phase used: what the vendor served in the phase "+
		"over the limit's rate × its length.\n\n", clock, limitPerSec(sc))
	tenants := false
	for _, f := range sc.Flows {
		tenants = tenants || f.Tenant != ""
	}
	b.WriteString("| algorithm | phase | flow | class / tenant (weight) | asked/s | offered | admitted | refused | lost | wait p50 / p99 / max | share | weighted share | max-min share | admitted ÷ offered (least member) |\n")
	b.WriteString("|---|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|\n")
	for _, f := range figs {
		if f.Flows == nil {
			continue
		}
		for i, ph := range f.Flows.Phases {
			label := fmt.Sprintf("%d: %s–%s, used %s", i+1, secStr(ph.From), secStr(ph.To), pctStr(ph.Used))
			for _, ff := range ph.Flows {
				name := ff.Flow
				if ff.Members > 1 {
					name = fmt.Sprintf("%s (%d tenants)", ff.Flow, ff.Members)
				}
				who := ff.Class
				if ff.Members > 1 || ff.Tenant != "" {
					who = fmt.Sprintf("tenant (weight %d)", ff.Weight)
				}
				weighted, maxmin := "—", "—" // a class has no weight
				if tenants {
					weighted, maxmin = pctStr(ff.Weighted), pctStr(ff.MaxMin)
				}
				fmt.Fprintf(b, "| %s | %s | %s | %s | %g | %d | %d | %d | %d | %s / %s / %s | %s | %s | %s | %s |\n",
					f.Algo, label, name, who, ff.Asked, ff.Offered, ff.Admitted, ff.Refused, ff.Lost,
					dur(ff.WaitP50), dur(ff.WaitP99), dur(ff.WaitMax), pctStr(ff.Share), weighted, maxmin, pctStr(ff.MinGot))
			}
		}
	}
	for _, f := range figs {
		if x := f.Flows; x != nil && x.Lane != "" {
			fmt.Fprintf(b, "\n%s: the top class's lane is %s (interval of the whole limit %s); p99 of its wait less its own queue %s.\n",
				f.Algo, x.Lane, dur(x.Interval), dur(x.TopExcessP99))
		}
	}
}

// flowLoadStr describes a scenario's flows.
func flowLoadStr(sc *Scenario) string {
	var parts []string
	seen := map[string]bool{}
	for _, f := range sc.Flows {
		g := flowGroup(f.Name)
		if seen[g] {
			continue
		}
		seen[g] = true
		n := 0
		for _, o := range sc.Flows {
			if flowGroup(o.Name) == g {
				n++
			}
		}
		s := fmt.Sprintf("%s %g req/s", f.Name, f.Rate)
		if n > 1 {
			s = fmt.Sprintf("%d × %s %g req/s each", n, g, f.Rate)
		}
		if f.From > 0 || f.To > 0 {
			s += fmt.Sprintf(" (%s–%s)", secStr(f.From), secStr(f.end(sc.Duration)))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// secStr is an offset into a run in seconds.
func secStr(d time.Duration) string {
	return fmt.Sprintf("%gs", d.Round(10*time.Millisecond).Seconds())
}

// clockStr is a compressed-clock duration as minutes and seconds.
func clockStr(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d/time.Minute), int(d%time.Minute/time.Second))
}
