package providers

import "github.com/fleetquota/throttle/quota"

// This file lets tools that read or change a store's state (cmd/throttle)
// address it as Resolve does, without re-deriving the key layout.

// TenantScope returns the scope by which the provider's requests are tagged
// per tenant, and ok true, when every limit of the provider (routes
// included) has that one scope; see "Keys and tags" in the package doc.
// Otherwise every request is tagged with the provider's name and ok is
// false.
func (p *Provider) TenantScope() (s Scope, ok bool) {
	return p.tenant, p.tenantTag
}

// StateKey returns where a request keeps the state of lim, one of p's
// limits (its own or a route's), when the request's value for lim's scope
// is the key part part: the quota.Request tag and the quota.Item key that
// Resolve gives it. part is quota.SafePart of the scope value, as it
// appears in keys (a hashed value's "#…" part is passed as it is); ""
// means no value, the key of a provider-wide limit or of the shared state
// of requests without a value.
func (p *Provider) StateKey(lim *Limit, part string) (tag, key string) {
	name := lim.Quota.Name
	if part == "" || lim.Scope.Kind == ScopeProvider {
		return p.Name, quota.KeyOf(name, "")
	}
	return p.tag(part), name + ":" + part
}

// PauseKey returns the tag and key of the pause that holds back the
// requests whose tenant value has the key part part (see StateKey), as
// Resolve puts them in Resolution.Request.Tag and Resolution.Pause. With
// part "" or a provider that is not tagged per tenant (TenantScope), it is
// the provider's pause, which holds back every request tagged with the
// provider's name — not those in a tenant's tag.
func (p *Provider) PauseKey(part string) (tag, key string) {
	if part == "" || !p.tenantTag {
		return p.Name, pauseKey
	}
	return p.tag(part), pauseKey + ":" + part
}

// tag is the tag of a request whose scope value has the key part part.
func (p *Provider) tag(part string) string {
	if !p.tenantTag {
		return p.Name
	}
	return p.Name + ":" + part
}

// Part returns the key part that Resolve makes of the value v of scope s
// (a host lower-cased without a final dot, a header value trimmed, then
// quota.SafePart), or "" for an empty value: what StateKey and PauseKey
// take, for a value an operator typed.
func (s Scope) Part(v string) string {
	if v = normalize(s, v); v == "" {
		return ""
	}
	return quota.SafePart(v)
}
