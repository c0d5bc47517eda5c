// Package redisstore is the Redis quota.Store: the state of every limit
// lives in Redis, shared by every process of a fleet, and each decision is
// one atomic Lua script run in one round trip (EVALSHA, falling back to EVAL
// when the server has not cached the script, e.g. after a failover or a
// SCRIPT FLUSH).
//
// The script (reserve.lua, embedded) is package quota's decision algorithm
// step for step; its header explains the numbers. A decision that goes
// alone (no call of its tag in flight, see "Coalescing") on a stack of
// GCRA limits that do not learn and calendar windows (neither with
// classes, pace or a fair share) runs lone.lua instead, and so does a
// coalesced call whose decisions all repeat one such stack (a run): the
// same arguments, decisions and writes, with each key read and written
// once per call, each further decision of a run made with arithmetic
// alone, and the replies' numbers packed in one string (the lean path of
// issue 22; TestLoneAgreesWithReserve holds the two scripts to each
// other). The store's clock is the
// Redis server's TIME, never the caller's, so machines that disagree on the
// time still agree on the quota. Calendar windows are placed by Go (Lua has
// no time zones), which hands the script the window boundaries around its
// own clock; the script picks the window that holds the server's time, so a
// client clock off by less than a window does no harm.
//
// Store.Inspect, the operators' read (throttle status), runs the same
// script read-only (EVALSHA_RO, "Peeking" in its header), so a status is
// what a decision sees, and works on a replica or for a user that may not
// write.
//
// # Keys
//
// Every key is
//
//	<prefix>{<tag>}:<item key>
//	<prefix>{<tag>}:!pause:<pause key>
//	<prefix>{<tag>}:!cancelled:<item key>   (reserved: a GCRA item's cancelled slots)
//	<prefix>{<tag>}:!learned:<item key>     (a learning GCRA item's stated limit)
//	<prefix>{<tag>}:!reason:<pause key>     (why the pause was set; reason.go)
//	<prefix>{!refusals}:<provider>:<limit>  (the fleet's recent refusals; refusals.go)
//	<prefix>{<tag>}:!lane<k>:<item key>     (lane k of a GCRA item with classes)
//	<prefix>{<tag>}:!seen:<item key>        (a held item's record of active classes)
//	<prefix>{<tag>}:!fair:<item key>:<part> (a tenant's lane of a Fair item)
//	<prefix>{<tag>}:!fairz:<item key>       (a Fair item's active tenants)
//	<prefix>{<tag>}:!fairw:<item key>       (a Fair item's active tenants' weights)
//
// where tag and keys pass through quota.SafeKey. One function writes this
// layout (keys.go) and Store.ParseKey reads it back, with the KeyKind of
// the key; Store.Key, Store.PauseKey and TagMatch give tools the keys and
// SCAN patterns the store uses, so no caller rebuilds the layout. The braces are a Redis
// Cluster hash tag, so every key of one decision lives in one slot and the
// script runs on one shard; with a Redis Cluster, many tags spread over its
// nodes. Tags and item keys are expected as quota.KeyOf and the providers
// package build them ("github:acme", "core:acme"); anything else is
// replaced by quota.SafePart of itself, so no part breaks out of its place
// or grows without bound. Pause keys live in their own "!pause:" namespace, which no
// item key can enter (SafeKey never starts a key with "!"). A GCRA key holds the limit's stored theoretical
// arrival time (µs), a window key is a hash from window start (µs) to count,
// a rolling window's key a hash from bucket start (µs) to count with its
// sum, oldest and newest bucket and bucket width (see reserve.lua), a
// concurrency key is a sorted set of leases (lease id, scored by its
// expiry in µs; see reserve.lua, "Leases"), and a pause key holds
// paused-until (µs). A request's Over pause (quota.Request.Over: a
// provider's pause over its tenants' tags) is in another tag. With a
// *redis.Client one server holds every key and the script reads it. A
// Redis Cluster runs a script on the one slot of its keys, so there the
// script reads the pause's copy in the request's slot,
// <prefix>{<filler>}:!copy:{<tag>}:!pause:<key>, whose hash tag is a short
// string of that slot (slots.go): Store.PauseOver writes the pause and its
// copies in all 16,384 slots, Store.ResumeOver deletes them. A Ring runs a
// script on the shard its first key's tag hashes to, so there the script
// reads the copy <prefix>{<tag>}:!copy:{<tag>}:!pause:<key>, which
// Store.PauseOver writes on every shard through the shard's own client
// (ring.go). Syncs, settles, and releases and renewals of leases
// run after.lua, one round trip each; a release of a lease still held is
// announced on the channel <prefix>!released, which the Store listens to
// while this process has requests waiting for a lease (notify.go,
// quota.LeaseNotifier). A "!cancelled:" key is written
// only by Cancel: a sorted set of the GCRA item's reservations cancelled
// while a later one still held it, one member per run of them in a row,
// which come back once that one is cancelled too (see cancel.lua). Reservation.Sync runs after.lua (op
// "sync" per item, one call for every limit a response drains), which
// writes only the item keys, and rebuilds a key Redis lost from the
// vendor's figure; its op "learn" writes a learning limit's "!learned:"
// key, a hash (limit, at) that reserve.lua reads for that item alone
// (package quota's doc, "Learning"), expiring quota.LearnTTL after, and,
// when the figure falls, the item key it restates. A GCRA limit with
// priority classes (quota.Limit.Reserve) keeps each class's lane but the
// bottom one under a "!lane<k>:" key (k the class, 0 the top), a GCRA tat
// like the item key, which holds the bottom lane (so a limit that gains
// classes keeps what was spent), with its own "!cancelled:!lane<k>:"
// record of cancelled slots; a Window, Rolling or Concurrency limit with
// classes keeps a "!seen:" hash beside its item key, class -> the time
// (µs) the class last had a request admitted, which decisions of the
// classes below it read and which expires the limit's ActiveFor after
// its last write. Store.LaneKey gives a lane's key; Inspect reports the
// lanes and the active classes (ItemState.Lanes, ItemState.Held,
// Snapshot.Headroom). A Fair limit (quota.Limit.Fair; package quota's
// doc, "Fair share") keeps, beside its item key K, a lane per tenant
// ("!fair:<K>:<part>", part the tenant's quota.FairPart, which holds no
// ":"), a GCRA tat at the tenant's fair rate that expires at its tat and
// has its own "!cancelled:" record, and the active set: a sorted set
// "!fairz:<K>" of tenant parts scored by when each was last seen (µs),
// and a hash "!fairw:<K>" of their weights, with the field "" holding
// their sum; both expire the limit's FairSpan after their last write.
// Store.FairLaneKey gives a tenant's lane's key; Inspect reports the
// active set and the tenant's lane (ItemState.Fair). Every key expires
// when its state is back to idle; a
// pause key quota.PauseDrain after the pause, while it still drains the
// buckets it held back. A key keeps one kind: the same key used by a GCRA limit
// and by a window fails with Redis's WRONGTYPE error (wrapping
// quota.ErrState), so the items of one stack need distinct keys, as
// quota.KeyOf gives limits of distinct names. In a coalesced call only the
// decision that meets such a key fails, before it charges anything.
//
// # What operators read besides the state
//
// Two records serve operators (throttle status and its page) and no
// decision: a pause set with PauseWithReason (quota.ReasonPauser) keeps
// why beside it, "!reason:", written by the pause's own script with the
// pause's TTL, which PauseNotes reads; and a RefusalLog counts its
// process's refusals in memory and adds them to "{!refusals}" at most once
// per interval, one script call whatever their number, which Refusals
// reads. A decision's keys and commands are the same with or without
// them, and a refusal still writes nothing in the decision.
//
// # Coalescing
//
// Decisions of one Store for the same tag (so the same hash slot) that
// arrive while a decision of that tag is in flight wait for it, and then
// go together in one script call, as auto-pipelining clients do: the
// script decides them one after the other in their order of arrival, each
// all or nothing on its own and each with its own reply or error, and
// reads and writes each key they share once (lone.lua when they all
// repeat one stack of GCRA limits and calendar windows, reserve.lua
// otherwise). After a call's replies go out, the lane yields once to the
// scheduler before it takes the next batch, so that callers just served
// who ask again at once join it. One caller at a time pays
// nothing for it: a decision that finds no call in flight goes at once, in
// one round trip. Under load a decision takes one round trip or a share of
// one (never more), and a queued caller still waits at most
// Options.Timeout; one whose deadline passes while queued is taken out
// unsent. Coalescing never fails a decision that would succeed alone: a
// decision queues only when its time left covers what the call in flight
// should still take plus a call of its own (one and a half times the mean
// of recent calls), and leaves the queue to go alone, beside the call in
// flight, once its time left falls below that. Only stacks of GCRA and calendar window limits are coalesced
// (with or without classes, pacing or fair share: a Fair item's active
// set is written at once, so the next decision of the call reads it);
// stacks with rolling windows or concurrency limits always go alone.
//
// # Failure
//
// Every call is bounded by Options.Timeout. An error from Redis wraps the
// original error and one of two sentinels, so that a caller can tell a
// failed store from a failed request:
//
//   - quota.ErrStore: the store itself failed, and every call would fail
//     alike for a while. No answer (a connection refused or reset, a
//     timeout, a closed client), or an error reply that says the server
//     cannot serve anyone: LOADING, READONLY, OOM, MISCONF, BUSY,
//     MASTERDOWN, NOREPLICAS, "max number of clients reached", NOAUTH,
//     WRONGPASS, NOPERM, and in a cluster CLUSTERDOWN, TRYAGAIN, or MOVED
//     and ASK once go-redis's redirects ran out.
//   - quota.ErrState: Redis answered, but could not decide this request:
//     any other error reply (WRONGTYPE, the script's "ERR throttle: ..."
//     errors, a Lua error) or a malformed reply. Other requests are
//     unaffected.
//
// A call runs on one of the store's worker goroutines: the store stops
// waiting at the deadline and lets the abandoned call finish in the
// background, within 4 timeouts more (at least a second), so that a hung
// Redis never holds a caller longer than Timeout and a slow call keeps
// its connection: go-redis with ContextTimeoutEnabled drops a connection
// whose call its deadline cut, and a new one costs about 4 round trips,
// which a far Redis could never fit in the timeout again. The workers
// stay while calls come and exit after a second idle; the handoff to them
// and back costs a call two goroutine wake-ups. One case skips it: a
// client that stops a call at the context's deadline itself
// (ContextTimeoutEnabled, with socket deadlines: ReadTimeout and
// WriteTimeout not -2; a *redis.Client, ClusterClient or Ring), while the
// recent calls' round trip, with a half more for margin, is under an
// eighth of the call's time left: then the call runs on the caller's
// goroutine, with the same bound. A call that deadline cuts has run eight
// round trips, a hung Redis rather than a far one; it raises the measured
// round trip to what it ran, and the calls after it go to the workers
// until calls that succeed bring the mean back down. The first calls of a
// store, with nothing measured yet, go to the workers.
//
// A call that timed out may still have reached Redis: a hung or stopped
// server runs it when it resumes, and a reservation that nobody uses is
// charged. That under-admits, never over-admits, and by at most one
// decision per timed-out call, given a client with MaxRetries -1 (go-redis
// retries a call while its context lives). See docs/decisions.md for why
// the script is not handed a deadline.
//
// # Eviction
//
// A Redis that evicts keys (any maxmemory-policy but noeviction) forgets
// spent quotas under memory pressure, and the fleet admits them again
// without any error. The first decision of a Store therefore reads
// maxmemory-policy on every server it writes to (each master of a
// cluster), one more round trip once, and while any server evicts, every
// decision fails with an error wrapping ErrEvictionPolicy and
// quota.ErrStore. New makes no call, so a Redis that is down when the
// process starts delays the check to the first decision that reaches it. A
// server that refuses CONFIG GET (renamed or disabled on managed services,
// denied by an ACL) is not checked. Options.AllowEviction skips the check.
package redisstore
