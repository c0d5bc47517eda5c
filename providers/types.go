package providers

import (
	"fmt"
	"time"

	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/quota"
)

// OnLimit says what the transport does with a request the stack cannot
// admit at once.
type OnLimit uint8

const (
	// Wait holds the request until its reserved slot, up to MaxWait (and
	// the request context's deadline). It is the zero value.
	Wait OnLimit = iota
	// Fail refuses a request that cannot go at once.
	Fail
)

// String returns "wait" or "fail".
func (o OnLimit) String() string {
	switch o {
	case Wait:
		return "wait"
	case Fail:
		return "fail"
	}
	return fmt.Sprintf("OnLimit(%d)", uint8(o))
}

// Mode says whether a provider's limits are applied or only observed.
type Mode uint8

const (
	// Enforce applies the limits. It is the zero value.
	Enforce Mode = iota
	// Shadow decides and records as Enforce would, but sends every
	// request at once: for trying a new configuration on live traffic.
	Shadow
)

// String returns "enforce" or "shadow".
func (m Mode) String() string {
	switch m {
	case Enforce:
		return "enforce"
	case Shadow:
		return "shadow"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// StoreErrorPolicy says what the transport does when the store fails.
type StoreErrorPolicy uint8

const (
	// FailClosed refuses the request with a typed error. It is the zero
	// value: never send a request that might break a quota.
	FailClosed StoreErrorPolicy = iota
	// FailOpen sends the request unthrottled (and says so in logs and
	// metrics).
	FailOpen
	// Local decides against an in-process limiter at Provider.LocalShare
	// of each limit's rate.
	Local
)

// String returns "fail_closed", "fail_open" or "local".
func (s StoreErrorPolicy) String() string {
	switch s {
	case FailClosed:
		return "fail_closed"
	case FailOpen:
		return "fail_open"
	case Local:
		return "local"
	}
	return fmt.Sprintf("StoreErrorPolicy(%d)", uint8(s))
}

// ScopeKind says where a limit's scope value comes from.
type ScopeKind uint8

const (
	// ScopeProvider: one state for the whole provider. The zero value.
	ScopeProvider ScopeKind = iota
	// ScopeBusiness: one state per business (tenant), from Input.Business.
	ScopeBusiness
	// ScopeHeader: one state per value of the request header Scope.Name,
	// e.g. Stripe Connect's Stripe-Account.
	ScopeHeader
	// ScopeLabel: one state per value of the label Scope.Name in
	// Input.Labels, e.g. a traffic class.
	ScopeLabel
	// ScopeHost: one state per request host name (lower case, without the
	// port), for vendors whose tenants have their own host, e.g. a
	// Shopify store's "shop.myshopify.com".
	ScopeHost
)

// String returns the kind as it is written in YAML: "provider",
// "business", "header", "label" or "host".
func (k ScopeKind) String() string {
	switch k {
	case ScopeProvider:
		return "provider"
	case ScopeBusiness:
		return "business"
	case ScopeHeader:
		return "header"
	case ScopeLabel:
		return "label"
	case ScopeHost:
		return "host"
	}
	return fmt.Sprintf("ScopeKind(%d)", uint8(k))
}

// A Scope says which requests share a limit's state.
type Scope struct {
	// Kind says where the scope value comes from.
	Kind ScopeKind
	// Name is the canonical header name (ScopeHeader) or the label name
	// (ScopeLabel); empty otherwise.
	Name string
}

// String returns the scope as it is written in YAML: "provider",
// "business", "header:Stripe-Account", "label:class" or "host".
func (s Scope) String() string {
	if s.Kind == ScopeHeader || s.Kind == ScopeLabel {
		return s.Kind.String() + ":" + s.Name
	}
	return s.Kind.String()
}

// Missing says what happens when a request has no value for a limit's
// scope.
type Missing uint8

const (
	// Shared counts every such request in one shared state (the key is
	// the limit's name alone). The zero value: never exceeds the limit.
	Shared Missing = iota
	// Skip leaves the limit out of the request's stack.
	Skip
	// Refuse makes Resolve return an error wrapping ErrMissingScope.
	Refuse
)

// String returns "shared", "skip" or "refuse".
func (m Missing) String() string {
	switch m {
	case Shared:
		return "shared"
	case Skip:
		return "skip"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Missing(%d)", uint8(m))
}

// KeyMode says which Redis Cluster hash tag a provider's keys live under.
// It is a stable property of the provider, set in its configuration: the
// tag is part of every key, so changing it moves the provider's state.
type KeyMode uint8

const (
	// PerProvider keeps every key of the provider in one tag, its name.
	// It is the zero value and the default, whatever the limits are.
	PerProvider KeyMode = iota
	// PerTenant ("keys: per_tenant") gives each tenant a tag of its own,
	// provider ":" the tenant's key part, so tenants spread over a
	// cluster. Every limit of the provider, routes included, then has the
	// same scope, the tenant scope; Load refuses any other limit, whose
	// state would be split across the tenants' tags.
	PerTenant
)

// String returns "per_provider" or "per_tenant", as written in YAML.
func (m KeyMode) String() string {
	switch m {
	case PerProvider:
		return "per_provider"
	case PerTenant:
		return "per_tenant"
	}
	return fmt.Sprintf("KeyMode(%d)", uint8(m))
}

// A Limit is one limit of a provider or route, as loaded.
type Limit struct {
	// Quota is the limit the store applies, headroom already applied.
	// It passes Validate. Do not modify it.
	Quota *quota.Limit
	// Published is the limit as the configuration states it, the
	// vendor's figure before headroom, for operators to check against
	// the vendor's page next to Quota. Only Quota is enforced. Do not
	// modify it.
	Published *quota.Limit
	// Scope says which requests share its state.
	Scope Scope
	// Missing says what happens when a request has no scope value (a host
	// scope always has one).
	Missing Missing
	// Only, when not empty, restricts the limit to requests whose scope
	// value is one of these; it is left out of every other request's stack.
	Only []string
	// Ahead is the period of quota taken ahead (the "ahead" field, the
	// limit's own or its provider's): a process reserves the slots it
	// expects to use in that period in one store call and spends them
	// locally (Resolution.Ahead). Zero: off.
	Ahead time.Duration
	// Fair, when not nil, shares the limit among the tenants of its
	// requests (the "fair" field; Quota.Fair is set): Resolve names each
	// request's tenant and weight in quota.Request.Share.
	Fair *Fair
}

// A Route is a method and path pattern of a provider that adds limits and
// sets the cost of its requests. The first route of a provider that
// matches a request applies.
type Route struct {
	// Name names the route in errors; it defaults to "routes[i]".
	Name string
	// Methods lists the methods the route matches; empty means any.
	Methods []string
	// Path is the pattern: segments separated by "/", where "*" (or
	// "{name}") matches one segment and a final "**" matches the rest
	// of the path, including nothing.
	Path string
	// Cost is what one request counts for, in every limit of its stack
	// that Costs does not name.
	Cost int64
	// Costs gives some limits of the stack (by name) a cost of their own,
	// e.g. GitHub's secondary "points" 5 for a write while its hourly
	// quota counts 1.
	Costs map[string]int64
	// Limits are applied on top of the provider's limits.
	Limits []Limit
	// Sync, when set, replaces the provider's Sync for the route's
	// requests (Shopify's GraphQL reports its counters otherwise than
	// its REST API).
	Sync *Sync
	// Settle, when set, replaces the provider's Settle for the route's
	// requests (Shopify's GraphQL settles its actual query cost).
	Settle *Settle
	// Priority is the class of the route's requests that name none
	// (the "priority" field), instead of the provider's default; ""
	// when not set.
	Priority string

	segs []segment
	plan plan
	// class is the index of Priority among the provider's classes,
	// plus one: 0 when the route sets none.
	class int
}

// A Provider is one vendor API: its hosts, limits, routes and behaviour.
// Providers are built by Load and read-only afterwards.
type Provider struct {
	// Name is the provider's key in the configuration; it starts the
	// Redis hash tag of its keys (see Keys).
	Name string
	// Hosts lists the host patterns the provider claims, as written
	// (after ${VAR} expansion); matching ignores case and a trailing dot.
	Hosts []string
	// Source and Read document where the limits were published and when
	// they were read; they have no effect.
	Source, Read string
	// OnLimit is what to do with a request that cannot go at once.
	OnLimit OnLimit
	// MaxWait is the longest wait for a slot when OnLimit is Wait (zero
	// when it is Fail), at most quota.LongestWait.
	MaxWait time.Duration
	// Headroom is the share of each published limit that is used, in
	// (0, 1]; it is already applied to every Limit.Quota.
	Headroom float64
	// Mode says whether the limits are enforced or only observed.
	Mode Mode
	// OnStoreError is what to do when the store fails.
	OnStoreError StoreErrorPolicy
	// LocalShare is, for OnStoreError Local, the share of each limit's
	// rate that one process may use on its own; zero otherwise.
	LocalShare float64
	// Signals says how the vendor signals throttling.
	Signals backoff.Signals
	// Limits apply to every request of the provider.
	Limits []Limit
	// Routes add limits and costs to some requests; the first match
	// applies.
	Routes []Route
	// Keys says whether the provider's keys live in one hash tag or in a
	// tag per tenant (the "keys" field).
	Keys KeyMode
	// Sync, when set, says how the vendor reports its own counters on
	// every response, and which limit each one is: the transport drains
	// the store to them (the "sync" field).
	Sync *Sync
	// Settle, when set, says how the vendor's responses report what each
	// request actually cost, and which limit each figure settles (the
	// "settle" field).
	Settle *Settle
	// Priority, when set, declares the provider's priority classes (the
	// "priority" field): who slows first when its limits are short.
	Priority *Priority
	// Ahead is the provider's "ahead" period, which its GCRA limits take
	// unless they say otherwise (Limit.Ahead); zero when not given.
	Ahead time.Duration

	// tenant is, with Keys PerTenant, the scope every limit has.
	tenant Scope
	// priorityBad is set while loading when the priority field's
	// classes have a problem: what names a class is then not checked.
	// reservesBad is set after any problem with the priority field: the
	// limits' reserves are then not checked against the engine's rules.
	priorityBad, reservesBad bool
	// limits finds a limit (its own or a route's) by name, for ParseKey.
	limits map[string]*Limit
	plan   plan
	pauses []string
	// plans are the provider's plans (plans.go); nil when it has none.
	plans *planSet
}

// Sync says how a vendor reports its counters on every response and which
// configured limit each counter is, so that the store can be reconciled
// with the vendor's own count.
type Sync struct {
	// Format is how the vendor writes its counters (backoff.ReadCounters).
	Format backoff.Format
	// Counters maps a vendor counter's name (backoff.Reading.Counter,
	// e.g. GitHub's "core", or "default" for a format's single counter)
	// to the name of a limit of the provider, its own or a route's.
	// Counters not named here are ignored.
	Counters map[string]string
}

// DefaultMaxWait is Provider.MaxWait when on_limit is wait and max_wait is
// not set.
const DefaultMaxWait = 10 * time.Second

// pauseKey is the name of a provider's pause key; see keys.go.
const pauseKey = "pause"
