// Package providers loads the YAML configuration that describes the
// third-party APIs a fleet calls — their hosts, published limits, routes
// and throttling signals — and resolves each outbound request to its
// provider and a ready quota.Request.
//
// Most callers load a file once, build a Registry and call Resolve for
// every request:
//
//	cfg, err := providers.LoadFile("providers.yaml")
//	if err != nil {
//		log.Fatal(err) // every problem, with file:line:column
//	}
//	reg := providers.NewRegistry(cfg)
//	res, ok, err := reg.Resolve(req, providers.Input{Business: "acme"})
//	// !ok: no provider claims the host; send the request as it is.
//	// res.Request goes to quota.Store.Reserve; res.Pause is the key to
//	// pause (in res.Request.Tag) when the vendor throttles the request.
//
// The module ships a catalog of real vendors' limits, config/providers.yaml
// (LoadCatalog).
//
// # Schema
//
//	version: 1                      # optional; the only version is 1
//	tenants: {acme: enterprise}     # business -> plan; see Plans
//	providers:
//	  github:                       # the name: lower case, digits, "-", "_"
//	    hosts: [api.github.com]     # see Hosts
//	    source: https://...         # documentation only
//	    read: "2026"                # documentation only
//	    on_limit: wait              # wait (default) | fail
//	    max_wait: 10s               # with wait; default 10s
//	    headroom: 95%               # or 0.95; default 100%
//	    mode: enforce               # enforce (default) | shadow
//	    on_store_error: local       # fail_closed (default) | fail_open | local
//	    local_share: 10%            # required with local, refused otherwise
//	    keys: per_tenant            # per_provider (default) | per_tenant; see Keys and tags
//	    signals: {...}              # see Signals
//	    sync: {...}                 # see Sync
//	    priority: {...}             # see Priority classes
//	    ahead: {period: 200ms}      # see Ahead
//	    limits: [...]               # see Limits; apply to every request
//	    routes: [...]               # see Routes
//	    plans: {...}                # see Plans
//	    default_plan: standard      # see Plans
//
// Unknown fields, wrong types, duplicated keys, YAML aliases and merge keys
// are errors. Load reports every problem at once in a *ConfigError (which
// wraps ErrConfig), each with file:line:column, the field path (e.g.
// providers.github.limits[1].burst) and what would be valid: the first
// MaxProblems of them and a count of the rest, each repeating at most 80
// bytes of any value from the file, escaped, so that a hostile or broken
// file cannot make a huge error. A YAML syntax error is the one problem
// reported, at the line and column of what is wrong, naming a tab
// character when one is the cause.
//
// # Hosts
//
// A host is an exact name ("api.github.com"), a wildcard ("*.zendesk.com",
// which matches any name below zendesk.com but not zendesk.com itself) or
// either with a port ("api.example.com:8443"). A pattern without a port
// matches every port. When several match, the most specific wins: the
// exact name with the port, the exact name, then the wildcard with the
// longest suffix (with the port first). Names are compared in lower case,
// without a trailing dot. Two providers cannot claim the same pattern.
// Lookup costs one map probe per label of the request's host, whatever the
// number of providers.
//
// # Limits
//
// Each limit has a name, unique within its provider (routes included), and
// is a GCRA limit, a calendar window or a rolling window, written in a
// short form or with explicit fields:
//
//	limits:
//	- {name: peak, limit: 100/s}                    # GCRA: 100 per second, burst 100
//	- {name: peak, limit: 2/s burst 40}             # a leaky bucket of 40 leaking 2/s
//	- {name: hourly, limit: 5000/h}                 # also ms, s, min, h, 10s, 1m30s
//	- {name: peak, rate: 100, period: 1s, burst: 100}
//	- {name: daily, limit: 250000/day resets 00:00 America/Los_Angeles}
//	- {name: daily, quota: 250000, per: day, resets: "00:00", timezone: America/Los_Angeles}
//	- {name: monthly, limit: 1000000/month}         # windows: hour, day, month
//	- {name: hourly, limit: 1000/hour resets 00:30} # "resets" makes /hour a window
//	- {name: api, limit: 15000/24h rolling}         # at most 15000 in any trailing 24h
//	- {name: api, quota: 15000, per: 24h, rolling: true}
//
// N/ms, /s, /min, /h and /<duration> are GCRA limits; N/day and N/month are
// calendar windows (a GCRA over a day would admit twice the quota in one
// calendar day); N/hour is a window only with "resets". A window resets at
// 00:00 UTC unless told otherwise; an hourly window resets at 00:MM past
// each hour. The time zone is an IANA name; programs in minimal container
// images should import time/tzdata. "rolling" after any period (a
// duration, h, or day for 24h; not month) makes a rolling window: at most
// N in any trailing period, never more (quota's doc, "The decision"). It
// has no burst and no reset; its period is 1ms to 71 years.
//
// "N concurrent" (optionally "lease D", from 1s to 24h, default
// DefaultLease) is a concurrency limit: at most N requests in flight, each
// holding a lease from its admission until its response is done; the
// leases of a process that died expire D after their last renewal. It has
// no burst nor reset, and a route's cost does not count against it.
//
// headroom scales every rate, burst and quota at load time:
// floor(n*headroom), never below 1, except a rate whose scaled count is
// not whole: it keeps its count and stretches its period (rounded up to
// the microsecond), so 2/s at 95% is 2 per 1.052632s, not 1/s. Load then checks each limit with
// quota.Limit.Validate and that every route's cost fits in every limit of
// its stack (a cost above a burst or a window's quota could never be
// admitted); headroom that makes a route impossible is an error.
//
// # Scopes
//
// A limit's scope says which requests share its state:
//
//	scope: provider               # default: one state for the provider
//	scope: business               # per Input.Business (tenant)
//	scope: host                   # per request host (a Shopify store, a Zendesk account)
//	scope: header:Stripe-Account  # per value of a request header
//	scope: label:class            # per value of Input.Labels["class"]
//	missing: shared               # no value: one shared state (default)
//	missing: skip                 # no value: leave the limit out
//	missing: refuse               # no value: Resolve fails with ErrMissingScope
//	only: [batch]                 # apply only to these values; skip the others
//
// For example, to let batch traffic use at most 60% of a 1,000/min quota,
// leaving the rest to interactive traffic:
//
//	limits:
//	  - {name: quota, limit: 1000/min}
//	  - {name: batch, limit: 600/min, scope: "label:class", only: [batch], missing: skip}
//
// Scope values are untrusted: each becomes its key part through
// quota.SafePart, so a value that is long or holds unsafe characters is
// replaced by its hash.
//
// # Keys and tags
//
// An item's key is its limit's name for a provider-wide limit or a
// missing value's shared state, and name + ":" + quota.SafePart(value)
// otherwise (what quota.KeyOf makes). The request's Tag (the Redis Cluster
// hash tag) is set by the provider's keys field:
//
//	keys: per_provider   # the default: every key in the tag <provider>
//	keys: per_tenant     # a request with a tenant value: tag <provider>:<value>
//
// per_tenant spreads tenants over a cluster instead of heating one shard.
// It requires every limit of the provider — its own and every route's —
// to have the same scope other than provider (the tenant scope; business,
// host, a header, a label): a provider-wide limit, or one scoped
// otherwise, would have its state split across the tenants' tags, so Load
// reports it at its file:line:column. Requests without a tenant value are
// tagged with the provider's name. The pause key is "pause" in the
// provider's tag, or "pause:" + quota.SafePart(value) in a tenant's tag.
//
// The tag is part of every key, so it is a stable property of the
// provider, never inferred from its limits: adding or removing a limit
// moves no other limit's state. Changing keys (or the tenant scope) does
// move every tenant's state to other tags: Registry.Reload refuses it
// (ErrKeysMoved) unless given AllowMovedKeys, and Changes lists what a new
// configuration moves or forgets (throttle validate --against prints it).
//
// keys.go owns this layout: Resolve, Provider.StateKey, Provider.PauseKey
// and Provider.Tag build it, Provider.ParseKey reads a tag and key back to
// their limit and scope value's key part; tools use those rather than
// assembling keys.
//
// # Routes
//
// Routes add limits and a cost to some of a provider's requests. The first
// route whose method and path pattern match applies; a route that an
// earlier one always matches first is an error, as is an unknown method.
//
//	routes:
//	  - name: search
//	    method: GET              # or [POST, PATCH]; omitted or "*" = any
//	    path: /search/*          # "*" or "{name}" = one segment; a final "**" = the rest
//	    cost: 1                  # default 1
//	    costs: {points: 5}       # these limits of the stack (by name) count this much instead
//	    limits: [{name: search, limit: 30/min, scope: business}]
//
// The query string is ignored and so is one trailing slash. The path is
// matched clean (path.Clean: "//" collapsed, "." and ".." resolved) and
// case-sensitively. The cost is
// charged to every limit of the stack but those that costs names, all in
// one decision (quota.Item.Cost). Input.Cost replaces the cost per
// request, and Input.Costs the cost of named limits (e.g. the tokens of a
// model API call, while its requests limit counts 1).
//
// # Plans
//
// A plan gives the businesses on it other figures for some of a
// provider's limits scoped per business: acme on 15,000/h, the others on
// 5,000/h.
//
//	tenants:                        # top level: business -> plan name
//	  acme: enterprise
//	providers:
//	  github:
//	    limits: [{name: core, limit: 5000/h, scope: business}]
//	    plans:
//	      enterprise:
//	        weight: 3               # its share of a fair-shared limit; 1 to 1000, default 1
//	        limits: {core: 15000/h} # or {core: {rate: 15000, period: 1h}}
//	      standard: {}              # the limits as written
//	    default_plan: standard      # optional
//
// A plan's limits name limits of the provider (its own or its routes')
// scoped by business, and give their figures in the short form or the
// figure fields (limit, rate, period, burst, quota, per, resets,
// timezone, rolling); headroom applies to them as to the limit. A plan
// changes how much a limit admits, never how its state is kept: the
// kind, a window's unit, reset and zone (kept when not restated), a
// rolling period and a lease are the limit's, and a learning limit
// learns from the plan's figure. So the keys are the same on every plan:
// moving a business to another plan moves nothing, and its next request
// is decided against the same state at the new figures. Load reports a
// plan that names an unknown or provider-wide limit or one scoped
// otherwise, changes a kind, window, rolling period or lease, or gives a
// figure a route's cost cannot fit, and a default_plan or a tenants
// entry naming a plan no provider defines.
//
// Plan names are the caller's tiers, shared by every provider: Resolve
// takes the business's plan from Input.PlanOf (a lookup in the caller's
// database, e.g. throttle.WithPlans) when it names one, else from the
// tenants map; a provider that does not define that plan, and a request
// without a business, get the provider's default_plan, or without one
// its limits as written (Config.PlanFor). A name Input.PlanOf returns
// that no provider defines refuses the request with ErrUnknownPlan.
// Resolution.Plan is the plan applied; a provider without plans costs
// nothing more to resolve.
//
// # Signals
//
// signals maps to backoff.Signals:
//
//	signals:
//	  throttled:                 # Rules; empty = any 429
//	    - {status: 403, header: X-RateLimit-Remaining, header_value: "0"}
//	    - {status: 403, body_contains: REQUEST_LIMIT_EXCEEDED}
//	  ignore:                    # throttled-looking but not retryable
//	    - {status: 429, body_contains: insufficient_quota}
//	  delay_headers: [Retry-After-Ms]
//	  default_delay: 1m          # delay of a throttled response that names none
//	  max_delay: 10m             # cap on any vendor-supplied delay
//	  body: discord              # or openai: read the vendor's 429 body (Signals.Body)
//
// body: discord reads Discord's 429 body: its decimal retry_after is the
// delay, before any header, and global: true says the bot's global limit
// was hit, which pauses the provider's own pause as well as the request's
// (see the transport). body: openai tells OpenAI's 429
// "insufficient_quota", a billing stop, from a rate limit: it is neither
// paused on nor retried, and throttle.NewClient returns it as an error
// matching throttle.ErrQuotaExhausted.
//
// # Sync
//
// sync says how the vendor reports its own counters on every response
// (a backoff.Format) and which limit each counter is (Sync):
//
//	sync:
//	  format: x-ratelimit                     # backoff.ParseFormat names
//	  counters: {core: core, search: search}  # backoff.Reading.Counter -> limit name
//
// A provider's counters may name any of its limits, routes' included; a
// route's sync replaces the provider's for its requests and names limits
// of its stack. Resolve puts the one that applies in Resolution.Sync; the
// transport reads the counters and drains the store to them
// (quota.Reservation.Sync). An unknown format, a counter mapped to an
// unknown limit or to a rolling window (whose trailing count cannot be
// placed in its buckets) and a missing or empty counters map are errors.
//
// A GCRA limit a counter is mapped to may learn the limit the vendor
// states (quota.Limit.Learn, package quota's doc "Learning"):
//
//	limits:
//	  - {name: core, limit: 4500/h burst 500, learn: true}
//	  - {name: search, limit: 27/min burst 3, learn: {ceiling: 60}}
//
// The configured rate and burst are the floor; the learned rate is the
// vendor's figure with the headroom applied (as Load applies it), the
// burst scaled by the same factor, never above ceiling (headroom applied
// too). learn on any other kind of limit, on a limit no sync maps, with a
// ceiling below the rate, or with a headroom that stretches the limit's
// period (2/s at 95% is 2 per 1.05s, which a stated limit per second
// cannot scale) is an error.
//
// # Priority classes
//
// priority declares who slows first when a limit is short: ordered
// classes (Priority), each keeping a share of every limit from the
// classes below it.
//
//	priority:
//	  classes: [interactive, default, batch]     # the top first
//	  default: batch                             # default: the last class
//	  reserve: {interactive: 20%, default: 10%}  # of each limit, kept from the classes below
//	  active_for: 1m                             # default 1m (quota.DefaultActiveFor)
//	limits:
//	  - {name: core, limit: 15000/h}                          # the provider's reserves
//	  - {name: search, limit: 30/min, reserve: {interactive: 50%}}  # its own, over the provider's
//	  - {name: conc, limit: 100 concurrent, reserve: 0%}      # none in this limit
//	  - {name: daily, limit: 100000/day, pace: {reserve: 10%}}  # or pace: true
//	routes:
//	  - {path: /graphql, priority: interactive}  # the class of its requests that name none
//
// They become quota.Limit.Reserve (in basis points, in class order),
// ActiveFor, Pace and PaceReserve; a limit whose reserves are all zero has
// none (nil). Resolve sets quota.Request.Class from Input.Priority, else
// the route's priority, else the provider's default: the last class, so
// that a request nobody classified never takes headroom kept for a class
// above it. A class the provider does not declare is an error wrapping
// ErrUnknownClass; a provider without classes ignores Input.Priority.
// Load refuses, each at its field: an unknown class (in default, a
// reserve, a route), reserves that sum to 100% or more or that name the
// bottom class, pace on anything but a calendar window, a pace reserve
// without classes, reserves on a learning limit, and a GCRA limit too
// small to split into its lanes (quota.Limit.Lanes: each class above the
// bottom needs at least one event per period and a burst of one, and the
// bottom lane every route's cost).
//
// # Ahead
//
// ahead (on a provider, for each of its GCRA limits, or on one GCRA limit,
// whose own replaces it; false leaves a limit out) is the period of quota
// taken ahead: a process reserves the slots it expects to use in that
// period in one store call and decides its requests against them
// locally (Limit.Ahead, Resolution.Ahead; docs/decisions.md, "Quota
// taken ahead"):
//
//	ahead: {period: 200ms}
//
// ahead on a calendar or rolling window, a concurrency limit, a learning
// limit, a limit with priority classes (a reserve, its own or the
// provider's) or pacing, or a limit a sync counter or a settled figure is
// mapped to, a period below MinAheadPeriod or above half the limit's
// burst span (burst × interval), are errors. A provider-wide ahead on a
// provider with reserves therefore needs ahead: false (or reserve: 0%) on
// each of its GCRA limits that keeps a reserve.
//
// # Fair share
//
// fair shares a provider-wide GCRA limit among the tenants of its
// requests (quota.Limit.Fair, package quota's doc "Fair share"): while it
// is contended, each active tenant is guaranteed its weighted share of
// it, and a tenant alone may use all of it.
//
//	limits:
//	  - {name: tpm, limit: 90000/min, fair: tenant}     # each business a tenant
//	  - {name: account, limit: 700/min, fair: label:team}  # each value of the label team
//
// Resolve names the request's tenant in quota.Request.Share: the
// SafePart of its business (fair: tenant) or of the label's value, ""
// for a request without one (they all share as one tenant, ""), and its
// weight: the business's plan's weight (Plan.Weight, 1 without plans);
// a label's value is no business, so it has weight 1. Load refuses, at
// the fair field: a value other than tenant or label:<name>, a limit
// that is not GCRA, scoped, or learning, a class reserve on it (set
// reserve: 0% on it in a provider with reserves), keys: per_tenant (the
// fair state lives in the provider's tag), and two fair limits of one
// provider shared by different things (a request has one tenant).
//
// # Variables
//
// Every scalar value (not keys) may hold ${VAR} or ${VAR:-default}; "$$" is
// a literal "$". An unset ${VAR} without a default is an error. Variables
// are read with os.LookupEnv unless WithLookupEnv says otherwise.
//
// # Concurrency
//
// A Config is immutable. A Registry is safe for concurrent use; Reload
// swaps the configuration atomically, a resolution in progress finishes
// under the one it started with, and ReloadFile keeps the old
// configuration when the new file has errors or moves keys.
package providers
