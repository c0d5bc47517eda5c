package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/quota"
)

// This file is for operators' tools (cmd/throttle): reading the state of
// limits and pauses without changing it, finding the keys that exist, and
// the manual levers Reset and Resume.

// inspectLua reads, in one atomic step on the shard that holds the keys,
// the server's TIME and the raw state of each key: its type and value (a
// string, a hash as a flat field/value array, or a sorted set of leases
// as a flat member/score array). It never writes. It is a
// string here rather than a .lua file so that this tool-only code stays in
// one file.
//
// KEYS  the keys to read
// ARGV  1 now (µs) or "" for TIME
// Reply now, then per key: type ("string", "hash", "zset", "none" or
//
//	another type), value (the string, the hash's fields and values, the
//	sorted set's members and scores, or "").
const inspectLua = `
local now
if ARGV[1] == '' then
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
else
  now = tonumber(ARGV[1])
end
local out = {now}
for i = 1, #KEYS do
  local typ = redis.call('TYPE', KEYS[i]).ok
  local v = ''
  if typ == 'string' then
    v = redis.call('GET', KEYS[i])
  elseif typ == 'hash' then
    v = redis.call('HGETALL', KEYS[i])
  elseif typ == 'zset' then
    v = redis.call('ZRANGE', KEYS[i], 0, -1, 'WITHSCORES')
  end
  out[#out + 1] = typ
  out[#out + 1] = v
end
return out
`

var inspectScript = redis.NewScript(inspectLua)

// A Snapshot is the state of a request's limits and pauses at one moment
// on the store's clock, read without changing anything. It is computed
// with the formulas of package quota's doc, "The decision", as a request
// of cost 1 that is not charged would see it, except for a pause's drain
// ("After a pause"): during a pause and up to quota.PauseDrain after it,
// a GCRA limit may admit less at once than its Remaining says.
type Snapshot struct {
	// Now is the store's time (the Redis server's TIME) when the state
	// was read.
	Now time.Time
	// Items holds one ItemState per Request.Items entry, in order.
	Items []ItemState
	// Pauses holds, per Request.Pauses entry, the time that pause holds
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
}

// Inspect reads the state of req's limits and pauses in one round trip,
// without changing it; req.Cost and req.MaxWait are ignored. Items may be
// empty when Pauses is not. An error that Redis caused wraps
// quota.ErrStore, or quota.ErrState when it concerns this request's keys
// alone.
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
	var nowArg any = ""
	if s.clock != nil {
		nowArg = s.clock.Now().UnixMicro()
	}
	keys := make([][]string, len(reqs))
	for i, req := range reqs {
		keys[i] = s.keys(req)
	}
	out := make([]Snapshot, len(reqs))
	if len(reqs) == 0 {
		return out, nil
	}
	_, err := bounded[struct{}](ctx, s, callFunc[struct{}](func(ctx context.Context) (struct{}, error) {
		cmds := s.evalAll(ctx, keys, nowArg, false)
		// A shard that has not cached the script (a fresh server, a
		// failover) gets it sent in full.
		var retry []int
		for i, c := range cmds {
			if c.Err() != nil && strings.HasPrefix(c.Err().Error(), "NOSCRIPT") {
				retry = append(retry, i)
			}
		}
		if len(retry) > 0 {
			sub := make([][]string, len(retry))
			for j, i := range retry {
				sub[j] = keys[i]
			}
			again := s.evalAll(ctx, sub, nowArg, true)
			for j, i := range retry {
				cmds[i] = again[j]
			}
		}
		for i, c := range cmds {
			v, err := c.Result()
			if err != nil {
				return struct{}{}, err
			}
			if out[i], err = parseInspect(reqs[i], keys[i], v); err != nil {
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

// evalAll runs inspect.lua once per key list in one pipeline: EVALSHA, or
// EVAL when full is set. Each command carries its own error (a failed
// connection fails every command).
func (s *Store) evalAll(ctx context.Context, keys [][]string, nowArg any, full bool) []*redis.Cmd {
	pipe := s.client.Pipeline()
	cmds := make([]*redis.Cmd, len(keys))
	for i, k := range keys {
		if full {
			cmds[i] = inspectScript.Eval(ctx, pipe, k, nowArg)
		} else {
			cmds[i] = inspectScript.EvalSha(ctx, pipe, k, nowArg)
		}
	}
	_, _ = pipe.Exec(ctx) // Exec's error is the first command's
	return cmds
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

// parseInspect checks a reply of inspect.lua and computes the snapshot.
func parseInspect(req *quota.Request, keys []string, v any) (Snapshot, error) {
	var snap Snapshot
	vals, ok := v.([]any)
	if !ok || len(vals) != 1+2*len(keys) {
		return snap, fmt.Errorf("%w: inspect reply %T of %d elements, want %d", errReply, v, len(vals), 1+2*len(keys))
	}
	now, ok := vals[0].(int64)
	if !ok {
		return snap, fmt.Errorf("%w: inspect reply: now is %T, want an integer", errReply, vals[0])
	}
	snap.Now = time.UnixMicro(now)
	n := len(req.Items)
	snap.Items = make([]ItemState, n)
	snap.Pauses = make([]time.Time, len(req.Pauses))
	for i, k := range keys {
		typ, _ := vals[1+2*i].(string)
		raw := vals[2+2*i]
		if i >= n {
			until, err := parseInt(typ, raw)
			if err != nil {
				return snap, fmt.Errorf("%w: pause key %s: %w", errReply, k, err)
			}
			if until > now {
				snap.Pauses[i-n] = time.UnixMicro(until)
				if until > snap.PausedUntil.UnixMicro() || snap.PausedUntil.IsZero() {
					snap.PausedUntil = snap.Pauses[i-n]
				}
			}
			continue
		}
		st, err := itemState(req.Items[i].Limit, typ, raw, now)
		if err != nil {
			return snap, fmt.Errorf("%w: key %s: %w", errReply, k, err)
		}
		st.Key = k
		snap.Items[i] = st
	}
	return snap, nil
}

// parseInt reads a string key's integer; a missing key is 0.
func parseInt(typ string, raw any) (int64, error) {
	switch typ {
	case "none":
		return 0, nil
	case "string":
		s, _ := raw.(string)
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("value %q is not an integer", s)
		}
		return x, nil
	}
	return 0, fmt.Errorf("type %q, want a string", typ)
}

// itemState computes a limit's state at now from its raw key, with the
// formulas of package quota (the status of a decision that was denied, so
// nothing was charged).
func itemState(l *quota.Limit, typ string, raw any, now int64) (ItemState, error) {
	st := ItemState{Exists: typ != "none"}
	if l.Kind == quota.GCRA {
		stored, err := parseInt(typ, raw)
		if err != nil {
			return st, err
		}
		T, dvt := l.Interval(), l.Tolerance()
		tat := max(stored, now)
		rem := max((dvt-(tat-now))/T, 0)
		st.Remaining = rem
		st.ResetAfter = time.Duration(tat-now) * time.Microsecond
		st.Used = l.Capacity() - rem
		if over := tat - now - dvt; over > 0 {
			st.Debt = (over + T - 1) / T
		}
		return st, nil
	}
	if l.Kind == quota.Concurrency {
		return leaseState(l, st, typ, raw, now)
	}
	if l.Kind == quota.Rolling {
		return rollingState(l, st, typ, raw, now)
	}
	start, end := l.Calendar.Bounds(time.UnixMicro(now))
	s0, e0 := start.UnixMicro(), end.UnixMicro()
	var count, ahead int64
	switch typ {
	case "none":
	case "hash":
		fields, _ := raw.([]any)
		for f := 0; f+1 < len(fields); f += 2 {
			name, _ := fields[f].(string)
			val, _ := fields[f+1].(string)
			ws, err1 := strconv.ParseInt(name, 10, 64)
			c, err2 := strconv.ParseInt(val, 10, 64)
			if err1 != nil || err2 != nil {
				return st, fmt.Errorf("field %q = %q is not a window start and count", name, val)
			}
			switch {
			case ws == s0:
				count += c
			case ws >= e0:
				ahead += c
			}
		}
	default:
		return st, fmt.Errorf("type %q, want a hash", typ)
	}
	st.Used, st.Ahead = count, ahead
	st.Remaining = max(l.Rate-count, 0)
	st.Debt = max(count-l.Rate, 0)
	st.ResetAfter = time.Duration(e0-now) * time.Microsecond
	return st, nil
}

// leaseState is itemState for a Concurrency limit: the leases that have
// not expired at now are held.
func leaseState(l *quota.Limit, st ItemState, typ string, raw any, now int64) (ItemState, error) {
	var held, latest, soonest int64
	switch typ {
	case "none":
	case "zset":
		pairs, _ := raw.([]any)
		for f := 0; f+1 < len(pairs); f += 2 {
			score, _ := pairs[f+1].(string)
			x, err := strconv.ParseInt(score, 10, 64)
			if err != nil {
				return st, fmt.Errorf("lease %v expires at %q, not a time", pairs[f], score)
			}
			if x > now {
				held++
				latest = max(latest, x)
				if soonest == 0 || x < soonest {
					soonest = x
				}
			}
		}
	default:
		return st, fmt.Errorf("type %q, want a zset", typ)
	}
	st.Used = held
	st.Remaining = max(l.Rate-held, 0)
	st.ResetAfter = time.Duration(max(latest-now, 0)) * time.Microsecond
	if held > 0 {
		st.NextExpiry = time.Duration(soonest-now) * time.Microsecond
	}
	return st, nil
}

// rollingState computes a rolling window's state at now from its hash
// (quota/redisstore/reserve.lua, "Rolling windows"): a hash counted with
// another bucket width, or whose newest bucket has expired, counts nothing.
func rollingState(l *quota.Limit, st ItemState, typ string, raw any, now int64) (ItemState, error) {
	st.Remaining = l.Rate
	switch typ {
	case "none":
		return st, nil
	case "hash":
	default:
		return st, fmt.Errorf("type %q, want a hash", typ)
	}
	fields, _ := raw.([]any)
	own := map[string]int64{}
	var buckets [][2]int64
	for f := 0; f+1 < len(fields); f += 2 {
		name, _ := fields[f].(string)
		val, _ := fields[f+1].(string)
		x, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return st, fmt.Errorf("field %q = %q is not an integer", name, val)
		}
		switch name {
		case "sum", "old", "new", "width":
			own[name] = x
			continue
		}
		b, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			return st, fmt.Errorf("field %q is not a bucket start", name)
		}
		buckets = append(buckets, [2]int64{b, x})
	}
	W, P := l.BucketWidth(), l.Period.Microseconds()
	newest, ok := own["new"]
	if own["width"] != W || !ok || newest+W+P <= now {
		return st, nil
	}
	for _, b := range buckets {
		switch {
		case b[0]+W+P <= now:
		case b[0] > now:
			st.Ahead += b[1]
		default:
			st.Used += b[1]
		}
	}
	st.Remaining = max(l.Rate-st.Used-st.Ahead, 0)
	st.ResetAfter = time.Duration(newest+W+P-now) * time.Microsecond
	return st, nil
}

// Reset deletes the state of the item keys keys within tag (with the
// record of cancelled reservations kept beside a GCRA item), in one round
// trip: each limit is back to idle, with its full capacity. Requests in
// flight that reserved a slot are forgotten, so a reset can admit more
// than the limit allows for a moment; it is an operator's lever, not part
// of a decision.
func (s *Store) Reset(ctx context.Context, tag string, keys ...string) error {
	if tag == "" {
		return fmt.Errorf("%w reset: empty tag", quota.ErrInvalid)
	}
	if len(keys) == 0 {
		return nil
	}
	ks := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		if k == "" {
			return fmt.Errorf("%w reset: empty key", quota.ErrInvalid)
		}
		ks = append(ks, s.redisKey(KeyItem, tag, k), s.redisKey(KeyCancelled, tag, k))
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
		match:   EscapePattern(s.prefix) + match,
		count:   count,
		cursors: map[string]uint64{},
		done:    map[string]bool{},
	}
}

// EscapePattern escapes the characters that SCAN MATCH patterns treat
// specially (*, ?, [, ], \), so s matches only itself.
func EscapePattern(s string) string {
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
