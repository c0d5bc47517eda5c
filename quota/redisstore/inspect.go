package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/quota"
)

// This file is for operators' tools (cmd/throttle): reading the state of
// limits and pauses without changing it, finding the keys that exist, and
// the manual levers Reset and Resume.

// A Snapshot is the state of a request's limits and pauses at one moment
// on the store's clock, read without changing anything. The decision
// script computes it, run read-only (reserve.lua, "Peeking"), so it is
// what a decision sees: Remaining is how many requests of cost 1 it would
// admit at once, except for a pause's drain ("After a pause" in package
// quota's doc): during a pause and up to quota.PauseDrain after it, a GCRA
// limit may admit less at once than its Remaining says.
type Snapshot struct {
	// Now is the store's time (the Redis server's TIME) when the state
	// was read.
	Now time.Time
	// Items holds one ItemState per Request.Items entry, in order.
	Items []ItemState
	// Pauses holds, per Request.Pauses entry, then for Request.Over when
	// the store reads it (see Store.Inspect), the time that pause holds
	// requests back until; the zero Time when it is not in force.
	Pauses []time.Time
	// PausedUntil is the latest of Pauses, or the zero Time.
	PausedUntil time.Time
}

// ItemState is the state of one limit for one scope.
type ItemState struct {
	// Status is what a decision at Now would report for the limit:
	// Remaining events of cost 1 it admits at once, and ResetAfter, how
	// long until it is back to its full capacity (a GCRA limit drained,
	// or the current window ended).
	quota.Status
	// Used is the part of the capacity in use at Now: the count of the
	// current window, for a rolling window the count of its buckets not
	// expired up to Now, for a GCRA limit Capacity - Remaining, or for a
	// Concurrency limit the leases held.
	Used int64
	// Ahead is, for a window, the count already charged to later windows
	// by reservations that wait into them; for a rolling window, to
	// buckets after Now (which count already: Remaining is Rate - Used -
	// Ahead); zero for GCRA.
	Ahead int64
	// Debt is what settled costs (quota.Reservation.Settle) charged
	// beyond the limit, which the requests after them wait out: for a
	// GCRA limit the events of cost 1 by which its tat lies beyond its
	// tolerance (rounded up), for a window its count beyond its rate.
	// Zero for the other kinds, which are not settled.
	Debt int64
	// NextExpiry is, for a Concurrency limit, how long until the soonest
	// of the leases held expires unless its holder renews it (ResetAfter
	// is the latest); zero when none is held.
	NextExpiry time.Duration
	// Exists reports whether the key holds state; a key that does not is
	// idle (or expired), with its full capacity remaining.
	Exists bool
	// Key is the Redis key of the state.
	Key string
	// Lanes is, for a GCRA limit with priority classes
	// (quota.Limit.Reserve), the state of each class's lane, the top
	// first; the bottom class's lane is Key, the others' are
	// Store.LaneKey's. Status is their sum (Remaining) and the latest of
	// them (ResetAfter). Nil for any other limit.
	Lanes []quota.Status
	// Held is, for a Window, Rolling or Concurrency limit with priority
	// classes, per class above the bottom how much longer its reserve is
	// held from the classes below it: zero when the class has had no
	// request admitted within the limit's ActiveFor, so that its reserve
	// is free for them. Nil for any other limit.
	Held []time.Duration
	// Fair is, for a Fair limit (quota.Limit.Fair), its active tenants
	// and the inspected request's tenant's lane. Status is the limit's
	// own (its key K's, as any GCRA limit's). Nil for any other limit.
	Fair *FairState
}

// Inspect reads the state of req's limits and pauses in one round trip,
// without changing it; req.Cost and req.MaxWait are ignored. Items may be
// empty when Pauses is not. It runs the decision script read-only
// (EVALSHA_RO), so it also works on a replica and for a user that may not
// write. req.Over is read where Reserve reads it (see quota.Request). An
// error that Redis caused wraps quota.ErrStore, or quota.ErrState when it
// concerns this request's keys alone.
func (s *Store) Inspect(ctx context.Context, req *quota.Request) (Snapshot, error) {
	snaps, err := s.InspectAll(ctx, []*quota.Request{req})
	if err != nil {
		return Snapshot{}, err
	}
	return snaps[0], nil
}

// InspectAll is Inspect for many requests in one pipelined round (per
// shard of a Redis Cluster): one snapshot per request, in order. Each
// request's state is read atomically, on the clock of the shard that
// holds it.
func (s *Store) InspectAll(ctx context.Context, reqs []*quota.Request) ([]Snapshot, error) {
	for _, req := range reqs {
		if err := checkInspect(req); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	clientNow := s.clientNow() // the windows are placed as Reserve places them
	keys := make([][]string, len(reqs))
	args := make([][]any, len(reqs))
	extras := make([]extra, len(reqs))
	for i, req := range reqs {
		keys[i], extras[i] = s.extraKeys(req, s.keys(req))
		args[i] = s.peekArgs(req, extras[i], clientNow)
	}
	out := make([]Snapshot, len(reqs))
	if len(reqs) == 0 {
		return out, nil
	}
	_, err := bounded[struct{}](ctx, s, callFunc[struct{}](func(ctx context.Context) (struct{}, error) {
		cmds := s.evalAll(ctx, keys, args, false)
		// A shard that has not cached the script (a fresh server, a
		// failover) gets it sent in full.
		var retry []int
		for i, c := range cmds {
			if c.Err() != nil && strings.HasPrefix(c.Err().Error(), "NOSCRIPT") {
				retry = append(retry, i)
			}
		}
		if len(retry) > 0 {
			subKeys, subArgs := make([][]string, len(retry)), make([][]any, len(retry))
			for j, i := range retry {
				subKeys[j], subArgs[j] = keys[i], args[i]
			}
			again := s.evalAll(ctx, subKeys, subArgs, true)
			for j, i := range retry {
				cmds[i] = again[j]
			}
		}
		for i, c := range cmds {
			v, err := c.Result()
			if err != nil {
				return struct{}{}, err
			}
			if out[i], err = parseInspect(reqs[i], keys[i], extras[i], v); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	}))
	if err != nil {
		return nil, s.fail(ctx, "inspect", err)
	}
	return out, nil
}

// evalAll runs reserve.lua as a peek (read-only: EVAL_RO) once per
// request in one pipeline: EVALSHA_RO, or EVAL_RO when full is set. Each
// command carries its own error (a failed connection fails every command).
func (s *Store) evalAll(ctx context.Context, keys [][]string, args [][]any, full bool) []*redis.Cmd {
	pipe := s.client.Pipeline()
	cmds := make([]*redis.Cmd, len(keys))
	for i, k := range keys {
		if full {
			cmds[i] = reserveScript.EvalRO(ctx, pipe, k, args[i]...)
		} else {
			cmds[i] = reserveScript.EvalShaRO(ctx, pipe, k, args[i]...)
		}
	}
	_, _ = pipe.Exec(ctx) // Exec's error is the first command's
	return cmds
}

// peekArgs returns the ARGV of a peek of req, whose keys end with the
// extra keys x counts (extraKeys): reserve.lua's, for one request of cost
// 0 and no max wait, with "peek" for the TTL slack. clientNow places the
// calendar windows, as Reserve does.
func (s *Store) peekArgs(req *quota.Request, x extra, clientNow time.Time) []any {
	np := len(req.Pauses)
	if s.readsOver(req) {
		np++
	}
	args := []any{s.nowArg(), "peek", 1, 0, 0, len(req.Items), np, x.keys}
	sh := shareOf(req, x)
	for i := range req.Items {
		args, _ = s.appendItem(args, req.Items[i].Limit, 0, req.Class, sh, true, "", clientNow)
	}
	args[3] = len(args) - 3 // the request's count of ARGV entries
	return args
}

// checkInspect refuses a request Inspect cannot read: one Reserve would
// refuse (quota.Request.Validate), its Cost and MaxWait aside since
// Inspect ignores them.
func checkInspect(req *quota.Request) error {
	if req == nil {
		return fmt.Errorf("%w inspect: no request", quota.ErrInvalid)
	}
	r := *req
	r.Cost, r.MaxWait = 0, 0
	return r.Validate()
}

// parseInspect checks a reply of a peek of req (see reserve.lua, "Reply")
// and makes the snapshot of it.
func parseInspect(req *quota.Request, keys []string, x extra, v any) (Snapshot, error) {
	const perItem = 5 // used, ahead, debt, next, exists
	var snap Snapshot
	n, nl := len(req.Items), x.learned
	np := len(keys) - n - x.keys
	nc := classEntries(req)
	nf := (fairEntries + fairPeekEntries) * x.fair
	out, ok := v.([]any)
	if !ok || len(out) != 1 {
		return snap, fmt.Errorf("%w: peek reply %T of %d replies, want an array of 1", errReply, v, len(out))
	}
	// An error reply for this request's keys is returned as it is; every
	// element of an array must be an integer.
	vals, err := replyInts(out[0], nil)
	if err != nil {
		return snap, err
	}
	if want := 4 + (4+perItem)*n + np + nl + nc + nf; len(vals) != want {
		return snap, fmt.Errorf("%w: peek reply of %d elements, want %d", errReply, len(vals), want)
	}
	tail := len(vals) - nl - nc - nf // where the learned rates start
	d, err := parseDecision(append(vals[:4+4*n:4+4*n], vals[tail:tail+nl]...), n, extra{learned: nl})
	if err != nil {
		return snap, err
	}
	learnedRates(req, d)
	snap.Now = time.UnixMicro(d.now)
	ints := vals[4+4*n : tail]
	for e, x := range ints {
		if x < 0 {
			return snap, fmt.Errorf("%w: peek reply element %d is %d, want an integer >= 0", errReply, 4+4*n+e, x)
		}
	}
	snap.Items = make([]ItemState, n)
	for i := range snap.Items {
		f := ints[perItem*i : perItem*(i+1)]
		if f[4] > 1 {
			return snap, fmt.Errorf("%w: peek reply: item %d exists %d", errReply, i, f[4])
		}
		snap.Items[i] = ItemState{
			Status: d.limits[i], Used: f[0], Ahead: f[1], Debt: f[2],
			NextExpiry: quota.Micros(f[3]), Exists: f[4] == 1, Key: keys[i],
		}
	}
	if nc > 0 {
		if err := parseClasses(req, snap.Items, vals[tail+nl:]); err != nil {
			return snap, err
		}
	}
	if nf > 0 {
		if err := parseFairPeek(req, snap.Items, vals[tail+nl+nc:]); err != nil {
			return snap, err
		}
	}
	snap.Pauses = make([]time.Time, np)
	for p, until := range ints[perItem*n:] {
		if until == 0 {
			continue
		}
		snap.Pauses[p] = time.UnixMicro(until)
		if snap.Pauses[p].After(snap.PausedUntil) {
			snap.PausedUntil = snap.Pauses[p]
		}
	}
	return snap, nil
}

// Reset deletes the state of the item keys keys within tag (with the
// record of cancelled reservations kept beside a GCRA item, the lanes of
// a GCRA limit with classes and their records, the activity record of a
// limit with classes, and a Fair limit's active set), in one round trip:
// each limit is back to idle, with its full capacity, no class holds a
// reserve and no tenant counts as active. Requests in flight that
// reserved a slot are forgotten, so a reset can admit more than the limit
// allows for a moment; it is an operator's lever, not part of a decision.
// A Fair limit's tenants' lanes stay (their keys name tenants, which the
// item key does not): a lane orders only its own tenant's waits, and
// expires at its last booked slot.
func (s *Store) Reset(ctx context.Context, tag string, keys ...string) error {
	if tag == "" {
		return fmt.Errorf("%w reset: empty tag", quota.ErrInvalid)
	}
	if len(keys) == 0 {
		return nil
	}
	ks := make([]string, 0, (3+quota.MaxClasses*2)*len(keys))
	for _, k := range keys {
		if k == "" {
			return fmt.Errorf("%w reset: empty key", quota.ErrInvalid)
		}
		item := s.redisKey(KeyItem, tag, k)
		ks = append(ks, item, s.cancelledKey(item), s.seenKey(item), s.companion(item, KeyFairSet), s.companion(item, KeyFairWeights))
		// Every lane a limit may have: the key says nothing of its
		// limit, and deleting a key that does not exist costs little.
		for lane := 0; lane < quota.MaxClasses-1; lane++ {
			lk := s.laneKey(item, lane)
			ks = append(ks, lk, s.cancelledKey(lk))
		}
	}
	return s.del(ctx, "reset", ks)
}

// Resume lifts the pause pauseKey within tag (see Pause) at once.
func (s *Store) Resume(ctx context.Context, tag, pauseKey string) error {
	if tag == "" || pauseKey == "" {
		return fmt.Errorf("%w resume: empty tag or key", quota.ErrInvalid)
	}
	return s.del(ctx, "resume", []string{s.PauseKey(tag, pauseKey)})
}

// ResumeOver is Resume for a pause that PauseOver set: on a Redis
// Cluster it first deletes the pause's copies in every slot (one
// pipelined round per master), on a Ring its copy on every shard, so that
// an error leaves the pause in force, where throttle status shows it;
// calling it again finishes.
func (s *Store) ResumeOver(ctx context.Context, tag, pauseKey string) error {
	if tag == "" || pauseKey == "" {
		return fmt.Errorf("%w resume: empty tag or key", quota.ErrInvalid)
	}
	if s.copies() {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := s.eachCopy(ctx, "resume copies", tag, pauseKey, func(ctx context.Context, pipe redis.Pipeliner, k string) {
			pipe.Del(ctx, k)
		})
		if err != nil {
			return err
		}
	}
	return s.Resume(ctx, tag, pauseKey)
}

// del deletes keys of one tag (one slot) in one command.
func (s *Store) del(ctx context.Context, op string, keys []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := bounded[int64](ctx, s, callFunc[int64](func(ctx context.Context) (int64, error) {
		return s.client.Del(ctx, keys...).Result()
	}))
	if err != nil {
		return s.fail(ctx, op, err)
	}
	return nil
}

// DefaultScanCount is the COUNT hint of each SCAN of a KeyScan when its
// count is zero.
const DefaultScanCount = 500

// A KeyScan finds the store's keys that match a pattern, a bounded number
// of SCAN calls at a time, on every master of a Redis Cluster (every shard
// of a Ring), each with its own cursor. A tool that refreshes a view calls
// Step once per refresh, so that no refresh walks the whole keyspace. It is
// safe for concurrent use.
type KeyScan struct {
	s     *Store
	match string
	count int64

	mu      sync.Mutex
	cursors map[string]uint64 // by node address; absent = start over
	done    map[string]bool   // the node's pass ended at least once
}

// NewKeyScan returns a scan for keys that match the SCAN pattern match
// after the store's prefix (which the scan escapes and prepends), e.g.
// "{*}:peak:*". count is the COUNT hint of each SCAN; zero means
// DefaultScanCount.
func (s *Store) NewKeyScan(match string, count int64) *KeyScan {
	if count <= 0 {
		count = DefaultScanCount
	}
	return &KeyScan{
		s:       s,
		match:   escapePattern(s.prefix) + match,
		count:   count,
		cursors: map[string]uint64{},
		done:    map[string]bool{},
	}
}

// escapePattern escapes the characters that SCAN MATCH patterns treat
// specially (*, ?, [, ], \), so s matches only itself.
func escapePattern(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Step makes up to steps SCAN calls on each node (in parallel across
// nodes), continuing where the last Step stopped, and returns the keys
// found; a node whose pass ends starts a new pass at the next Step. A key
// may be returned again, by a later pass or (as SCAN allows) by the same
// one. complete reports whether every node has ended at least one full
// pass since the scan began: then every key that existed throughout has
// been returned at least once. Each node's calls are bounded by the
// store's timeout.
func (ks *KeyScan) Step(ctx context.Context, steps int) (keys []string, complete bool, err error) {
	if steps < 1 {
		steps = 1
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	node := func(ctx context.Context, c *redis.Client) error {
		addr := c.Options().Addr
		ks.mu.Lock()
		cur := ks.cursors[addr]
		ks.mu.Unlock()
		var found []string
		ended := false
		for i := 0; i < steps; i++ {
			var page []string
			var next uint64
			var err error
			page, err = bounded[[]string](ctx, ks.s, callFunc[[]string](func(ctx context.Context) ([]string, error) {
				var page []string
				var err error
				page, next, err = c.Scan(ctx, cur, ks.match, ks.count).Result()
				return page, err
			}))
			if err == nil {
				cur = next
			}
			if err != nil {
				return ks.s.fail(ctx, "scan", err)
			}
			found = append(found, page...)
			if cur == 0 {
				ended = true
				break
			}
		}
		ks.mu.Lock()
		ks.cursors[addr] = cur
		if ended {
			ks.done[addr] = true
		} else if _, ok := ks.done[addr]; !ok {
			ks.done[addr] = false
		}
		ks.mu.Unlock()
		mu.Lock()
		seen[addr] = true
		keys = append(keys, found...)
		mu.Unlock()
		return nil
	}
	switch c := ks.s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, node)
	case *redis.Ring:
		err = c.ForEachShard(ctx, node)
	case *redis.Client:
		err = node(ctx, c)
	default:
		return nil, false, fmt.Errorf("%w redisstore: scan: client %T is not a *redis.Client, *redis.ClusterClient or *redis.Ring", quota.ErrInvalid, ks.s.client)
	}
	if err != nil {
		return keys, false, err
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	complete = len(seen) > 0
	for addr := range seen {
		if !ks.done[addr] {
			complete = false
		}
	}
	return keys, complete, nil
}
