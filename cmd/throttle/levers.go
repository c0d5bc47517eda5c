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
	usage: `Usage: throttle pause PROVIDER[/SCOPE] --for DURATION --redis URL

Pause holds back, fleet-wide, every request of PROVIDER for DURATION from now
on Redis's clock, as the transport does when the vendor answers 429: the
transports wait for the pause to end (up to their max wait) or fail fast.
A longer pause in force is kept.

PROVIDER alone writes the provider's pause. For a provider with
keys: per_tenant (validate says "keys per_tenant"), each tenant's
requests read only their own pause: PROVIDER/SCOPE pauses the tenant whose
scope value is SCOPE (a business, a header value, a host; a "#..." value as
status shows it is taken as it is), and PROVIDER alone pauses only the
requests that carry no scope value.
` + storeFlagsText,
}

var resumeCmd = &command{
	name: "resume",
	usage: `Usage: throttle resume PROVIDER[/SCOPE] --redis URL

Resume lifts at once the pause that "throttle pause" (or a vendor's 429)
set on PROVIDER, or on the tenant PROVIDER/SCOPE.
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

// pauseTarget resolves PROVIDER[/SCOPE] to the tag and key of its pause.
func pauseTarget(cfg *providers.Config, target string) (p *providers.Provider, part, tag, key string, err error) {
	parts := splitTarget(target, 2)
	p, err = provider(cfg, parts[0])
	if err != nil {
		return nil, "", "", "", err
	}
	if len(parts) == 2 {
		s, ok := p.TenantScope()
		if !ok {
			return nil, "", "", "", usagef("provider %q is not tagged per tenant (keys: per_provider): its one pause holds back all its requests; use %q", p.Name, p.Name)
		}
		if part = scopePart(s, parts[1]); part == "" {
			return nil, "", "", "", usagef("%q: empty scope value", target)
		}
	}
	tag, key = p.PauseKey(part)
	return p, part, tag, key, nil
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
	fs := newFlagSet(pauseCmd)
	sf.register(fs)
	fs.Var(&d, "for", "how long to pause, e.g. 10m (required)")
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
	p, part, tag, key, err := pauseTarget(e.cfg, target)
	if err != nil {
		return err
	}
	if err := e.store.Pause(ctx, tag, key, time.Duration(d)); err != nil {
		return err
	}
	snap, err := e.store.Inspect(ctx, &quota.Request{Tag: tag, Pauses: []string{key}})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "paused %s until %s (%s from now)\n", target,
		snap.PausedUntil.UTC().Format(time.RFC3339), snap.PausedUntil.Sub(snap.Now).Round(time.Second))
	if s, ok := p.TenantScope(); ok && part == "" {
		fmt.Fprintf(stderr, "throttle: note: %s keeps each %s value in its own hash tag; this pauses only its requests without one. Pause a tenant with %s/VALUE.\n", p.Name, s, p.Name)
	}
	return nil
}

func runResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var sf storeFlags
	fs := newFlagSet(resumeCmd)
	sf.register(fs)
	target, err := oneTarget(resumeCmd, fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	e, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer e.close()
	_, _, tag, key, err := pauseTarget(e.cfg, target)
	if err != nil {
		return err
	}
	snap, err := e.store.Inspect(ctx, &quota.Request{Tag: tag, Pauses: []string{key}})
	if err != nil {
		return err
	}
	if err := e.store.Resume(ctx, tag, key); err != nil {
		return err
	}
	if snap.PausedUntil.IsZero() {
		fmt.Fprintf(stdout, "%s was not paused\n", target)
	} else {
		fmt.Fprintf(stdout, "resumed %s (it was paused until %s)\n", target, snap.PausedUntil.UTC().Format(time.RFC3339))
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
