package providers

import (
	"strings"

	"github.com/fleetquota/throttle/quota"
)

// This file owns the keyspace: every tag, item key and pause key that
// Resolve hands a store is built here, and every one a tool reads back
// (cmd/throttle, the transport's LimitError.Scope) is parsed here. The
// layout, with part the key part of a scope value (quota.SafePart of it):
//
//	tag        <provider>          keys: per_provider, or no tenant value
//	           <provider>:<part>   keys: per_tenant, a tenant's tag
//	item key   <limit>             a provider-wide limit, or the shared
//	                               state of requests without a value
//	           <limit>:<part>
//	pause key  pause               in the provider's tag
//	           pause:<part>        in a tenant's tag
//	           pause:all           in the provider's tag, keys per tenant:
//	                               every tenant's (AllPauseKey)
//
// Provider and limit names hold no ":" (validName) and "pause" is not a
// limit name; a part is a value SafePart keeps (no ":") or "#" and 32 hex
// digits. So the first ":" splits a head from its part, and a pause key
// never equals an item key. The store adds its own physical layout around
// the tag and key (for Redis, quota/redisstore's Store.Key).

// joinKey returns head, or head ":" part when part is not empty.
func joinKey(head, part string) string {
	if part == "" {
		return head
	}
	return head + ":" + part
}

// keyLen is len(joinKey(head, part)), for sizing a builder.
func keyLen(head, part string) int {
	if part == "" {
		return len(head)
	}
	return len(head) + 1 + len(part)
}

// writeKey writes joinKey(head, part) to b and returns it as a slice of
// b's buffer. b must have room for it (Grow), so that no write moves the
// buffer under the strings already returned: Resolve builds every string
// of a request in one allocation this way.
func writeKey(b *strings.Builder, head, part string) string {
	start := b.Len()
	b.WriteString(head)
	if part != "" {
		b.WriteByte(':')
		b.WriteString(part)
	}
	return b.String()[start:]
}

// isKey reports whether s == joinKey(head, part), without building it.
func isKey(s, head, part string) bool {
	if part == "" {
		return s == head
	}
	return len(s) == len(head)+1+len(part) && s[len(head)] == ':' &&
		strings.HasPrefix(s, head) && strings.HasSuffix(s, part)
}

// splitKey is joinKey's inverse. ok is false when s is not a name
// optionally followed by ":" and a part joinKey could have been given.
func splitKey(s string) (head, part string, ok bool) {
	head, part, found := strings.Cut(s, ":")
	if !validName(head) {
		return "", "", false
	}
	if found && !isPart(part) {
		return "", "", false
	}
	return head, part, true
}

// isPart reports whether s is a key part: a value quota.SafePart keeps,
// or a hash it made.
func isPart(s string) bool {
	return s != "" && (quota.IsHash(s) || quota.SafePart(s) == s)
}

// TenantScope returns the tenant scope and ok true when the provider's
// keys are per tenant (Keys is PerTenant): every limit has that scope, and
// a request with a value for it is tagged per tenant. Otherwise every
// request is tagged with the provider's name and ok is false.
func (p *Provider) TenantScope() (s Scope, ok bool) {
	return p.tenant, p.Keys == PerTenant
}

// Tag returns the tag of the requests whose tenant value has the key part
// part: the provider's name, or with keys per tenant and a part,
// name ":" part.
func (p *Provider) Tag(part string) string {
	if part == "" || p.Keys != PerTenant {
		return p.Name
	}
	return joinKey(p.Name, part)
}

// StateKey returns where a request keeps the state of lim, one of p's
// limits (its own or a route's), when the request's value for lim's scope
// is the key part part: the quota.Request tag and the quota.Item key that
// Resolve gives it. part is quota.SafePart of the scope value, as it
// appears in keys (a hashed value's "#…" part is passed as it is); ""
// means no value, the key of a provider-wide limit or of the shared state
// of requests without a value.
func (p *Provider) StateKey(lim *Limit, part string) (tag, key string) {
	if lim.Scope.Kind == ScopeProvider {
		part = ""
	}
	return p.Tag(part), joinKey(lim.Quota.Name, part)
}

// PauseKey returns the tag and key of the pause that holds back the
// requests whose tenant value has the key part part (see StateKey), as
// Resolve puts them in Resolution.Request.Tag and Resolution.Pause: the
// scope a vendor's throttle of such a request pauses. With part "" or
// keys per provider, it is the provider's pause, which holds back every
// request tagged with the provider's name — not those in a tenant's tag,
// whose quotas are their own (see AllPauseKey).
func (p *Provider) PauseKey(part string) (tag, key string) {
	if p.Keys != PerTenant {
		part = ""
	}
	return p.Tag(part), joinKey(pauseKey, part)
}

// ProviderWide reports whether key, an item key Resolve built, is a
// limit's one state for every request in its tag: that of a provider-wide
// limit, or the shared state of requests without a value for the limit's
// scope. A key with a part is one scope value's.
func ProviderWide(key string) bool {
	return strings.IndexByte(key, ':') < 0
}

// AllPauseKey returns the tag and key of the pause that holds back every
// request of the provider, of every tenant: what "throttle pause PROVIDER"
// sets. With keys per provider it is PauseKey(""). With keys per tenant it
// is "pause:all" in the provider's tag, apart from PauseKey(""), so that a
// vendor's throttle of a request without a tenant value does not hold the
// tenants: the requests without a value read both, and a tenant's request
// reads it as its Request.Over (OverPause), so a store must set it as an
// Over pause (the Redis store's PauseOver, which on a Redis Cluster copies
// it into the slot of every tenant, on a Ring onto every shard). No other
// pause key in the provider's tag has a part, so it is unambiguous;
// ParseKey does not return it.
func (p *Provider) AllPauseKey() (tag, key string) {
	if p.Keys != PerTenant {
		return p.PauseKey("")
	}
	return p.Name, allPauseKey
}

// allPauseKey is the key of a provider's pause of every tenant, with keys
// per tenant; see AllPauseKey.
const allPauseKey = pauseKey + ":all"

// OverPause returns the pause in another tag that holds back, besides its
// own, a request whose tenant value has the key part part: with keys per
// tenant and a part, AllPauseKey, which Resolve puts in the Request.Over
// of every request in a tenant's tag; otherwise none (the zero PauseKey).
func (p *Provider) OverPause(part string) quota.PauseKey {
	if part == "" || p.Keys != PerTenant {
		return quota.PauseKey{}
	}
	tag, key := p.AllPauseKey()
	return quota.PauseKey{Tag: tag, Key: key}
}

// A Key is what a tag and key of the provider hold, as ParseKey reads
// them back.
type Key struct {
	// Limit is the limit whose state the key holds (the provider's own or
	// a route's); nil for a pause.
	Limit *Limit
	// Part is the key part of the scope value: of the limit's scope for
	// an item key, of the tenant scope for a pause. "" means none: a
	// provider-wide limit, the shared state of requests without a value,
	// or the provider's pause.
	Part string
}

// ParseKey is the inverse of StateKey (pause false) and PauseKey (pause
// true): it returns the limit and part whose tag and key they are. ok is
// false for a tag and key they could not have returned for this provider
// under its configuration, e.g. another provider's, a limit it does not
// have, or a tenant tag of a provider whose keys are per provider.
func (p *Provider) ParseKey(tag, key string, pause bool) (k Key, ok bool) {
	head, part, ok := splitKey(key)
	if !ok {
		return Key{}, false
	}
	if pause {
		if head != pauseKey || part != "" && p.Keys != PerTenant {
			return Key{}, false
		}
	} else {
		if k.Limit = p.limits[head]; k.Limit == nil {
			return Key{}, false
		}
		if part != "" && k.Limit.Scope.Kind == ScopeProvider {
			return Key{}, false
		}
	}
	tagPart := part
	if p.Keys != PerTenant {
		tagPart = ""
	}
	if !isKey(tag, p.Name, tagPart) {
		return Key{}, false
	}
	k.Part = part
	return k, true
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
