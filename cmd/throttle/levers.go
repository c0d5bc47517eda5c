package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

const storeFlagsText = `
--redis, --cluster, --config and --prefix must name the Redis, the
configuration and the key prefix the fleet uses.
`

var pauseCmd = &command{
	name: "pause",
	usage: `Usage: throttle pause PROVIDER [--tenant VALUE] --for DURATION [--reason TEXT] --redis URL

Pause holds back, fleet-wide, every request of PROVIDER for DURATION from now
on Redis's clock, as the transport does when the vendor answers 429: the
transports wait for the pause to end (up to their max wait) or fail fast.
A longer pause in force is kept, with its reason.

Beside the pause it records who set it (user@host) and --reason TEXT, which
status and its page show, as they show a vendor's ("429 from api.stripe.com,
Retry-After 30s"). Keep secrets out of TEXT: anyone who reads the status
reads it. It is cut to 200 bytes.

PROVIDER alone pauses every request of the provider, of every tenant. For a
provider with keys: per_tenant (validate says "keys per_tenant"),
--tenant VALUE (or PROVIDER/VALUE) pauses only the tenant whose scope value
is VALUE (a business, a header value, a host; a "#..." value as status shows
it is taken as it is). On a Redis Cluster a tenant's decision reads its own
hash slot only, so there PROVIDER alone also writes a copy of the pause in
each of the cluster's 16,384 slots (16,384 SETs, pipelined per master),
which resume deletes. On a go-redis Ring (--ring) a tenant's decision reads
its own shard only, so there PROVIDER alone writes a copy on every shard;
a shard that does not answer fails the command (the others hold theirs):
run it again once the shard is back.
` + storeFlagsText,
}

var resumeCmd = &command{
	name: "resume",
	usage: `Usage: throttle resume PROVIDER [--tenant VALUE] --redis URL

Resume lifts at once the pause that "throttle pause" (or a vendor's 429)
set on PROVIDER, or on one tenant (--tenant VALUE, or PROVIDER/VALUE).
Resuming a tenant does not lift the provider's pause, which holds every
tenant. On a Redis Cluster, resuming PROVIDER also deletes the pause's copies
in every hash slot, on a Ring on every shard (see "throttle pause --help");
if it fails half-way, the provider stays paused: run it again.
` + storeFlagsText,
}

var resetCmd = &command{
	name: "reset",
	usage: `Usage: throttle reset PROVIDER[/LIMIT[/SCOPE]] --redis URL

Reset deletes limit state, so the limit is back to its full capacity: for
when a vendor raised a quota, or a count is known to be wrong. It does not
lift a pause (see resume).

	PROVIDER              every limit's provider-wide state, and the shared
	                      state of scoped limits' requests without a value
	PROVIDER/LIMIT        that one limit's provider-wide or shared state
	PROVIDER/LIMIT/SCOPE  LIMIT's state for the scope value SCOPE
	PROVIDER/*/SCOPE      every scoped limit's state for SCOPE

Reservations already made are forgotten, so for a moment the fleet may send
more than the limit allows.
` + storeFlagsText,
}

func init() {
	pauseCmd.run = runPause
	resumeCmd.run = runResume
	resetCmd.run = runReset
}

// pauseTarget resolves PROVIDER[/SCOPE], or PROVIDER with tenant (the
// --tenant flag), to its provider, the tenant's key part ("" for the
// provider), and the tag and keys of its pauses: keys[0] is the one pause
// sets (a tenant's, or the provider's pause of every tenant); resume lifts
// them all, for a provider also the pause a vendor's throttle of its
// requests without a tenant value sets.
func pauseTarget(cfg *providers.Config, target, tenant string) (p *providers.Provider, part, tag string, keys []string, err error) {
	parts := splitTarget(target, 2)
	p, err = provider(cfg, parts[0])
	if err != nil {
		return nil, "", "", nil, err
	}
	if len(parts) == 2 {
		if tenant != "" {
			return nil, "", "", nil, usagef("%q and --tenant %q: name the tenant once", target, tenant)
		}
		tenant = parts[1]
		if tenant == "" {
			return nil, "", "", nil, usagef("%q: empty scope value", target)
		}
	}
	if tenant != "" {
		s, ok := p.TenantScope()
		if !ok {
			return nil, "", "", nil, usagef("provider %q is not tagged per tenant (keys: per_provider): its one pause holds back all its requests; use %q without a tenant", p.Name, p.Name)
		}
		if part = scopePart(s, tenant); part == "" {
			return nil, "", "", nil, usagef("%q: empty scope value", tenant)
		}
	}
	if part != "" {
		tag, key := p.PauseKey(part)
		return p, part, tag, []string{key}, nil
	}
	tag, all := p.AllPauseKey()
	keys = []string{all}
	if _, own := p.PauseKey(""); own != all {
		keys = append(keys, own)
	}
	return p, "", tag, keys, nil
}

// everyTenant reports whether the first pause of pauseTarget's p and part
// is the provider's pause of every tenant, which its tenants' requests
// read as their quota.Request.Over: set with PauseOver, so that on a Redis
// Cluster each tenant finds its copy in its own slot, and lifted with
// ResumeOver.
func everyTenant(p *providers.Provider, part string) bool {
	_, ok := p.TenantScope()
	return ok && part == ""
}

// pauseDuration is --for: a time.Duration whose parse error says what is
// wrong with the value and shows ones that work, where flag.Duration says
// only "parse error" (to "--for 10", which lacks its unit, above all).
type pauseDuration time.Duration

func (d *pauseDuration) String() string { return time.Duration(*d).String() }

func (d *pauseDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err == nil {
		*d = pauseDuration(v)
		return nil
	}
	if strings.ContainsAny(s, "0123456789") && strings.Trim(s, "0123456789.") == "" {
		return fmt.Errorf("%q has no unit: write %ss for seconds or %sm for minutes", s, s, s)
	}
	return fmt.Errorf("%q is not a duration: write a number and a unit, without spaces, e.g. 10s, 5m or 1h30m", s)
}

func runPause(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var sf storeFlags
	var d pauseDuration
	var tenant, why string
	fs := newFlagSet(pauseCmd)
	sf.register(fs)
	fs.Var(&d, "for", "how long to pause, e.g. 10m (required)")
	fs.StringVar(&tenant, "tenant", "", "pause only this tenant's requests (keys: per_tenant)")
	fs.StringVar(&why, "reason", "", "why, shown beside the pause by status and its page (with who paused)")
	target, err := oneTarget(pauseCmd, fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if d <= 0 {
		return usagef("pause needs --for with a positive duration, e.g. --for 10m")
	}
	e, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer e.close()
	p, part, tag, keys, err := pauseTarget(e.cfg, target, tenant)
	if err != nil {
		return err
	}
	pause := e.store.PauseWithReason
	if everyTenant(p, part) {
		pause = e.store.PauseOverWithReason
	}
	if err := pause(ctx, tag, keys[0], time.Duration(d), operatorReason(why)); err != nil {
		return err
	}
	return printPaused(ctx, stdout, e, what(target, tenant), quota.PauseKey{Tag: tag, Key: keys[0]}, time.Duration(d))
}

// what names a pause's target for output: PROVIDER[/SCOPE], or
// PROVIDER/TENANT for --tenant.
func what(target, tenant string) string {
	if tenant == "" {
		return target
	}
	return target + "/" + tenant
}

func runResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var sf storeFlags
	var tenant string
	fs := newFlagSet(resumeCmd)
	sf.register(fs)
	fs.StringVar(&tenant, "tenant", "", "resume only this tenant's requests (keys: per_tenant)")
	target, err := oneTarget(resumeCmd, fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	e, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer e.close()
	p, part, tag, keys, err := pauseTarget(e.cfg, target, tenant)
	if err != nil {
		return err
	}
	snap, err := e.store.Inspect(ctx, &quota.Request{Tag: tag, Pauses: keys})
	if err != nil {
		return err
	}
	for i, key := range keys {
		resume := e.store.Resume
		if i == 0 && everyTenant(p, part) {
			resume = e.store.ResumeOver
		}
		if err := resume(ctx, tag, key); err != nil {
			return err
		}
	}
	if snap.PausedUntil.IsZero() {
		fmt.Fprintf(stdout, "%s was not paused\n", what(target, tenant))
	} else {
		fmt.Fprintf(stdout, "resumed %s (it was paused until %s)\n", what(target, tenant), snap.PausedUntil.UTC().Format(time.RFC3339))
	}
	return nil
}

func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var sf storeFlags
	fs := newFlagSet(resetCmd)
	sf.register(fs)
	target, err := oneTarget(resetCmd, fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	e, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer e.close()
	parts := splitTarget(target, 3)
	p, err := provider(e.cfg, parts[0])
	if err != nil {
		return err
	}
	var lims []*providers.Limit
	switch {
	case len(parts) == 1 || parts[1] == "*":
		if len(parts) == 2 {
			return usagef("%q: * needs a scope value: %s/*/SCOPE", target, p.Name)
		}
		for _, l := range allLimits(p) {
			if len(parts) == 3 && l.lim.Scope.Kind == providers.ScopeProvider {
				continue
			}
			lims = append(lims, l.lim)
		}
		if len(lims) == 0 {
			return usagef("provider %q has no scoped limit", p.Name)
		}
	default:
		lim, err := findLimit(p, parts[1])
		if err != nil {
			return err
		}
		if len(parts) == 3 && lim.Scope.Kind == providers.ScopeProvider {
			return usagef("limit %s/%s is provider-wide: it has no scope values; use %s/%s", p.Name, parts[1], p.Name, parts[1])
		}
		lims = []*providers.Limit{lim}
	}
	// Keys grouped by tag: one DEL per tag (one slot).
	byTag := map[string][]string{}
	var tags []string
	for _, lim := range lims {
		part := ""
		if len(parts) == 3 {
			if part = scopePart(lim.Scope, parts[2]); part == "" {
				return usagef("%q: empty scope value", target)
			}
		}
		tag, key := p.StateKey(lim, part)
		if _, ok := byTag[tag]; !ok {
			tags = append(tags, tag)
		}
		byTag[tag] = append(byTag[tag], key)
	}
	for _, tag := range tags {
		if err := e.store.Reset(ctx, tag, byTag[tag]...); err != nil {
			return err
		}
		for _, k := range byTag[tag] {
			fmt.Fprintf(stdout, "reset %s\n", e.store.Key(tag, k))
		}
	}
	return nil
}

// oneTarget parses a command line with exactly one positional argument.
func oneTarget(c *command, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (string, error) {
	pos, err := parse(c, fs, args, stdout, stderr)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usagef("%s takes one target, got %d; run \"throttle %s --help\"", c.name, len(pos), c.name)
	}
	return pos[0], nil
}
