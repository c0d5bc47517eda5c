package providers

import (
	"fmt"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// A ChangeKind says what a change of configuration does to a provider's
// state in the store.
type ChangeKind uint8

const (
	// ProviderRemoved: the provider is gone; its state and pauses are no
	// longer read.
	ProviderRemoved ChangeKind = iota + 1
	// ProviderRenamed: a provider of another name claims one of its
	// hosts. Every key starts with the provider's name (its tag), so the
	// renamed provider starts from empty state.
	ProviderRenamed
	// KeysMoved: the provider's keys field or tenant scope changed, so
	// the keys of every request with a tenant value move to another hash
	// tag: spent quota is forgotten, and during a rolling deploy old and
	// new processes keep two quotas. Registry.Reload refuses it unless
	// told otherwise (ErrKeysMoved).
	KeysMoved
	// PausesMoved goes with KeysMoved: the pause a tenant's requests read
	// is another key, so pauses in force are forgotten.
	PausesMoved
	// LimitRemoved: the limit is gone (from the provider and every
	// route); its state is no longer read.
	LimitRemoved
	// LimitRenamed: a removed limit and an added one are the same limit
	// (kind, numbers and scope) under another name. The name starts its
	// keys, so the state of the old name is forgotten.
	LimitRenamed
	// ScopeChanged: the limit's scope changed, so its keys do: spent
	// quota is forgotten.
	ScopeChanged
	// KindChanged: a limit changed kind (GCRA, calendar window, rolling
	// window). The key stays, but its state is of the other kind and
	// cannot be read as the new one: between GCRA and a window the Redis
	// store fails the limit's decisions (WRONGTYPE) until the old state
	// expires or is reset; between the two windows the count is
	// forgotten.
	KindChanged
	// WindowChanged: a calendar window's unit, reset time or time zone
	// changed, so its windows start at other times, or a rolling window's
	// period changed its bucket width: the count is forgotten.
	WindowChanged
	// LimitAdded: a new limit, whose state starts empty. Until every
	// process runs the new configuration, only the new ones count it.
	// It moves nothing (Moves is false).
	LimitAdded
	// ProviderAdded: a new provider, whose state starts empty. It moves
	// nothing (Moves is false).
	ProviderAdded
	// LanesChanged: a GCRA limit gained, lost or changed the number of
	// its class lanes (priority classes and reserves). The bottom lane
	// keeps the limit's key, so the state of the requests of the bottom
	// class stays; a new upper lane starts empty, that is full, so until
	// it refills the fleet may admit up to its burst beyond the limit,
	// and a lane no longer kept is forgotten.
	LanesChanged
	// PriorityChanged: the provider's classes, a limit's reserves, its
	// active_for or its pace changed in a way that keeps its state: it
	// applies from the next decision. It moves nothing (Moves is false),
	// but a class removed refuses the requests that still name it
	// (ErrUnknownClass).
	PriorityChanged
	// FairChanged: a limit's fair field changed (shared fairly or not,
	// or among other tenants). The limit's own state stays; its tenants'
	// lanes start anew. It moves nothing (Moves is false).
	FairChanged
)

var changeNames = [...]string{
	ProviderRemoved: "provider_removed",
	ProviderRenamed: "provider_renamed",
	KeysMoved:       "keys_moved",
	PausesMoved:     "pauses_moved",
	LimitRemoved:    "limit_removed",
	LimitRenamed:    "limit_renamed",
	ScopeChanged:    "scope_changed",
	KindChanged:     "kind_changed",
	WindowChanged:   "window_changed",
	LimitAdded:      "limit_added",
	ProviderAdded:   "provider_added",
	LanesChanged:    "lanes_changed",
	PriorityChanged: "priority_changed",
	FairChanged:     "fair_changed",
}

// String returns the kind in snake case, e.g. "keys_moved".
func (k ChangeKind) String() string {
	if int(k) < len(changeNames) && changeNames[k] != "" {
		return changeNames[k]
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Moves reports whether a change of this kind moves or forgets state
// that the store holds: every kind but LimitAdded, ProviderAdded,
// PriorityChanged and FairChanged.
func (k ChangeKind) Moves() bool {
	return k != LimitAdded && k != ProviderAdded && k != PriorityChanged && k != FairChanged
}

// A Change is one difference between two configurations that matters to
// the state a store keeps for them.
type Change struct {
	// Provider is the provider's name in the old configuration (in the
	// new one for ProviderAdded).
	Provider string
	// Limit is the limit's name, or "" for a change of the provider.
	Limit string
	// Kind says what the change does to the state.
	Kind ChangeKind
	// Detail says what changed and what it does, in words.
	Detail string
}

// String returns "provider: detail" or "provider/limit: detail".
func (c Change) String() string {
	who := c.Provider
	if c.Limit != "" {
		who += "/" + c.Limit
	}
	return who + ": " + c.Detail
}

// Changes lists what a switch from old to new does to the state of the
// providers of old (and which providers and limits new adds): per
// provider in old's order, then the providers new adds. What determines
// a key is the provider's name, its keys field and tenant scope, and a
// limit's name and scope; what determines whether its state can be read
// is the limit's kind and, for a window, its calendar. Everything else
// (rates, bursts, quotas, headroom, routes, costs, behaviour) can change
// without moving state.
func Changes(old, new *Config) []Change {
	var out []Change
	if old == nil || new == nil {
		return nil
	}
	for _, op := range old.providers {
		np, ok := new.byName[op.Name]
		if !ok {
			out = append(out, removedProvider(op, old, new))
			continue
		}
		out = append(out, providerChanges(op, np)...)
	}
	for _, np := range new.providers {
		if _, ok := old.byName[np.Name]; !ok {
			out = append(out, Change{Provider: np.Name, Kind: ProviderAdded,
				Detail: "new provider: its state starts empty"})
		}
	}
	return out
}

// removedProvider says what became of a provider that new does not have.
func removedProvider(op *Provider, old, new *Config) Change {
	hosts := map[string]bool{}
	for _, h := range op.Hosts {
		hosts[foldHost(h)] = true
	}
	for _, np := range new.providers {
		if _, existed := old.byName[np.Name]; existed {
			continue
		}
		for _, h := range np.Hosts {
			if hosts[foldHost(h)] {
				return Change{Provider: op.Name, Kind: ProviderRenamed, Detail: fmt.Sprintf(
					"renamed to %s (it claims host %s): every key's tag starts with the provider's name, so %s starts with empty state and no pause",
					np.Name, h, np.Name)}
			}
		}
	}
	return Change{Provider: op.Name, Kind: ProviderRemoved,
		Detail: "removed: its state and pauses are no longer read"}
}

// providerChanges compares one provider in both configurations.
func providerChanges(op, np *Provider) []Change {
	var out []Change
	add := func(lim string, k ChangeKind, format string, args ...any) {
		out = append(out, Change{Provider: op.Name, Limit: lim, Kind: k, Detail: fmt.Sprintf(format, args...)})
	}
	oScope, oTenant := op.TenantScope()
	nScope, nTenant := np.TenantScope()
	switch {
	case oTenant && nTenant && oScope != nScope:
		add("", KeysMoved, "tenant scope %s -> %s: every tenant's keys move to the tag %s:<%s value>: spent quota is forgotten, and during a rolling deploy old and new processes keep two quotas",
			oScope, nScope, op.Name, nScope)
		add("", PausesMoved, "each tenant's pause moves to the tag of its %s value: pauses in force are forgotten", nScope)
	case oTenant && !nTenant:
		add("", KeysMoved, "keys per_tenant (%s) -> per_provider: every tenant's keys move from tag %s:<%s value> to tag %s: spent quota is forgotten, and during a rolling deploy old and new processes keep two quotas",
			oScope, op.Name, oScope, op.Name)
		add("", PausesMoved, "each tenant's pause (pause:<value> in its tag) is no longer read; the provider's one pause now holds back every request")
	case !oTenant && nTenant:
		add("", KeysMoved, "keys per_provider -> per_tenant (%s): the keys of every request with a %s value move from tag %s to tag %s:<value>: spent quota is forgotten, and during a rolling deploy old and new processes keep two quotas",
			nScope, nScope, op.Name, op.Name)
		add("", PausesMoved, "requests with a %s value no longer read the provider's pause, but their tenant's own (pause:<value> in its tag): pauses in force no longer hold them back", nScope)
	}
	out = append(out, classChanges(op, np)...)

	var removed, added []*Limit
	for _, ol := range op.allLimits() {
		nl := np.limits[ol.Quota.Name]
		if nl == nil {
			removed = append(removed, ol)
			continue
		}
		name := ol.Quota.Name
		if ol.Scope != nl.Scope {
			add(name, ScopeChanged, "scope %s -> %s: its keys change (%s), so spent quota is forgotten", ol.Scope, nl.Scope, keyShape(name, nl.Scope))
		}
		oq, nq := ol.Quota, nl.Quota
		switch {
		case oq.Kind != nq.Kind && oq.Kind != quota.GCRA && nq.Kind != quota.GCRA:
			add(name, KindChanged, "%s -> %s: its key holds counts of the other kind, which the new one cannot read, so spent quota is forgotten",
				oq.Kind, nq.Kind)
		case oq.Kind != nq.Kind:
			add(name, KindChanged, "%s -> %s: its key holds state of the other kind, which the new one cannot read: the Redis store fails its decisions (WRONGTYPE) until that state expires; reset it (throttle reset %s/%s) when the new configuration is everywhere",
				oq.Kind, nq.Kind, op.Name, name)
		case oq.Kind == quota.Window && !sameCalendar(oq.Calendar, nq.Calendar):
			add(name, WindowChanged, "window %s -> %s: windows start at other times, so the count of the current window is forgotten",
				calendarString(oq.Calendar), calendarString(nq.Calendar))
		case oq.Kind == quota.Rolling && oq.BucketWidth() != nq.BucketWidth():
			add(name, WindowChanged, "rolling period %v -> %v: its buckets change width, so the count of the trailing period is forgotten",
				oq.Period, nq.Period)
		}
		if oq.Kind == nq.Kind {
			out = append(out, reserveChanges(op, np, ol, nl)...)
		}
		out = append(out, fairChanges(op, ol, nl)...)
	}
	for _, nl := range np.allLimits() {
		if op.limits[nl.Quota.Name] == nil {
			added = append(added, nl)
		}
	}
	// A removed limit and an added one alike in all but the name: renamed.
	for _, ol := range removed {
		renamed := false
		for i, nl := range added {
			if nl != nil && sameLimit(ol, nl) {
				add(ol.Quota.Name, LimitRenamed, "renamed to %s: its keys start with its name, so spent quota is forgotten", nl.Quota.Name)
				added[i], renamed = nil, true
				break
			}
		}
		if !renamed {
			add(ol.Quota.Name, LimitRemoved, "removed: its state is no longer read")
		}
	}
	for _, nl := range added {
		if nl != nil {
			out = append(out, Change{Provider: op.Name, Limit: nl.Quota.Name, Kind: LimitAdded,
				Detail: "new limit: its state starts empty, and until every process runs the new configuration only the new ones count it"})
		}
	}
	return out
}

// keyShape describes a limit's keys under a scope, e.g. "core:<business
// value>".
func keyShape(name string, s Scope) string {
	if s.Kind == ScopeProvider {
		return joinKey(name, "")
	}
	return joinKey(name, "<"+s.String()+" value>")
}

// sameLimit reports whether two limits differ at most by name.
func sameLimit(a, b *Limit) bool {
	qa, qb := a.Quota, b.Quota
	return a.Scope == b.Scope && qa.Kind == qb.Kind && qa.Rate == qb.Rate && qa.Period == qb.Period &&
		qa.Capacity() == qb.Capacity() && (qa.Kind != quota.Window || sameCalendar(qa.Calendar, qb.Calendar))
}

// sameCalendar compares calendars by the name of their zone (two loads of
// one zone are two *time.Location values).
func sameCalendar(a, b quota.Calendar) bool {
	return a.Unit == b.Unit && a.Reset == b.Reset && zoneName(a) == zoneName(b)
}

func zoneName(c quota.Calendar) string {
	if c.Location == nil {
		return "UTC"
	}
	return c.Location.String()
}

// calendarString is e.g. "per day resets 00:00 UTC".
func calendarString(c quota.Calendar) string {
	h, m := int64(c.Reset/time.Hour), int64(c.Reset%time.Hour/time.Minute)
	return fmt.Sprintf("per %s resets %02d:%02d %s", c.Unit, h, m, zoneName(c))
}
