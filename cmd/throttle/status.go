package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/redisstore"
)

var statusCmd = &command{
	name: "status",
	usage: `Usage: throttle status [PROVIDER[/SCOPE]] --redis URL [--json] [--watch]

Status shows the live state of the limits in Redis, read without changing
anything and computed as the store decides (Redis's TIME is the clock): per
limit and scope value, the capacity used, what remains (events of cost 1
admitted at once), how long until the limit is back to full, and the pause
in force. A concurrency limit shows the leases held (live ones: not
released, not expired) and when the soonest expires unless renewed; a
rolling window its count in the trailing period; a limit that settled
costs took past its capacity, the debt the next requests wait out.

With no argument every provider of the configuration is shown; PROVIDER
shows one; PROVIDER/SCOPE shows one tenant's state directly (a business, a
header value or a host; a "#..." value as status shows it is taken as it is).

Per-tenant state is found by SCAN, a bounded number of calls per refresh on
every master (--scan-steps), so no refresh walks the whole keyspace; the
scope values found accumulate across refreshes and are read, with every
provider-wide limit, in one pipelined round. The busiest tenants come first
(lowest share of capacity remaining); --top bounds how many are shown.
Values too long or unsafe for a key are shown as "#" and a hash.

--watch redraws in place every --interval until interrupted (Ctrl-C); with
--json it writes one JSON document per line per refresh instead.

JSON (--json), field names stable:

	{
	  "now": "2026-01-02T15:04:05.123456Z",  Redis's TIME when read
	  "prefix": "throttle:",
	  "scan_complete": true,      every master's SCAN has ended a full pass
	  "error": "...",             with --watch only: this refresh failed
	  "providers": [{
	    "name": "stripe",
	    "tenant_scope": "header:Stripe-Account",  only when tagged per tenant
	    "paused_until": null,     the provider's pause, RFC 3339, or null
	    "scopes_known": 12,       scope values found so far
	    "scopes_shown": 10,       of those, shown (busiest first)
	    "rows": [{
	      "limit": "global", "kind": "gcra" | "window" | "rolling" | "concurrent",
	      "spec": "90/s",         short form, headroom applied
	      "scope": "header:Stripe-Account" | "provider" | ...,
	      "value": "acct_1",      "" for a provider-wide limit, or for the
	                              shared state of requests without a value
	      "capacity": 90,         burst (gcra), quota (window, rolling) or
	                              leases (concurrent)
	      "used": 3,              window: count of the current window;
	                              rolling: count in the trailing period;
	                              concurrent: leases held;
	                              gcra: capacity - remaining
	      "remaining": 87,
	      "ahead": 0,             window, rolling: already charged to later
	                              windows or buckets
	      "debt": 0,              charged past the limit by settled costs:
	                              gcra, events of cost 1 its state lies
	                              beyond its burst; window, its count
	                              beyond its quota
	      "next_expiry_ms": 0,    concurrent: until the soonest lease held
	                              expires unless renewed (0: none held)
	      "reset_after_ms": 34,   until back to full (rounded up; concurrent:
	                              until the latest lease expires)
	      "paused_until": null,   the pause these requests read, or null
	      "key": "throttle:{stripe}:global",
	      "exists": true          false: no state, the limit is idle
	    }]
	  }]
	}
` + storeFlagsText,
}

func init() { statusCmd.run = runStatus }

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var sf storeFlags
	var (
		asJSON, watch bool
		interval      time.Duration
		top, steps    int
	)
	fs := newFlagSet(statusCmd)
	sf.register(fs)
	fs.BoolVar(&asJSON, "json", false, "write JSON (schema above) instead of a table")
	fs.BoolVar(&watch, "watch", false, "refresh in place until interrupted")
	fs.DurationVar(&interval, "interval", 2*time.Second, "time between refreshes with --watch")
	fs.IntVar(&top, "top", 10, "scope values shown per provider, busiest first; 0 shows all")
	fs.IntVar(&steps, "scan-steps", 0, "SCAN calls per master per refresh (COUNT 500 each); 0 means 100, or 10 with --watch")
	pos, err := parse(statusCmd, fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("status takes at most one PROVIDER[/SCOPE], got %d arguments", len(pos))
	}
	if interval <= 0 {
		return usagef("--interval %v must be positive", interval)
	}
	if top < 0 || steps < 0 {
		return usagef("--top and --scan-steps must not be negative")
	}
	if steps == 0 {
		steps = 100
		if watch {
			steps = 10
		}
	}
	e, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer e.close()
	w := &watcher{e: e, top: top, steps: steps, known: map[*providers.Provider]map[string]bool{}}
	if len(pos) == 1 {
		parts := splitTarget(pos[0], 2)
		p, err := provider(e.cfg, parts[0])
		if err != nil {
			return err
		}
		w.provs = []*providers.Provider{p}
		if len(parts) == 2 {
			if parts[1] == "" {
				return usagef("%q: empty scope value", pos[0])
			}
			scoped := false
			for _, l := range allLimits(p) {
				scoped = scoped || l.lim.Scope.Kind != providers.ScopeProvider
			}
			if !scoped {
				return usagef("provider %q has no scoped limit: it has no scope values; use %q", p.Name, p.Name)
			}
			w.fixed = parts[1]
		}
	} else {
		w.provs = e.cfg.Providers()
	}
	w.prepare()

	if !watch {
		v, err := w.refresh(ctx)
		if err != nil {
			return err
		}
		return render(stdout, v, asJSON)
	}
	for {
		v, err := w.refresh(ctx)
		if over(ctx) {
			return nil
		}
		if err != nil {
			v = &view{Error: err.Error(), Prefix: e.store.Prefix()}
		}
		var buf bytes.Buffer
		if !asJSON {
			buf.WriteString("\x1b[H\x1b[2J")
		}
		if err := render(&buf, v, asJSON); err != nil {
			return err
		}
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return err
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// over reports whether ctx has ended or its deadline has passed. A
// refresh cut by the caller's deadline can fail an instant before ctx
// says so (a socket deadline set from it fires first): that refresh is
// the end of the watch, not a failed frame.
func over(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// view is one refresh, as --json writes it.
type view struct {
	Now          time.Time      `json:"now"`
	Prefix       string         `json:"prefix"`
	ScanComplete bool           `json:"scan_complete"`
	Error        string         `json:"error,omitempty"`
	Providers    []providerView `json:"providers"`
}

type providerView struct {
	Name        string     `json:"name"`
	TenantScope string     `json:"tenant_scope,omitempty"`
	PausedUntil *time.Time `json:"paused_until"`
	ScopesKnown int        `json:"scopes_known"`
	ScopesShown int        `json:"scopes_shown"`
	Rows        []row      `json:"rows"`
}

type row struct {
	Limit        string     `json:"limit"`
	Kind         string     `json:"kind"`
	Spec         string     `json:"spec"`
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
	Key          string     `json:"key"`
	Exists       bool       `json:"exists"`

	shared bool // the shared state of requests without a scope value
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
	req   quota.Request
	snap  redisstore.Snapshot
	score float64 // lowest share of capacity remaining
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
	var groups []*group
	for _, p := range w.provs {
		groups = append(groups, w.baseGroup(p))
		var parts []string
		if w.fixed != "" {
			s, _ := p.TenantScope()
			for _, l := range allLimits(p) {
				if l.lim.Scope.Kind != providers.ScopeProvider {
					s = l.lim.Scope
					break
				}
			}
			if part := scopePart(s, w.fixed); part != "" {
				parts = []string{part}
			}
		} else {
			for part := range w.known[p] {
				parts = append(parts, part)
			}
			sort.Strings(parts)
		}
		for _, part := range parts {
			if g := w.tenantGroup(p, part); g != nil {
				groups = append(groups, g)
			}
		}
	}
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
	i := 0
	for _, p := range w.provs {
		base := groups[i]
		i++
		pv := providerView{Name: p.Name, PausedUntil: timePtr(base.snap.PausedUntil)}
		if s, ok := p.TenantScope(); ok {
			pv.TenantScope = s.String()
		}
		pv.Rows = base.rows(base.snap.PausedUntil)
		var tenants []*group
		for i < len(groups) && groups[i].p == p {
			g := groups[i]
			i++
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
			tenants = append(tenants, g)
		}
		sort.SliceStable(tenants, func(a, b int) bool { return tenants[a].score < tenants[b].score })
		pv.ScopesKnown = len(tenants)
		if w.top > 0 && len(tenants) > w.top {
			tenants = tenants[:w.top]
		}
		pv.ScopesShown = len(tenants)
		for _, g := range tenants {
			pause := g.snap.PausedUntil
			if len(g.req.Pauses) == 0 {
				pause = base.snap.PausedUntil
			} else if ps := base.snap.Pauses; len(ps) > 0 && ps[len(ps)-1].After(pause) {
				pause = ps[len(ps)-1] // the provider's pause of every tenant
			}
			pv.Rows = append(pv.Rows, g.rows(pause)...)
		}
		v.Providers = append(v.Providers, pv)
	}
	return v, nil
}

// baseGroup reads a provider's provider-wide limits, the shared state of
// its scoped limits, and its pause.
func (w *watcher) baseGroup(p *providers.Provider) *group {
	g := &group{p: p}
	tag, pause := p.PauseKey("")
	g.req = quota.Request{Tag: tag, Pauses: []string{pause}}
	if _, all := p.AllPauseKey(); all != pause { // Pauses[1], which holds the tenants too
		g.req.Pauses = append(g.req.Pauses, all)
	}
	for _, l := range allLimits(p) {
		if l.lim.Scope.Kind != providers.ScopeProvider && l.lim.Missing != providers.Shared {
			continue
		}
		t, k := p.StateKey(l.lim, "")
		if t != tag {
			continue // cannot happen: a value-less request is tagged by the provider
		}
		g.lims = append(g.lims, l.lim)
		g.req.Items = append(g.req.Items, quota.Item{Limit: l.lim.Quota, Key: k})
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
	for _, l := range allLimits(p) {
		if l.lim.Scope.Kind == providers.ScopeProvider || !applies(l.lim, part) {
			continue
		}
		tag, k := p.StateKey(l.lim, part)
		g.req.Tag = tag
		g.lims = append(g.lims, l.lim)
		g.req.Items = append(g.req.Items, quota.Item{Limit: l.lim.Quota, Key: k})
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
		sp := spec(q)
		if q != lim.Quota {
			sp += " (learned)"
		}
		r := row{
			Limit: q.Name, Kind: q.Kind.String(), Spec: sp, Scope: lim.Scope.String(), Value: g.part,
			Capacity: q.Capacity(), Used: it.Used, Remaining: it.Remaining, Ahead: it.Ahead, Debt: it.Debt,
			NextExpiryMS: ceilMS(it.NextExpiry), ResetAfterMS: ceilMS(it.ResetAfter),
			Key: it.Key, Exists: it.Exists,
			shared: g.part == "" && lim.Scope.Kind != providers.ScopeProvider,
		}
		if pause.After(g.snap.Now) {
			r.PausedUntil = timePtr(pause)
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

// render writes a view as a table or as one line of JSON.
func render(w io.Writer, v *view, asJSON bool) error {
	if asJSON {
		if v.Providers == nil {
			v.Providers = []providerView{}
		}
		for i := range v.Providers {
			if v.Providers[i].Rows == nil {
				v.Providers[i].Rows = []row{}
			}
		}
		return json.NewEncoder(w).Encode(v)
	}
	if v.Error != "" {
		fmt.Fprintf(w, "throttle status: error: %s\n", v.Error)
		return nil
	}
	scan := "scan complete"
	if !v.ScanComplete {
		scan = "scan in progress: more scope values may exist"
	}
	fmt.Fprintf(w, "redis time %s, prefix %q, %s\n\n", v.Now.Format(time.RFC3339Nano), v.Prefix, scan)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tLIMIT\tSCOPE\tVALUE\tSPEC\tUSED\tREMAINING\tRESET AFTER\tPAUSED UNTIL")
	var notes []string
	for _, p := range v.Providers {
		for _, r := range p.Rows {
			value := r.Value
			switch {
			case r.Scope == "provider":
				value = "-"
			case r.shared:
				value = "(none)"
			}
			used := fmt.Sprint(r.Used)
			switch {
			case r.Kind == quota.Concurrency.String() && r.Used > 0:
				used = fmt.Sprintf("%d leases (soonest expires in %s)", r.Used, time.Duration(r.NextExpiryMS)*time.Millisecond)
			case r.Kind == quota.Concurrency.String():
				used = "0 leases"
			case r.Kind == quota.Rolling.String():
				used += " in trailing period"
			}
			if r.Ahead > 0 {
				used += fmt.Sprintf(" (+%d ahead)", r.Ahead)
			}
			if r.Debt > 0 {
				used += fmt.Sprintf(" (%d debt)", r.Debt)
			}
			paused := "-"
			if r.PausedUntil != nil {
				paused = fmt.Sprintf("%s (in %s)", r.PausedUntil.Format(time.RFC3339), r.PausedUntil.Sub(v.Now).Round(time.Second))
			}
			reset := (time.Duration(r.ResetAfterMS) * time.Millisecond).String()
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n",
				p.Name, r.Limit, r.Scope, value, r.Spec, used, r.Remaining, r.Capacity, reset, paused)
		}
		if p.PausedUntil != nil && len(p.Rows) == 0 {
			notes = append(notes, fmt.Sprintf("%s: paused until %s", p.Name, p.PausedUntil.Format(time.RFC3339)))
		}
		if p.ScopesShown < p.ScopesKnown {
			notes = append(notes, fmt.Sprintf("%s: %d of %d scope values shown, busiest first (--top 0 shows all)", p.Name, p.ScopesShown, p.ScopesKnown))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	return nil
}
