package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/fleetquota/throttle/providers"
)

var statusCmd = &command{
	name: "status",
	usage: `Usage: throttle status [PROVIDER[/SCOPE]] --redis URL [--all] [--json] [--watch] [--serve ADDR]
       throttle status [PROVIDER] --tenant BUSINESS [--plan NAME] --redis URL [...]

Status shows the live state of the limits in Redis, read without changing
anything and computed as the store decides (Redis's TIME is the clock): per
limit and scope value, the limit as the vendor publishes it (the
configuration's figure) next to the one the fleet enforces (headroom
applied, or the figure a learning limit learned), what is left of it
(events of cost 1 admitted at once), when it is full again, and the pauses
in force. A concurrency limit shows the leases held (live ones: not
released, not expired) and when the soonest expires unless renewed; a
rolling window what is left over the trailing period; a window the
reservations already charged ahead (requests waiting into a later
window); a limit that settled costs took past its capacity, the debt the
next requests wait out. A limit with priority class reserves shows what
each class has left of it (a class's own lane and those below, or what
the reserves of the active classes above leave), and what an active
class holds from those below and for how much longer; a fair limit, who
shares it (fair: tenant or label:<name>).

With no argument every provider of the configuration is shown; PROVIDER
shows one; PROVIDER/SCOPE shows one tenant's state directly (a business, a
header value or a host; a "#..." value as status shows it is taken as it is).

--tenant BUSINESS shows one business's state on every provider with a
limit scoped per business (or on PROVIDER): its plan on each, and what it
has left of each limit at that plan's figures. A tenant's rows are read
at its plan's figures whatever the form (the "plan" field, and a note in
the table): the plan the configuration's tenants map names, else the
provider's default_plan. A program that names plans with WithPlans (a
lookup in its database) is not asked: --plan NAME reads the --tenant
business's state at that plan's figures instead.

The table lists only the limits that have state in Redis (a limit without
state is full); --all lists every limit. Rates are per second, minute,
hour, day or month, as vendors publish them; a period that headroom
stretched is shown as the rate per its whole units, to a tenth (810/min
at 95% is 769.5/min). The table fits the terminal's width ($COLUMNS, or --width;
100 when neither is set): notes move to a line under their row, cells
wrap at spaces, long scope values are cut with "…" (--json has them
whole), and a terminal too narrow for the columns gets one block of
lines per limit.

Per-tenant state is found by SCAN, a bounded number of calls per refresh on
every master (--scan-steps), so no refresh walks the whole keyspace; the
scope values found accumulate across refreshes and are read, with every
provider-wide limit, in one pipelined round. The busiest tenants come first
(lowest share of capacity remaining); --top bounds how many are shown.
Values too long or unsafe for a key are shown as "#" and a hash.

--watch redraws in place every --interval until interrupted (Ctrl-C); with
--json it writes one JSON document per line per refresh instead.

--serve ADDR serves, until interrupted, a read-only page of the same state:
each provider's limits as bars of what is left, the pauses in force with
when they end and why they were set, the fleet's recent refusals, the
leases held and the reservations charged ahead, refreshed every --interval
by the page itself. ":8080" listens on loopback only (127.0.0.1:8080);
name a host ("0.0.0.0:8080") to listen beyond it. /status.json answers the
JSON below, every limit included.

Pauses show why they were set when the pause recorded it: a vendor's
throttle records its status, host and delay ("429 from api.stripe.com,
Retry-After 30s"), "throttle pause" who paused and its --reason. Refusals
are those the fleet's processes record (throttle proxy does; a Go program
adds throttle.RefusalObserver with a redisstore.RefusalLog), per provider
and limit ("pause" for a pause), counted per minute of Redis's clock for an
hour. The table lists both after the limits.

JSON (--json), field names stable; it lists every limit, with or without
state (see "exists"):

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
	    "tenant": {"business": "acme", "plan": "enterprise", "from": "tenants"},
	                              with --tenant only; from: tenants, --plan,
	                              default or none (no plans)
	    "rows": [{
	      "limit": "global", "kind": "gcra" | "window" | "rolling" | "concurrent",
	      "spec": "90/s",         short form, headroom applied
	      "published": "100/s",   the configuration's figure, before headroom
	      "effective": "90/s",    what the store enforces, in a person's units
	                              ("(learned)" when a learning limit learned it)
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
	      "plan": "enterprise",   the tenant's plan whose figures the row
	                              is read at; omitted: the limit as written
	      "key": "throttle:{stripe}:global",
	      "exists": true,         false: no state, the limit is idle
	      "classes": [{           a limit with class reserves only, the top
	                              class first
	        "class": "interactive",
	        "left": 2900,         events of cost 1 a request of the class
	                              could have at once
	        "holds": 3000,        window, rolling, concurrent: what the
	        "held_ms": 41000      class keeps from those below while
	                              active, and for how much longer; absent
	                              while it is not
	      }],
	      "fair": {               a fair limit only (the fair field)
	        "by": "tenant",       or "label:<name>"
	        "active": 3,          tenants active now, and their weights'
	        "weight": 7,          sum (absent until the store reports them)
	        "tenant": {           with --tenant: the business's lane
	          "tenant": "acme", "weight": 4,
	          "next_appointment_ms": 1200   0: within its share
	        }
	      }
	    }]
	  }],
	  "pauses": [{                the pauses in force
	    "provider": "stripe",
	    "tenant": "acct_1",       a tenant's own pause; absent for the provider's
	    "holds": "every request" | "every request, all tenants" |
	             "requests without a tenant" | "the tenant's requests",
	    "until": "2026-01-02T15:05:05Z",
	    "set_at": "2026-01-02T15:04:35Z",  or null: no reason recorded
	    "reason": "429 from api.stripe.com, Retry-After 30s"   or ""
	  }],
	  "refusals": [{              limits that refused in the last hour, the
	                              most refused in the last 5 minutes first
	    "provider": "stripe", "limit": "global",
	    "last_5m": 37, "last_hour": 1204,
	    "last": "2026-01-02T15:04:01Z",    the latest, or null
	    "retry_after_ms": 2000             what the latest was told
	  }],
	  "refusals_error": "..."     only when the refusals could not be read
	}
` + storeFlagsText,
}

func init() { statusCmd.run = runStatus }

// defaultWidth is the table's width when neither --width nor $COLUMNS
// gives one (a shell sets COLUMNS but seldom exports it).
const defaultWidth = 100

// minWidth is the narrowest table status writes: a block of lines per
// limit still reads at 20 columns.
const minWidth = 20

// statusOptions are the flags of status.
type statusOptions struct {
	store         storeFlags
	asJSON, watch bool
	all           bool
	interval      time.Duration
	top, steps    int
	width         int
	serve         string
	tenant, plan  string
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, pos, err := parseStatusFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	e, err := o.store.open(ctx)
	if err != nil {
		return err
	}
	defer e.close()
	var w *watcher
	if o.tenant != "" {
		w, err = tenantWatcher(e, pos, o)
	} else {
		w, err = newWatcher(e, pos, o.top, o.steps)
	}
	if err != nil {
		return err
	}
	switch {
	case o.serve != "":
		return serveStatus(ctx, o.serve, w, o.interval, stderr)
	case o.watch:
		return o.watchStatus(ctx, w, stdout)
	}
	v, err := w.refresh(ctx)
	if err != nil {
		return err
	}
	return o.render(stdout, v)
}

// parseStatusFlags parses and checks status's command line, and fills in
// the defaults that depend on other flags.
func parseStatusFlags(args []string, stdout, stderr io.Writer) (*statusOptions, []string, error) {
	o := &statusOptions{}
	fs := newFlagSet(statusCmd)
	o.store.register(fs)
	fs.BoolVar(&o.asJSON, "json", false, "write JSON (schema above) instead of a table")
	fs.BoolVar(&o.watch, "watch", false, "refresh in place until interrupted")
	fs.BoolVar(&o.all, "all", false, "list every limit in the table, with state or not")
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "time between refreshes with --watch or --serve")
	fs.IntVar(&o.top, "top", 10, "scope values shown per provider, busiest first; 0 shows all")
	fs.IntVar(&o.steps, "scan-steps", 0, "SCAN calls per master per refresh (COUNT 500 each); 0 means 100, or 10 with --watch or --serve")
	fs.IntVar(&o.width, "width", 0, "`columns` the table fits in, at least 20; 0 means $COLUMNS, or 100")
	fs.StringVar(&o.serve, "serve", "", "serve a live status page on `ADDR` (\":8080\" is loopback only) until interrupted")
	fs.StringVar(&o.tenant, "tenant", "", "show one `BUSINESS`'s plan and state on every provider scoped per business (or PROVIDER)")
	fs.StringVar(&o.plan, "plan", "", "with --tenant: read its state at the figures of plan `NAME`")
	pos, err := parse(statusCmd, fs, args, stdout, stderr)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case len(pos) > 1:
		return nil, nil, usagef("status takes at most one PROVIDER[/SCOPE], got %d arguments", len(pos))
	case o.interval <= 0:
		return nil, nil, usagef("--interval %v must be positive", o.interval)
	case o.top < 0 || o.steps < 0:
		return nil, nil, usagef("--top and --scan-steps must not be negative")
	case o.width != 0 && o.width < minWidth:
		return nil, nil, usagef("--width %d: want at least %d columns (or 0 for $COLUMNS)", o.width, minWidth)
	case o.serve != "" && (o.watch || o.asJSON):
		return nil, nil, usagef("--serve shows its own page: it takes neither --watch nor --json")
	case o.plan != "" && o.tenant == "":
		return nil, nil, usagef("--plan %q names the plan of the --tenant business: give --tenant too", o.plan)
	case isSet(fs, "tenant") && o.tenant == "":
		return nil, nil, usagef("--tenant: empty business")
	}
	if o.serve != "" {
		addr, err := serveAddr(o.serve)
		if err != nil {
			return nil, nil, err
		}
		o.serve = addr
	}
	if o.steps == 0 {
		o.steps = 100
		if o.watch || o.serve != "" {
			o.steps = 10
		}
	}
	if o.width == 0 {
		o.width = defaultWidth
		if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
			o.width = max(n, minWidth)
		}
	}
	return o, pos, nil
}

// newWatcher makes the watcher of the providers, or the one provider or
// scope value, that the positional argument names.
func newWatcher(e *env, pos []string, top, steps int) (*watcher, error) {
	w := &watcher{e: e, top: top, steps: steps, known: map[*providers.Provider]map[string]bool{}}
	if len(pos) == 0 {
		w.provs = e.cfg.Providers()
		w.prepare()
		return w, nil
	}
	parts := splitTarget(pos[0], 2)
	p, err := provider(e.cfg, parts[0])
	if err != nil {
		return nil, err
	}
	w.provs = []*providers.Provider{p}
	if len(parts) == 2 {
		if parts[1] == "" {
			return nil, usagef("%q: empty scope value", pos[0])
		}
		scoped := false
		for _, l := range allLimits(p) {
			scoped = scoped || l.lim.Scope.Kind != providers.ScopeProvider
		}
		if !scoped {
			return nil, usagef("provider %q has no scoped limit: it has no scope values; use %q", p.Name, p.Name)
		}
		w.fixed = parts[1]
	}
	w.prepare()
	return w, nil
}

// render writes a view as the flags ask: a table, or one line of JSON.
func (o *statusOptions) render(w io.Writer, v *view) error {
	if o.asJSON {
		return renderJSON(w, v)
	}
	return renderTable(w, v, o.all, o.width)
}

// watchStatus redraws the status every interval until ctx ends.
func (o *statusOptions) watchStatus(ctx context.Context, w *watcher, stdout io.Writer) error {
	for {
		v, err := w.refresh(ctx)
		if over(ctx) {
			return nil
		}
		if err != nil {
			v = &view{Error: err.Error(), Prefix: w.e.store.Prefix()}
		}
		var buf bytes.Buffer
		if !o.asJSON {
			buf.WriteString("\x1b[H\x1b[2J")
		}
		if err := o.render(&buf, v); err != nil {
			return err
		}
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return err
		}
		t := time.NewTimer(o.interval)
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
