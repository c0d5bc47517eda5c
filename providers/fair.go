package providers

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/fleetquota/throttle/quota"
)

// This file reads a limit's fair field (docs/configuration.md, "Fair
// share"): a provider-wide GCRA limit shared among the tenants of its
// requests, each guaranteed its weighted share while the limit is
// contended (package quota, "Fair share"):
//
//	fair: tenant        the tenant is the request's business (WithBusiness, Throttle-Business)
//	fair: label:team    the tenant is the value of the label team (WithLabel, Throttle-Label)
//
// It becomes quota.Limit.Fair, and Resolve names each request's tenant
// and weight in quota.Request.Share.

// A Fair says who shares a fair limit: whose requests are the tenants
// that each get a weighted share of it.
type Fair struct {
	// Label is the label whose value names the tenant (fair:
	// label:<name>); "" for fair: tenant, whose tenant is the request's
	// business.
	Label string
}

// String returns the field as written: "tenant" or "label:<name>".
func (f *Fair) String() string {
	if f == nil {
		return "none"
	}
	if f.Label != "" {
		return "label:" + f.Label
	}
	return "tenant"
}

// share returns the Share of a request with input in whose business is
// on plan pl (nil: none, or the provider has no plans): the tenant's key
// part, "" for a request without a value (it shares as the tenant ""),
// and its weight. A tenant that is a business has its plan's weight; a
// label's value is no business, so it has weight 1 whatever the request's
// business is (a weight that followed the business would change with
// every request of the label's value).
func (f *Fair) share(in *Input, pl *Plan) quota.Share {
	s := quota.Share{Weight: 1}
	v := in.Business
	if f.Label != "" {
		v = in.Labels[f.Label]
	} else if pl != nil {
		s.Weight = pl.Weight
	}
	if v != "" {
		s.Key = quota.SafePart(v)
	}
	return s
}

// fair decodes the field fair of the limit q (lim, as decoded so far):
// tenant or label:<name>, on a provider-wide GCRA limit that does not
// learn. What depends on the rest of the provider (class reserves, keys
// per tenant, other fair limits) is checked by fairLimits. A problem
// here is recorded without dropping the limit, so that what names it
// (sync, costs) reports nothing more; the configuration is refused all
// the same.
func (d *limitDecoder) fair(q *quota.Limit, lim *Limit) {
	n := d.f["fair"]
	if n == nil {
		return
	}
	path := d.path + ".fair"
	d.ln.fair = n
	s, ok := d.str(n, path, "tenant or label:<name>")
	if !ok {
		return
	}
	f, ok := parseFair(s)
	if !ok {
		d.add(n, path, "want tenant (each business a tenant) or label:<name> (each value of the label a tenant), got %q", s)
		return
	}
	switch {
	case !d.good: // the limit is dropped already
	case d.sf.kind != quota.GCRA:
		d.add(n, path, "only a GCRA limit (a rate per period, e.g. 700/min) can be shared fairly, not a %v limit: its tenants' shares are rates", d.sf.kind)
	case lim.Scope.Kind != ScopeProvider:
		d.add(n, path, "a fair limit is one provider-wide limit shared among tenants, but this one is scoped by %s: remove its scope (each %s value already has a limit of its own), or remove fair", lim.Scope, lim.Scope)
	case q.Learn:
		d.add(n, path, "a learning limit cannot be shared fairly: its rate follows the vendor, and the tenants' lanes are cut from a fixed one; remove learn or fair")
	default:
		q.Fair = true
		lim.Fair = f
	}
}

// A fair limit's burst times quota.MaxWeight must stay below 2^53
// (quota.Limit.Validate): maxCount, the largest burst a configuration
// can give, keeps it there. This fails to compile if it no longer does.
const _ = uint64((1<<53-1)/quota.MaxWeight - maxCount)

// parseFair reads the value of the field fair.
func parseFair(s string) (*Fair, bool) {
	if s == "tenant" {
		return &Fair{}, true
	}
	if name, ok := strings.CutPrefix(s, "label:"); ok && name != "" && len(name) <= 64 && validToken(name) {
		return &Fair{Label: name}, true
	}
	return nil, false
}

// fairLimits checks the fair limits among p's (lims, its own and its
// routes', in file order) against the rest of the provider: a request
// names one tenant, so every fair limit of a provider shares by the same
// thing; its state lives in the provider's tag, so the provider keeps
// its keys per provider. (Class reserves are checked by limitPriority.)
//
// Quota taken ahead (the ahead field) goes with a fair limit no better
// than with classes: a batch of slots booked ahead is no tenant's. When
// both are on main, refuse the combination here, at the fair field.
func (l *loader) fairLimits(p *Provider, lims []*limitNodes, keys *yaml.Node) {
	var first *limitNodes
	for _, ln := range lims {
		if ln.lim == nil || ln.lim.Fair == nil {
			continue
		}
		path := join(ln.path, "fair")
		switch {
		case p.Keys == PerTenant:
			l.add(ln.fair, path, "a fair limit's state (its tenants' lanes and who is active) lives in the provider's tag beside the limit, but keys: per_tenant (line %d) gives each tenant's keys a tag of their own: remove keys: per_tenant, or fair", keys.Line)
		case first == nil:
			first = ln
		case *ln.lim.Fair != *first.lim.Fair:
			l.add(ln.fair, path, "limit %s is shared by %s, but limit %s (line %d) by %s: a request has one tenant, so share every fair limit of provider %s alike",
				ln.lim.Quota.Name, ln.lim.Fair, first.lim.Quota.Name, first.fair.Line, first.lim.Fair, p.Name)
		}
	}
}

// fairChanges lists what a change of limit ol's fair field (nl's) does:
// the limit's own state stays, so it moves nothing.
func fairChanges(op *Provider, ol, nl *Limit) []Change {
	if ol.Fair.String() == nl.Fair.String() {
		return nil
	}
	detail := fmt.Sprintf("fair %s -> %s: ", ol.Fair, nl.Fair)
	switch {
	case ol.Fair == nil:
		detail += "the limit's state stays; every tenant starts within its share, and until every process runs the new configuration the old ones book the limit ahead for their waiters, which the new ones wait behind"
	case nl.Fair == nil:
		detail += "the limit's state stays; its tenants' lanes are no longer read and expire, and waiters book the limit ahead again in arrival order"
	default:
		detail += "the limit's state stays; the tenants are named otherwise, so every tenant starts within its share, and the old tenants' lanes expire"
	}
	return []Change{{Provider: op.Name, Limit: ol.Quota.Name, Kind: FairChanged, Detail: detail}}
}
