// Command throttle is the operator's command line of
// github.com/fleetquota/throttle: it validates a providers configuration,
// shows the live quota state a fleet keeps in Redis, pulls the manual
// levers — pause, resume, reset — that an operator needs when a vendor
// writes "you are over quota", and runs the proxy through which processes
// in any language share the fleet's quota.
//
// Install it from a checkout of the repository with
//
//	go -C cmd/throttle install .
//
// (a module of its own, so "go run ./cmd/throttle" at the root does not
// find it), or, once a release is tagged, with
//
//	go install github.com/fleetquota/throttle/cmd/throttle@latest
//
// # Usage
//
//	throttle validate [FILE]
//	throttle validate --against OLD [FILE]
//	throttle status [PROVIDER[/SCOPE]] --redis URL [--all] [--json] [--watch] [--serve ADDR] [--interval 2s] [--top 10]
//	throttle status [PROVIDER] --tenant BUSINESS [--plan NAME] --redis URL
//	throttle pause PROVIDER[/SCOPE] [--tenant VALUE] --for DURATION [--reason TEXT] --redis URL
//	throttle resume PROVIDER[/SCOPE] [--tenant VALUE] --redis URL
//	throttle reset PROVIDER[/LIMIT[/SCOPE]] --redis URL
//	throttle proxy --redis URL [--config FILE] [--listen ADDR] [--route NAME=URL]...
//
// Every command takes --help. Messages go to stderr, results to stdout.
//
// validate loads FILE (with no FILE, the embedded catalog,
// config/providers.yaml) exactly as the library does. It prints every
// problem as "file:line:column: field.path: message" and exits 3, or prints
// the resolved table: per provider its hosts, behaviour and keys (its
// Redis hash tag), and per limit its route, the limit in the short form
// with headroom applied, its scope and what happens without a scope value;
// then its plans, each with its weight and figures, and how many
// businesses the tenants map puts on each plan, then its priority classes
// and each limit's class reserves and pacing. With --against OLD it
// instead lists, per provider, what switching the
// fleet from OLD to FILE would move or forget in Redis
// (providers.Changes), and exits 4 when anything would.
//
// status reads the state of every limit without changing it, with the
// formulas of package quota and Redis's TIME as the clock: per limit and
// scope value, the limit as the configuration publishes it next to the
// one the store enforces (headroom applied, or as learned), in the units
// vendors publish (100/s, 5,000/h, 250,000/day), what is left, when it is
// full again, and the pauses in force; for a concurrency limit the leases
// held and when the soonest expires, for a window the counts charged
// ahead, the debt that settled costs left beyond a limit, what each
// priority class has left of a limit with class reserves, and who shares
// a fair limit. The table
// lists only the limits with state in Redis (--all: every limit) and fits
// the terminal's width ($COLUMNS or --width, else 100 columns).
// Per-tenant state is found with SCAN, a bounded number of calls per
// refresh on every master of a cluster, and the values found are read in
// one pipelined round per refresh; the busiest tenants (lowest share
// remaining) come first. --watch redraws in place until interrupted;
// --json writes a document whose schema is in "throttle status --help"
// (one document per line with --watch); --serve ADDR serves a read-only
// page of the same state, bars of what is left that refresh themselves,
// with the pauses in force and why they were set and the fleet's recent
// refusals, on loopback when ADDR is a bare port (":8080"). A tenant's
// rows are read at its plan's figures (the tenants map, else the
// provider's default_plan); --tenant BUSINESS shows one business on every
// provider with a limit per business, with its plan on each, and --plan
// NAME reads it at another plan's figures (a program's WithPlans lookup is
// not visible to status).
//
// pause holds back fleet-wide, as a vendor's 429 does, every request of a
// provider (PROVIDER: of every tenant; on a Redis Cluster, where a
// tenant's decision reads only its own slot, through a copy of the pause
// in every slot, and on a Ring through a copy on every shard,
// Store.PauseOver) or one tenant's (--tenant VALUE or PROVIDER/VALUE, for
// a provider with keys: per_tenant), and records beside it who paused and
// --reason, which status shows; resume lifts it; reset deletes limit
// state so a limit is back to full capacity. They write exactly the keys the
// transport reads: the tags and keys come from package providers
// (Provider.StateKey, Provider.PauseKey; Provider.ParseKey reads back the
// keys status finds) and the Redis keys from package redisstore (Store.Key,
// Store.PauseKey, Store.ParseKey), which own the layout.
//
// proxy is a sidecar for programs in other languages: a reverse proxy that
// throttles every request it forwards exactly as the Go transport does,
// through the same Redis and configuration. A client sends
// http://ADDR/<host>/<path> for https://<host>/<path>, or
// http://ADDR/<name>/<path> for a --route name=URL; only hosts a provider
// claims are forwarded (403 otherwise). Per-request values come from the
// headers Throttle-Business, Throttle-Label, Throttle-Cost,
// Throttle-Limit-Cost, Throttle-Max-Wait (which may only shorten the
// provider's max_wait) and Throttle-Priority (a priority class of the
// provider), stripped before forwarding. They are the client's
// assertions: a cost header may raise a configured cost, not lower it
// (--allow-lower-costs), and --business binds every request to one
// business. Retries wait within the request's max wait, and
// --max-held-bodies bounds the request bodies held in memory. A refusal is a 429
// with Retry-After, Throttle-Error: limited and a JSON body naming the
// provider, limit and scope; every answer the proxy makes itself carries
// Throttle-Error, a vendor's own never does. /healthz and /metrics
// (Prometheus) are served on the main listener. On SIGTERM or SIGINT the
// listeners close and requests in flight, waits included, have
// --drain-timeout to finish. docs/proxy.md is the reference.
//
// # Connecting
//
// --redis takes a redis:// or rediss:// URL (see redis.ParseURL), or for a
// Redis Cluster comma-separated URLs or host:port addresses of its nodes
// (or one URL with --cluster; see redis.ParseClusterURL), or with --ring
// the shards of a go-redis Ring as NAME=ADDR,... with the names the fleet's
// redis.RingOptions.Addrs gives them (the Ring places keys by hashing the
// names, so status finds a tenant's keys only under the fleet's names; a
// Ring with its own NewConsistentHash is not supported). It defaults to
// $THROTTLE_REDIS. --config names the providers file (default: the
// embedded catalog) and --prefix the key prefix (default "throttle:"):
// both must be the fleet's. --timeout bounds each call to Redis (default
// 2s).
//
// # Exit codes
//
//	0  success
//	1  runtime failure: Redis unreachable or failing, a file that cannot be read
//	2  usage error: unknown command or flag, bad argument, unknown provider or limit
//	3  invalid configuration: every problem is printed as file:line:column
//	4  validate --against: the change would move or forget state in Redis
package main
