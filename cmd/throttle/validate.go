package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

var validateCmd = &command{
	name: "validate",
	usage: `Usage: throttle validate [FILE]
       throttle validate --against OLD [FILE]

Validate loads a providers configuration (with no FILE, the embedded
catalog config/providers.yaml) as the library does. When it has problems,
each is printed to stderr as

	file:line:column: field.path: what is wrong and what would be valid

(the first 100, then a count of the rest; values from the file are cut
at 80 bytes) and the exit code is 3. When it is valid, the resolved table is
printed to stdout: per provider its hosts, behaviour and keys (one hash tag,
or one per tenant), and per limit the route that adds it, the limit in the
short form with headroom applied (the numbers the store enforces), its
scope, what happens without a scope value and the values it is restricted
to; then its plans, each with its weight and the figures it gives its
businesses; and how many businesses the tenants map puts on each plan;
then the provider's priority classes and each limit's class reserves
(a GCRA limit's lanes, what a window, rolling or concurrency limit holds
for each class) and pacing. A plan that changes an unknown or
provider-wide limit, or a limit's kind, window or period, and a tenant or
default_plan naming a plan no provider defines, are problems. ${VAR}
references are read from the
environment.

With --against OLD, validate loads both and, instead of the table, lists
per provider what switching the fleet from OLD to FILE does to the state in
Redis: a provider removed or renamed; its keys moved to other hash tags
(keys: per_provider / per_tenant, or the tenant scope) and its pauses with
them; a limit removed, renamed or rescoped (its keys change); a limit
turned from GCRA into a window or back (its state cannot be read); a
window's unit, reset time or time zone changed (the current count is
forgotten); a GCRA limit's class lanes added, removed or changed in
number (a new upper lane starts full, a dropped one is forgotten; the
bottom lane keeps the limit's key); and, without moving anything, limits
and providers added and changes of priority classes, reserves and pace
(a class removed refuses the requests that still name it). The exit
code is 4 when anything would move or be forgotten, 0 otherwise.
`,
}

func init() { validateCmd.run = runValidate }

func runValidate(_ context.Context, args []string, stdout, stderr io.Writer) error {
	var against string
	fs := newFlagSet(validateCmd)
	fs.StringVar(&against, "against", "", "list what switching from the configuration `OLD` to FILE moves or forgets in Redis (exit 4 if anything)")
	pos, err := parse(validateCmd, fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("validate takes one FILE, got %d arguments", len(pos))
	}
	path := ""
	if len(pos) == 1 {
		path = pos[0]
		if path == "" {
			return usagef("validate: empty FILE")
		}
	}
	var old *providers.Config
	if isSet(fs, "against") {
		if against == "" {
			return usagef("validate: empty --against")
		}
		if old, err = loadConfig(against); err != nil {
			return err
		}
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return err
	}
	warnConfig(stderr, cfg)
	if old == nil {
		printConfig(stdout, cfg)
		return nil
	}
	return printChanges(stdout, old, cfg)
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// printChanges lists what switching from old to cfg does to the state in
// Redis, per provider, and returns errMoves when anything moves.
func printChanges(w io.Writer, old, cfg *providers.Config) error {
	changes := providers.Changes(old, cfg)
	moves := 0
	for _, c := range changes {
		if c.Kind.Moves() {
			moves++
		}
	}
	fmt.Fprintf(w, "%s -> %s: %d change%s that move%s or forget%s state\n", old.Name(), cfg.Name(),
		moves, plural(moves), verbS(moves), verbS(moves))
	prev := ""
	for _, c := range changes {
		if c.Provider != prev {
			fmt.Fprintf(w, "\n%s\n", c.Provider)
			prev = c.Provider
		}
		what := "  " + c.Kind.String()
		if c.Limit != "" {
			what += " " + c.Limit
		}
		fmt.Fprintf(w, "%s: %s\n", what, c.Detail)
	}
	if moves > 0 {
		return errMoves
	}
	return nil
}

// verbS is the "s" of a verb whose subject is n changes.
func verbS(n int) string {
	if n == 1 {
		return "s"
	}
	return ""
}

// warnConfig writes to w what is valid in cfg but likely a mistake: a
// learning limit without a ceiling, which a response stating a bogus
// limit lifts to the default ceiling for a day; a fair limit whose burst
// is too small to share fairly (warnFair).
func warnConfig(w io.Writer, cfg *providers.Config) {
	for _, p := range cfg.Providers() {
		for _, l := range allLimits(p) {
			warnFair(w, cfg, p, l.lim)
			if q := l.lim.Quota; q.Learn && q.Ceiling == 0 {
				_, hi := q.LearnBounds()
				fmt.Fprintf(w, "%s: warning: %s: limit %s: learn: true without a ceiling: any response can lift it to %d/%s (%d times the floor) for %v; set learn: {ceiling: N} to the most the vendor's plans allow\n",
					cfg.Name(), p.Name, q.Name, hi, periodString(q.Period), quota.DefaultLearnCeiling, quota.LearnTTL)
			}
		}
	}
}

// printConfig writes the resolved table of a valid configuration.
func printConfig(w io.Writer, cfg *providers.Config) {
	ps := cfg.Providers()
	fmt.Fprintf(w, "%s: valid, %d provider%s\n", cfg.Name(), len(ps), plural(len(ps)))
	printTenants(w, cfg)
	for _, p := range ps {
		fmt.Fprintf(w, "\n%s\n", p.Name)
		fmt.Fprintf(w, "  hosts: %s\n", strings.Join(p.Hosts, ", "))
		var b []string
		if p.OnLimit == providers.Wait {
			b = append(b, "on_limit wait (max "+p.MaxWait.String()+")")
		} else {
			b = append(b, "on_limit "+p.OnLimit.String())
		}
		b = append(b, "headroom "+strconv.FormatFloat(p.Headroom*100, 'f', -1, 64)+"%",
			"mode "+p.Mode.String(), "on_store_error "+p.OnStoreError.String())
		if p.OnStoreError == providers.Local {
			b = append(b, "local_share "+strconv.FormatFloat(p.LocalShare*100, 'f', -1, 64)+"%")
		}
		fmt.Fprintf(w, "  %s\n", strings.Join(b, ", "))
		if s, ok := p.TenantScope(); ok {
			fmt.Fprintf(w, "  keys per_tenant, tagged per %s: each value's keys and pause live in hash tag %s\n", s, p.Tag("<value>"))
		} else {
			fmt.Fprintf(w, "  keys per_provider: every key and the pause live in hash tag %s\n", p.Tag(""))
			if s, ok := inferredTenant(p); ok {
				fmt.Fprintf(w, "  note: every limit is scoped by %s. Before the keys field, such a provider was tagged per tenant (%s); to keep its state across the upgrade, set keys: per_tenant (docs/operations.md, Upgrading)\n", s, p.Name+":<value>")
			}
		}
		if p.Sync != nil {
			fmt.Fprintf(w, "  sync: %s\n", syncString(p.Sync))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  ROUTE\tLIMIT\tSPEC\tSCOPE\tMISSING\tONLY\tCOST")
		for _, l := range allLimits(p) {
			route, cost := "-", "1"
			if l.route != nil {
				route = routeString(l.route)
				cost = strconv.FormatInt(l.route.Cost, 10)
				if c, ok := l.route.Costs[l.lim.Quota.Name]; ok {
					cost = strconv.FormatInt(c, 10)
				}
			}
			missing, only := "-", "-"
			if l.lim.Scope.Kind != providers.ScopeProvider {
				missing = l.lim.Missing.String()
			}
			if len(l.lim.Only) > 0 {
				only = strings.Join(l.lim.Only, ",")
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", route, l.lim.Quota.Name, spec(l.lim.Quota), l.lim.Scope, missing, only, cost)
		}
		_ = tw.Flush()
		printPlans(w, p)
		printFair(w, p)
		printLearning(w, p)
		printPriority(w, p)
		for i := range p.Routes {
			if r := &p.Routes[i]; r.Sync != nil {
				fmt.Fprintf(w, "  route %s sync: %s\n", routeString(r), syncString(r.Sync))
			}
		}
		for i := range p.Routes {
			r := &p.Routes[i]
			if len(r.Costs) == 0 {
				continue
			}
			names := make([]string, 0, len(r.Costs))
			for name := range r.Costs {
				names = append(names, name)
			}
			sort.Strings(names)
			for j, name := range names {
				names[j] = fmt.Sprintf("%s %d", name, r.Costs[name])
			}
			fmt.Fprintf(w, "  route %s costs: %s (every other limit: %d)\n", routeString(r), strings.Join(names, ", "), r.Cost)
		}
	}
}

// printLearning writes the bounds of p's learning limits.
func printLearning(w io.Writer, p *providers.Provider) {
	for _, l := range allLimits(p) {
		if q := l.lim.Quota; q.Learn {
			_, hi := q.LearnBounds()
			most := fmt.Sprintf("%d/%s at most", hi, periodString(q.Period))
			if q.Ceiling == 0 {
				most += fmt.Sprintf(" (no ceiling: %d times the floor)", quota.DefaultLearnCeiling)
			}
			fmt.Fprintf(w, "  limit %s learns the vendor's limit: %s at the least, %s\n", q.Name, spec(q), most)
		}
	}
}

// inferredTenant is the rule that chose a provider's tag before the keys
// field made it explicit: tagged per tenant when every limit, routes
// included, had the same scope other than provider.
func inferredTenant(p *providers.Provider) (providers.Scope, bool) {
	lims := allLimits(p)
	if len(lims) == 0 {
		return providers.Scope{}, false
	}
	s := lims[0].lim.Scope
	for _, l := range lims {
		if l.lim.Scope != s {
			return providers.Scope{}, false
		}
	}
	return s, s.Kind != providers.ScopeProvider
}

// routeString is "name: METHODS path".
func routeString(r *providers.Route) string {
	m := "*"
	if len(r.Methods) > 0 {
		m = strings.Join(r.Methods, ",")
	}
	return r.Name + ": " + m + " " + r.Path
}

// syncString is "format, counter -> limit, ..." with the counters sorted.
func syncString(sc *providers.Sync) string {
	counters := make([]string, 0, len(sc.Counters))
	for c := range sc.Counters {
		counters = append(counters, c)
	}
	sort.Strings(counters)
	for i, c := range counters {
		counters[i] = c + " -> " + sc.Counters[c]
	}
	return sc.Format.String() + ", vendor counter " + strings.Join(counters, ", ")
}
