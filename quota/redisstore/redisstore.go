package redisstore

import (
	"context"
	"crypto/rand"
	_ "embed" // the scripts
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/quota"
)

var (
	//go:embed prelude.lua
	preludeLua string
	//go:embed reserve.lua
	reserveLua string
	//go:embed cancel.lua
	cancelLua string
	//go:embed pause.lua
	pauseLua string
	//go:embed after.lua
	afterLua string
	//go:embed lone.lua
	loneLua string
	//go:embed windows.lua
	windowsLua string

	reserveScript = newScript(windowsLua, reserveLua)
	cancelScript  = newScript(cancelLua)
	pauseScript   = newScript(pauseLua)
	afterScript   = newScript(afterLua)
	loneScript    = newScript(windowsLua, loneLua)
)

// newScript returns the script of parts, in order, with prelude.lua in
// front: the now, TTL and drain every script shares, written once (and
// windows.lua, what the two decision scripts share of calendar windows,
// is a part of those two).
func newScript(parts ...string) *redis.Script {
	return redis.NewScript(preludeLua + "\n" + strings.Join(parts, "\n"))
}

const (
	// DefaultPrefix starts every key when Options.Prefix is empty.
	DefaultPrefix = "throttle:"
	// DefaultTimeout bounds every call when Options.Timeout is zero.
	DefaultTimeout = 200 * time.Millisecond

	// testSlack is added to every TTL (in ms) when Options.Clock is set: a
	// stepped clock does not follow the real time a TTL runs on, and a key
	// must not expire while the test's clock still needs it.
	testSlack = int64(time.Hour / time.Millisecond)
)

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// Prefix starts every key, so that one Redis can serve several
	// applications. Empty means DefaultPrefix. It must not contain "{" or
	// "}", which would break the Redis Cluster hash tag.
	Prefix string
	// Timeout bounds every call to Redis: a dead or hung Redis never holds
	// a caller longer. Zero means DefaultTimeout; it must not be negative.
	Timeout time.Duration
	// Clock is for tests only. When set, its Now is the store's time
	// instead of the Redis server's TIME, and every key is kept an hour
	// longer than its state needs (a stepped clock does not follow the real
	// time that key expiry runs on; state kept longer is idle state, which
	// never changes a decision). Production leaves it nil.
	Clock quota.Clock
	// AllowEviction skips the check of the servers' maxmemory-policy. By
	// default the first decision reads it (CONFIG GET), and any policy but
	// noeviction fails every decision with an error wrapping
	// ErrEvictionPolicy: an evicting Redis forgets spent quotas silently.
	// Set it only for a Redis that never reaches its maxmemory.
	AllowEviction bool
}

// Store is the Redis quota.Store. It is safe for concurrent use; all its
// state is in Redis, so any number of Stores in any number of processes
// share one quota.
type Store struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
	clock   quota.Clock
	slack   int64 // ms added to every TTL
	// workers run the calls, which the store stops waiting for at the
	// timeout; see bounded.
	workers workers
	// honours: the client cuts a call at the context's deadline itself,
	// so a call may run on the caller's goroutine; see direct.
	honours bool

	// oneServer: the client is a *redis.Client, so a script may read keys
	// of any tag; cluster: it is a *redis.ClusterClient, so a script reads
	// the keys of one slot, which may hold copies of pauses (see
	// readsOver); ring: it is a *redis.Ring, so a script reads the keys of
	// one shard, which may hold copies of pauses too (ring.go).
	oneServer, cluster, ring bool

	// policy checks maxmemory-policy before the first decision; see
	// checkPolicy.
	policy policyCheck

	// windows caches window arguments per calendar; see windowArgs.
	windows atomic.Pointer[map[quota.Calendar]*windowArgs]
	// limits caches the static arguments of each limit; see limitArgs.
	limits atomic.Pointer[map[*quota.Limit]*limitArgs]

	// lanes queue the decisions that wait for a call of their tag in
	// flight, spread by a hash of the tag with seed; see coalesce.go.
	lanes [lanes]lane
	seed  maphash.Seed
	// roundTrip is the recent decision calls' mean duration in ns, which
	// tells a decision whether it can afford to queue; see decide.
	roundTrip atomic.Int64

	// leasePrefix and leaseSeq make lease ids unique fleet-wide: a random
	// per-store prefix and a counter.
	leasePrefix string
	leaseSeq    atomic.Uint64

	// notify wakes this process's lease waiters on the releases of the
	// fleet, and tells its slot waiters of the fleet's pauses (notify.go).
	notify notifier

	// observe, when set (by tests), sees every decision: the server's now
	// and the slot time, in µs.
	observe func(now, t int64, allowed bool)
}

var _ quota.Store = (*Store)(nil)

// New returns a Store that keeps its state in client: a *redis.Client, a
// *redis.ClusterClient, a failover client or a *redis.Ring. Redis 7 or later
// is required (the script reads TIME before it writes). The store hands
// each call to a worker goroutine, which it stops waiting for at
// Options.Timeout, and lets the call finish in the background; a client
// with ContextTimeoutEnabled runs its calls on the caller's goroutine
// instead while Redis answers far within the timeout (see the package
// doc, "Failure").
//
// New makes no call to Redis, so a process starts while Redis is down. The
// first decision first reads the servers' maxmemory-policy (one more round
// trip, once; see Options.AllowEviction and ErrEvictionPolicy).
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("%w redisstore: nil client", quota.ErrInvalid)
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("%w redisstore: prefix %q must not contain { or }: they would break the cluster hash tag",
			quota.ErrInvalid, prefix)
	}
	timeout := opts.Timeout
	if timeout < 0 {
		return nil, fmt.Errorf("%w redisstore: timeout %v is negative", quota.ErrInvalid, timeout)
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	s := &Store{
		client:    client,
		prefix:    prefix,
		timeout:   timeout,
		clock:     opts.Clock,
		oneServer: isType[*redis.Client](client),
		cluster:   isType[*redis.ClusterClient](client),
		ring:      isType[*redis.Ring](client),
		workers:   workers{jobs: make(chan func())},
		honours:   honoursDeadlines(client),
		seed:      maphash.MakeSeed(),
	}
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("redisstore: lease ids: %w", err)
	}
	s.leasePrefix = base64.RawURLEncoding.EncodeToString(id[:]) + "."
	if s.clock != nil {
		s.slack = testSlack
	}
	s.policy.passed.Store(opts.AllowEviction)
	return s, nil
}

// isType reports whether client is a C.
func isType[C redis.UniversalClient](client redis.UniversalClient) bool {
	_, ok := client.(C)
	return ok
}

// Reserve decides req in one round trip; see quota.Store. An error that
// Redis caused wraps the original error and either quota.ErrStore (Redis
// failed) or quota.ErrState (Redis answered, but not for this request:
// see the package doc, "Failure"); an invalid request is refused before
// any round trip with an error wrapping quota.ErrInvalid; a ctx that
// ended returns its error.
func (s *Store) Reserve(ctx context.Context, req *quota.Request) (*quota.Reservation, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.checkPolicy(ctx); err != nil {
		return nil, err
	}
	n := len(req.Items)
	keys, x := s.extraKeys(req, s.keys(req))
	var boundsBuf [4]*windowArgs
	c, bounds := s.reserveArgs(req, len(keys)-n-x.keys, x, boundsBuf[:0])

	v, err := s.decide(pending{ctx: ctx, tag: req.Tag, keys: keys, args: c.args, lone: c.lone}, c.alone)
	if err != nil {
		return nil, s.fail(ctx, "reserve", err)
	}
	d, err := parseReserve(v, n, x)
	if err != nil {
		return nil, s.fail(ctx, "reserve", err)
	}
	if s.observe != nil {
		s.observe(d.now, d.t, d.allowed)
	}
	wait := quota.Micros(d.t - d.now)
	res := quota.Result{Allowed: d.allowed, Deferred: d.deferred, Decider: d.decider, Limits: d.limits}
	learnedRates(req, d)
	if !d.allowed {
		res.RetryAfter = wait
		return quota.NewReservation(res, quota.ReservationOps{}), nil
	}
	res.Wait = wait
	if n == 0 { // nothing to give back or sync
		return quota.NewReservation(res, quota.ReservationOps{}), nil
	}
	b, err := s.book(req, keys[:n:n], d, c.lease, bounds, x.part)
	if err != nil {
		return nil, s.fail(ctx, "reserve", err)
	}
	ops := quota.ReservationOps{Sync: b.sync, Settle: b.settle}
	if c.lease != "" {
		ops.Release, ops.Renew = b.release, b.renew
	}
	if wait > 0 {
		ops.Cancel = b.cancel
	}
	return quota.NewReservation(res, ops), nil
}

// reserveCall is one decision's part of a reserve.lua call, as Reserve
// builds it.
type reserveCall struct {
	// args: three free slots for the call's now, slack and count (see
	// call), then the decision's entries (reserve.lua's header, "ARGV").
	args  []any
	lease string // the lease id, when the stack has concurrency limits
	// alone: the decision is not coalesced (only stacks of GCRA and
	// window limits are).
	alone bool
	// lone: a stack lone.lua decides (loneStack), when the call holds
	// this decision alone or a run of its stack (oneStack).
	lone bool
}

// reserveArgs returns the call of req, whose keys end with np pause keys
// and the extra keys x counts (extraKeys), and bounds with, per window
// item in stack order, the window starts it sends appended. bounds is the
// caller's buffer (most stacks have a few windows at most), kept apart
// from the call, whose args go to the heap, so that it can stay on the
// caller's stack.
func (s *Store) reserveArgs(req *quota.Request, np int, x extra, bounds []*windowArgs) (reserveCall, []*windowArgs) {
	var c reserveCall
	argc, windows := 5, 0
	lead := req.LeadMicros()
	for i := range req.Items {
		l := req.Items[i].Limit
		switch l.Kind {
		case quota.GCRA:
			argc += 4
			if l.Learn {
				argc += 4
			} else if lead > 0 && l.Reserve == nil { // Validate refuses a lead with lanes
				argc++
			}
			if l.Fair {
				argc += fairArgc
			}
		case quota.Concurrency:
			argc += 4
			c.alone = true
			if c.lease == "" {
				c.lease = s.leasePrefix + strconv.FormatUint(s.leaseSeq.Add(1), 36)
			}
		case quota.Rolling:
			argc += 5
			c.alone = true
		default:
			argc += 8
			windows++
		}
		if l.Reserve != nil || l.Pace {
			argc += classArgc(l, req.Class, false)
		}
	}
	if windows > cap(bounds) {
		bounds = make([]*windowArgs, 0, windows)
	}
	clientNow := s.clientNow()
	n := len(req.Items)
	c.args = make([]any, 3, 3+argc)
	c.args = append(c.args, argc, req.MaxWaitMicros(), n, np, x.keys)
	c.lone = loneStack(req, argc)
	sh := shareOf(req, x)
	for i := range req.Items {
		l := req.Items[i].Limit
		if lead > 0 && l.Kind == quota.GCRA && !l.Learn && l.Reserve == nil {
			c.args = leadArgs(c.args, s.limitArgs(l), req.CostOf(i), lead)
			continue
		}
		var w *windowArgs
		c.args, w = s.appendItem(c.args, l, req.CostOf(i), req.Class, sh, false, c.lease, clientNow)
		if w != nil {
			bounds = append(bounds, w)
		}
	}
	return c, bounds
}

// loneStack reports whether lone.lua decides req when its call holds it
// alone: a stack of GCRA limits that do not learn and calendar windows,
// neither with classes, pace or a fair share, each key once, whose
// arguments (argc, the request's count of ARGV entries) are those lone.lua
// reads and no more: a request that carries anything else goes to
// reserve.lua.
func loneStack(req *quota.Request, argc int) bool {
	want := 5
	for i := range req.Items {
		l := req.Items[i].Limit
		if l.Learn || l.Reserve != nil || l.Pace || l.Fair {
			return false // lone.lua has no learned rate, lanes, pace nor fair share
		}
		switch l.Kind {
		case quota.GCRA:
			want += 4
			if req.Lead > 0 {
				want++
			}
		case quota.Window:
			want += 8
		default:
			return false
		}
		for j := range i {
			if req.Items[j].Key == req.Items[i].Key {
				return false
			}
		}
	}
	return argc == want
}

// leadArgs appends the arguments of a GCRA item charged with a lead of
// lead µs (quota.Request.Lead): "a", cost, T, DVT, lead (reserve.lua's
// header, "ARGV"). A request without a lead never sends them, so the
// plain path's arguments are what they were.
func leadArgs(args []any, st *limitArgs, cost, lead int64) []any {
	return append(args, "a", cost, st.boxed[0], st.boxed[1], lead)
}

// book returns what acts on the admitted decision d of req afterwards:
// per item, what cancel.lua and after.lua need. keys are req's item keys;
// lease and bounds are those of its call (reserveArgs); part is its
// tenant's, for a stack with a Fair item.
func (s *Store) book(req *quota.Request, keys []string, d decision, lease string, bounds []*windowArgs, part string) (*booking, error) {
	n := len(req.Items)
	b := &booking{s: s, keys: keys, t: d.t, lease: lease, items: make([]bookedItem, n, n+d.fairCharged())}
	w, g, f, k := 0, 0, 0, 0
	for i := range req.Items {
		l := req.Items[i].Limit
		bi := &b.items[i]
		bi.kind, bi.mark, bi.cost = l.Kind, d.marks[i], req.CostOf(i)
		switch l.Kind {
		case quota.GCRA:
			bi.prev = d.prevs[i]
			if l.Fair { // its tenant's lane, when the decision charged it
				k += b.bookFair(k, i, l, d.fair[f], part)
				f++
			}
			if l.Reserve != nil { // Cancel, Settle and Sync act on the lane charged
				if err := bi.bookLane(s, l, d.lanes[g]); err != nil {
					return nil, err
				}
				g++
				continue
			}
			if l.Learn { // Sync and Settle work at the rate decided on
				bi.limit, bi.learned = l, s.learnedKey(b.keys[i])
				l = l.Learned(d.limits[i].Rate)
			}
			bi.T, bi.dvt, bi.rate, bi.reach = l.Interval(), l.Tolerance(), l.Rate, l.DebtReach()
			continue
		case quota.Rolling:
			bi.end = l.BucketWidth()
			continue
		case quota.Concurrency:
			bi.T = l.Period.Microseconds()
			continue
		}
		if err := bi.bookWindow(bounds[w], l.Rate, d.limits[i].Remaining); err != nil {
			return nil, err
		}
		w++
	}
	return b, nil
}

// bookWindow sets the end of the window charged (the one of bounds that
// starts at bi.mark), the quota and the count right after the charge of
// a window item whose reply said remaining.
func (bi *bookedItem) bookWindow(bounds *windowArgs, rate, remaining int64) error {
	st := &bounds.starts
	k := 0
	for k < 4 && st[k] != bi.mark {
		k++
	}
	if k == 4 {
		return fmt.Errorf("%w: window mark %d is none of the window starts", errReply, bi.mark)
	}
	// The reply's remaining is the charged window's, right after the
	// charge.
	bi.end, bi.rate, bi.atMark = st[k+1], rate, rate-remaining
	return nil
}

// Pause holds back every later request that names key (in tag) among its
// pauses for d from now on the server's clock; see quota.Store. A d of zero
// or less changes nothing; a d above 71 years is taken as 71 years.
func (s *Store) Pause(ctx context.Context, tag, key string, d time.Duration) error {
	_, _, err := s.pause(ctx, tag, key, d, "")
	return err
}

// pause is Pause with a reason (PauseWithReason); it returns the
// paused-until in force and the store's now (µs), or zeros when d changes
// nothing.
func (s *Store) pause(ctx context.Context, tag, key string, d time.Duration, reason string) (until, now int64, err error) {
	if tag == "" || key == "" {
		return 0, 0, fmt.Errorf("%w pause: empty tag or key", quota.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	us := min(d.Microseconds(), quota.MaxExact)
	if us <= 0 {
		return 0, 0, nil
	}
	pk := s.PauseKey(tag, key)
	keys := []string{pk, s.reasonKey(tag, key)}
	v, err := s.run(ctx, pauseScript, keys, []any{s.nowArg(), s.slack, us, s.pauseChannel(), quota.CleanReason(reason)})
	if err != nil {
		return 0, 0, s.fail(ctx, "pause", err)
	}
	if r, ok := v.([]any); ok && len(r) == 2 {
		until, ok1 := r[0].(int64)
		now, ok2 := r[1].(int64)
		if ok1 && ok2 && until > now {
			s.notify.pauses.note(pk, time.Duration(us)*time.Microsecond, s.now())
			return until, now, nil
		}
	}
	return 0, 0, s.fail(ctx, "pause", fmt.Errorf("%w: %v, want the paused-until and now", errReply, v))
}

// PauseOver is Pause for a pause that requests in other tags name as
// their quota.Request.Over (a provider's pause of every tenant). On a
// Redis Cluster, where such a request reads the pause's copy in its own
// slot, it then writes the copies in all 16,384 slots: the paused-until
// in force, with the TTL the pause has, in one pipelined round per
// master (60 to 220 ms on a loaded three-master test cluster, so the
// store's timeout must allow it; cmd/throttle's is 2s). On a Ring, where
// such a request reads the copy on its own shard, it writes one copy per
// shard, and fails, naming it, when a shard the Ring reports down missed
// its copy (ring.go). The copies hold the pause's paused-until on the
// clock of its master, which each master compares with its own: clocks
// apart by x end a copy x early or late. Only the pause is announced
// (pause.lua), not its copies. An error may leave copies unset, the pause
// set: calling it again writes them. On one server, where the requests in
// other tags read the pause itself, it is Pause.
func (s *Store) PauseOver(ctx context.Context, tag, key string, d time.Duration) error {
	return s.PauseOverWithReason(ctx, tag, key, d, "")
}

// PauseOverWithReason is PauseOver with a reason, as PauseWithReason
// records it: beside the pause, not its copies.
func (s *Store) PauseOverWithReason(ctx context.Context, tag, key string, d time.Duration, reason string) error {
	until, now, err := s.pause(ctx, tag, key, d, reason)
	if err != nil || !s.copies() || until == 0 {
		return err
	}
	// prelude.lua's ttl: the pause's key lives until it has drained.
	ttl := time.Duration((until-now+quota.PauseDrain.Microseconds()+999)/1000+s.slack) * time.Millisecond
	return s.eachCopy(ctx, "pause copies", tag, key, func(ctx context.Context, pipe redis.Pipeliner, k string) {
		pipe.Set(ctx, k, until, ttl)
	})
}

// eachCopy runs one command of do on each of the copies of the pause key
// in tag (see PauseOver), one per slot since a cluster refuses a command
// across slots, in one pipelined round per master (on a Ring, one per
// shard: eachShard); op names the call in its error.
func (s *Store) eachCopy(ctx context.Context, op, tag, key string, do func(ctx context.Context, pipe redis.Pipeliner, k string)) error {
	if s.ring {
		return s.eachShard(ctx, op, s.ringCopyKey(tag, key), do)
	}
	copies := s.copyKeys(tag, key)
	_, err := bounded[struct{}](ctx, s, callFunc[struct{}](func(ctx context.Context) (struct{}, error) {
		pipe := s.client.Pipeline()
		for _, k := range copies {
			do(ctx, pipe, k)
		}
		_, err := pipe.Exec(ctx) // the first command's error
		return struct{}{}, err
	}))
	if err != nil {
		return s.fail(ctx, op, err)
	}
	return nil
}

// booking is what acts on an admitted reservation afterwards (Cancel,
// Sync, Release, Renew, Settle).
type booking struct {
	s     *Store
	keys  []string // the item keys
	t     int64    // the slot time, µs on the store's clock
	lease string   // the lease id, when the stack has Concurrency limits
	// items are the stack's, one per item; past their end, in their
	// capacity, the tenants' lanes the reservation charged (lanes), so
	// that a booking without them is no larger than before they existed.
	items []bookedItem
}

type bookedItem struct {
	kind quota.Kind
	// lane is, for a GCRA limit with classes, the lane the reservation
	// charged, one of limit's lanes; it fits in kind's padding.
	lane   int8
	cost   int64 // what the reservation counted for in this limit
	mark   int64 // GCRA: the tat set; window, rolling: the window or bucket start charged
	prev   int64 // GCRA: the stored tat the reservation replaced
	T, dvt int64 // GCRA: the interval and tolerance (µs); concurrency: T is the lease TTL (µs)
	end    int64 // window: the end of the window charged; rolling: the bucket width
	rate   int64 // window: the quota; GCRA: the rate as decided
	reach  int64 // GCRA: how far past now a settled debt may take the tat (µs)
	atMark int64 // window: its count right after the charge
	// learned is a learning limit's learned key (package quota's doc,
	// "Learning"), and a tenant's lane's own key (see lanes), else "".
	// limit is the limit as configured, for a learning limit (its floor)
	// and a GCRA limit with classes (its lanes); else nil.
	learned string
	limit   *quota.Limit
}

// cancel runs cancel.lua: one round trip. It runs even when ctx has ended
// (a waiter typically cancels because its context ended), bounded by the
// store's timeout; ctx's values are kept. A tenant's lane the reservation
// charged is given back as a GCRA item of its own, by its own mark.
func (b *booking) cancel(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	all := b.items[:cap(b.items)]
	n := len(all)
	keys := append(make([]string, 0, 2*n), b.keys...)
	for _, ln := range b.fairLanes() {
		keys = append(keys, ln.learned)
	}
	args := make([]any, 0, 4+4*n)
	args = append(args, b.s.nowArg(), b.s.slack, b.t, n)
	for i := range all {
		it := &all[i]
		switch it.kind {
		case quota.GCRA:
			if it.laned() { // the lane charged, and its own holes
				keys[i] = b.laneKey(i, int(it.lane))
			}
			keys = append(keys, b.s.cancelledKey(keys[i]))
			args = append(args, "g", it.mark, it.prev)
		case quota.Rolling:
			args = append(args, "r", it.cost, it.mark, it.end)
		case quota.Concurrency:
			args = append(args, "c", b.lease, b.s.channel())
		default:
			args = append(args, "w", it.cost, it.mark, it.end)
		}
	}
	v, err := b.s.run(ctx, cancelScript, keys, args)
	if err != nil {
		return b.s.fail(ctx, "cancel", err)
	}
	if _, ok := v.(int64); !ok {
		return b.s.fail(ctx, "cancel", fmt.Errorf("%w: %T, want an integer", errReply, v))
	}
	return nil
}

// sync runs after.lua with op "sync" for each observation: one round
// trip.
func (b *booking) sync(ctx context.Context, obs []quota.Observed) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	keys := make([]string, 0, len(obs))
	args := make([]any, 0, 3+7*len(obs))
	args = append(args, b.s.nowArg(), b.s.slack, 0) // the count, set below
	n := 0
	for _, o := range obs {
		it := &b.items[o.Item]
		T, dvt := it.T, it.dvt
		if it.learned != "" && o.Limit > 0 {
			// The item key too: a figure that falls restates its tat.
			_, hi := it.limit.LearnBounds()
			args = append(args, "learn", o.Limit, b.t, quota.LearnTTL.Microseconds(),
				it.limit.Period.Microseconds(), it.limit.Rate, it.limit.Capacity(), hi)
			keys = append(keys, it.learned, b.keys[o.Item])
			n++
			// The vendor's remaining counts in its bucket as it states it.
			l := it.limit.Learned(o.Limit)
			T, dvt = l.Interval(), l.Tolerance()
		}
		if o.LimitOnly {
			continue
		}
		r := max(o.Remaining, 0)
		switch {
		case it.laned():
			var lanes int
			keys, args, lanes = b.syncLanes(keys, args, o.Item, r)
			n += lanes
			continue
		case it.kind == quota.GCRA:
			args = append(args, "sync", "g", T, dvt, min(r, dvt/T), it.mark)
		case it.kind == quota.Window:
			args = append(args, "sync", "w", it.rate, min(r, it.rate), it.mark, it.end, it.atMark)
		default:
			continue // rolling windows and leases are not synced (quota.Reservation.Sync)
		}
		keys = append(keys, b.keys[o.Item])
		n++
	}
	return b.after(ctx, "sync", n, keys, args)
}

// settle books the actual costs: after.lua op "settle", one round trip.
// Like cancel, it runs even when ctx has ended.
func (b *booking) settle(ctx context.Context, actual []int64) error {
	ctx = context.WithoutCancel(ctx)
	var keys []string
	args := make([]any, 0, 3+6*len(b.items))
	args = append(args, b.s.nowArg(), b.s.slack, 0) // the count, set below
	for i := range b.items {
		it := &b.items[i]
		if actual[i] < 0 || actual[i] == it.cost || quota.Implausible(actual[i], it.rate) {
			continue // rolling windows and leases (rate 0) too: not settled (quota.Reservation.Settle)
		}
		delta := actual[i] - it.cost
		switch it.kind {
		case quota.GCRA:
			delta = min(delta, quota.MaxExact/it.T) // keeps stored times exact
			args = append(args, "settle", "g", it.mark, delta, it.T, it.reach)
			if it.laned() { // the lane charged, by its own interval and reach
				keys = append(keys, b.laneKey(i, int(it.lane)))
				continue
			}
		case quota.Window:
			args = append(args, "settle", "w", it.mark, it.end, delta)
		default:
			continue // rolling windows and leases are not settled (quota.Reservation.Settle)
		}
		keys = append(keys, b.keys[i])
	}
	keys, args = b.settleLanes(keys, args, actual)
	return b.after(ctx, "settle", len(keys), keys, args)
}

// after runs after.lua with the n entries of keys and args (args[2], their
// count, is set here); nothing when there are none.
func (b *booking) after(ctx context.Context, op string, n int, keys []string, args []any) error {
	if n == 0 {
		return nil
	}
	args[2] = n
	v, err := b.s.run(ctx, afterScript, keys, args)
	if err != nil {
		return b.s.fail(ctx, op, err)
	}
	changed, ok := v.(int64)
	if !ok {
		return b.s.fail(ctx, op, fmt.Errorf("%w: %T, want an integer", errReply, v))
	}
	if op == "renew" && changed < int64(n) { // renewed only leases still held
		return quota.ErrLeaseLost
	}
	return nil
}

// release gives the leases back: after.lua op "release", one round trip.
// Like cancel, it runs even when ctx has ended (a response is often done
// because its context ended), bounded by the store's timeout.
func (b *booking) release(ctx context.Context) error { return b.leases(ctx, "release") }

// renew extends the leases still held: after.lua op "renew", one round
// trip.
func (b *booking) renew(ctx context.Context) error { return b.leases(ctx, "renew") }

// leases runs after.lua with op ("release" or "renew") for each
// Concurrency item.
func (b *booking) leases(ctx context.Context, op string) error {
	ctx = context.WithoutCancel(ctx)
	var keys []string
	args := make([]any, 0, 3+3*len(b.items))
	args = append(args, b.s.nowArg(), b.s.slack, 0) // the count, set below
	for i := range b.items {
		it := &b.items[i]
		if it.kind != quota.Concurrency {
			continue
		}
		keys = append(keys, b.keys[i])
		if op == "renew" {
			args = append(args, op, b.lease, it.T)
		} else {
			args = append(args, op, b.lease, b.s.channel())
		}
	}
	return b.after(ctx, op, len(keys), keys, args)
}

// clientNow is the time Go places the calendar windows around: its own
// clock (or the test clock), to the microsecond; the script takes its now
// from the server unless a test clock is set.
func (s *Store) clientNow() time.Time {
	if s.clock != nil {
		return time.UnixMicro(s.clock.Now().UnixMicro())
	}
	return time.UnixMicro(time.Now().UnixMicro())
}

// appendItem appends one item's part of reserve.lua's ARGV (its header,
// "ARGV"): the kind, the cost and the limit's fixed arguments; lease for a
// concurrency limit; for a calendar window its starts around clientNow,
// which it also returns (nil for the other kinds); for a limit with
// classes or a paced window, the arguments of class (appendClass; peek:
// Inspect's); for a Fair limit, the request's tenant sh (fairArgs).
// Reserve and Inspect's peek build their items with it, so the two cannot
// drift apart.
func (s *Store) appendItem(args []any, l *quota.Limit, cost int64, class int, sh share, peek bool, lease string, clientNow time.Time) ([]any, *windowArgs) {
	st := s.limitArgs(l)
	classed := l.Reserve != nil || l.Pace
	switch {
	case l.Fair:
		return fairArgs(args, st, cost, sh), nil
	case l.Learn:
		return learnArgs(args, st, l, cost), nil
	case l.Kind == quota.GCRA && !classed:
		return append(args, "g", cost, st.boxed[0], st.boxed[1]), nil
	case l.Kind == quota.GCRA:
		return appendClass(append(args, "G", cost), st, l, class, peek), nil
	case l.Kind == quota.Rolling && !classed:
		return append(args, "r", cost, st.boxed[0], st.boxed[1], st.boxed[2]), nil
	case l.Kind == quota.Rolling:
		return appendClass(append(args, "R", cost, st.boxed[0], st.boxed[1], st.boxed[2]), st, l, class, peek), nil
	case l.Kind == quota.Concurrency && !classed:
		return append(args, "c", st.boxed[0], st.boxed[1], lease), nil
	case l.Kind == quota.Concurrency:
		return appendClass(append(args, "C", st.boxed[0], st.boxed[1], lease), st, l, class, peek), nil
	}
	w := s.windowArgs(l.Calendar, clientNow)
	if !classed {
		args = append(args, "w", cost, st.boxed[0])
		return append(args, w.boxed[:]...), w
	}
	args = append(args, "W", cost, st.boxed[0])
	return appendClass(append(args, w.boxed[:]...), st, l, class, peek), w
}

// nowArg is the now a script takes: "" for the server's TIME, or the test
// clock's.
func (s *Store) nowArg() any {
	if s.clock != nil {
		return s.clock.Now().UnixMicro()
	}
	return ""
}

// run runs a script with the store's timeout (bounded): EVALSHA, and
// EVAL when the server does not have the script cached.
func (s *Store) run(ctx context.Context, sc *redis.Script, keys []string, args []any) (any, error) {
	return bounded[any](ctx, s, script{s.client, sc, keys, args})
}

// fail wraps an error of a call. When the caller's own context ended, its
// error is returned as it is: the caller gave up, the store did not fail.
// Otherwise it wraps quota.ErrStore or quota.ErrState (see classify) and
// err.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if cerr := ended(ctx); cerr != nil {
		return fmt.Errorf("redisstore: %s: %w", op, cerr)
	}
	return fmt.Errorf("redisstore: %s: %w: %w", op, classify(err), err)
}

// ended returns ctx's error, or context.DeadlineExceeded once its deadline
// has passed: a socket deadline set from ctx can fire a moment before ctx's
// own timer marks it done.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// limitArgs are the arguments of one limit that are the same in every
// decision, as reserve.lua's ARGV wants them, boxed once: GCRA: T, DVT;
// window: rate; rolling: rate, P, W; concurrency: rate, TTL (µs). Boxing
// them per call cost an allocation each. A limit with classes or a paced
// window has its class arguments too (classes.go).
type limitArgs struct {
	l     quota.Limit // the limit as they were made: a limit changed since is made again
	boxed [3]any
	// fair is a Fair limit's burst and FairSpan (µs).
	fair [2]any
	classArgs
}

// limitArgs returns the static arguments of l: the cached ones when l is
// unchanged since they were made.
func (s *Store) limitArgs(l *quota.Limit) *limitArgs {
	cache := s.limits.Load()
	if cache != nil {
		if a := (*cache)[l]; a != nil && a.l.Equal(l) {
			return a
		}
	}
	a := &limitArgs{l: l.Clone()}
	switch l.Kind {
	case quota.GCRA:
		a.boxed = [3]any{l.Interval(), l.Tolerance()}
	case quota.Rolling:
		a.boxed = [3]any{l.Rate, l.Period.Microseconds(), l.BucketWidth()}
	case quota.Concurrency:
		a.boxed = [3]any{l.Rate, l.Period.Microseconds()}
	default:
		a.boxed = [3]any{l.Rate}
	}
	if l.Reserve != nil || l.Pace {
		a.classArgs = makeClassArgs(l)
	}
	if l.Fair {
		a.fair = [2]any{l.Capacity(), l.FairSpan().Microseconds()}
	}
	// Limits come from configuration, so the map settles after the first
	// decisions.
	storeCopy(&s.limits, cache, l, a, maxCachedLimits)
	return a
}

// maxCachedLimits bounds the cache of static limit arguments. A caller
// that builds its limits per request (a test, a tool) only misses it.
const maxCachedLimits = 256

// windowArgs are the five window starts of a calendar around one window,
// as reserve.lua's ARGV wants them, boxed once: they change only when the
// window does, so decisions share them (read-only) instead of recomputing
// and boxing them every time.
type windowArgs struct {
	starts [5]int64
	boxed  [5]any
}

// maxCachedCalendars bounds the cache of window arguments. Calendars come
// from configuration, so a handful is usual.
const maxCachedCalendars = 256

// windowArgs returns the window starts of cal around now: the cached ones
// when now is still in their current window.
func (s *Store) windowArgs(cal quota.Calendar, now time.Time) *windowArgs {
	us := now.UnixMicro()
	cache := s.windows.Load()
	if cache != nil {
		if w := (*cache)[cal]; w != nil && w.starts[1] <= us && us < w.starts[2] {
			return w
		}
	}
	w := &windowArgs{starts: windowStarts(cal, now)}
	for i, b := range w.starts {
		w.boxed[i] = b
	}
	// The window moves once per window per calendar.
	storeCopy(&s.windows, cache, cal, w, maxCachedCalendars)
	return w
}

// storeCopy stores in p a copy of cache (what p held, or nil) with k set
// to v, unless cache already holds max entries: copy on write, for the
// caches decisions read without a lock. A concurrent writer may win;
// either map is right.
func storeCopy[K comparable, V any](p *atomic.Pointer[map[K]V], cache *map[K]V, k K, v V, max int) {
	next := make(map[K]V, 1)
	if cache != nil {
		if len(*cache) >= max {
			return
		}
		maps.Copy(next, *cache)
	}
	next[k] = v
	p.Store(&next)
}

// windowStarts returns the starts of five consecutive windows of cal, the
// second of which holds now: in µs, as reserve.lua's ARGV wants them.
func windowStarts(cal quota.Calendar, now time.Time) [5]int64 {
	s1, e1 := cal.Bounds(now)
	s0, _ := cal.Bounds(s1.Add(-time.Nanosecond))
	_, e2 := cal.Bounds(e1)
	_, e3 := cal.Bounds(e2)
	return [5]int64{s0.UnixMicro(), s1.UnixMicro(), e1.UnixMicro(), e2.UnixMicro(), e3.UnixMicro()}
}

// learnedRates sets the Status.Rate of each learning item of req to the
// rate the decision d ran it at.
func learnedRates(req *quota.Request, d decision) {
	for i, j := 0, 0; j < len(d.learned); i++ {
		if req.Items[i].Limit.Learn {
			d.limits[i].Rate = d.learned[j]
			j++
		}
	}
}

// learnArgs appends to args the item of learning limit l, whose static
// arguments are st, for cost: "l", cost, T, DVT (at its floor), P, N, B,
// hi (reserve.lua, "Learning").
func learnArgs(args []any, st *limitArgs, l *quota.Limit, cost int64) []any {
	_, hi := l.LearnBounds()
	return append(args, "l", cost, st.boxed[0], st.boxed[1], l.Period.Microseconds(), l.Rate, l.Capacity(), hi)
}

// keys returns the Redis keys of req: its items, then its pauses, then
// its Over pause when the store reads it (readsOver), on a Redis Cluster
// its copy in the slot of req's tag, on a Ring its copy on req's shard
// (which has one name on every shard). They share one allocation.
func (s *Store) keys(req *quota.Request) []string {
	tag := quota.SafeKey(req.Tag)
	n := len(req.Items)
	var partsBuf [8]string
	parts := partsBuf[:0]
	for i := range req.Items {
		parts = append(parts, quota.SafeKey(req.Items[i].Key))
	}
	for _, p := range req.Pauses {
		parts = append(parts, quota.SafeKey(p))
	}
	np := len(parts)
	overTag, filler := "", ""
	if s.readsOver(req) {
		overTag = quota.SafeKey(req.Over.Tag)
		parts = append(parts, quota.SafeKey(req.Over.Key))
		switch {
		case s.cluster:
			filler = fillers().filler(slot(tag))
		case s.ring:
			filler = overTag // ringCopyKey: the same name on every shard
		}
	}
	total := 0
	for i, p := range parts {
		switch {
		case i < n:
			total += keyLen(s.prefix, KeyItem, tag, p)
		case i < np:
			total += keyLen(s.prefix, KeyPause, tag, p)
		case filler != "":
			total += copyLen(s.prefix, filler, overTag, p)
		default:
			total += keyLen(s.prefix, KeyPause, overTag, p)
		}
	}
	var b strings.Builder
	b.Grow(total)
	ends := make([]int, 0, len(parts))
	for i, p := range parts {
		switch {
		case i < n:
			writeKey(&b, s.prefix, KeyItem, tag, p)
		case i < np:
			writeKey(&b, s.prefix, KeyPause, tag, p)
		case filler != "":
			writeCopy(&b, s.prefix, filler, overTag, p)
		default:
			writeKey(&b, s.prefix, KeyPause, overTag, p)
		}
		ends = append(ends, b.Len())
	}
	all := b.String()
	keys := make([]string, len(parts))
	start := 0
	for i, end := range ends {
		keys[i] = all[start:end]
		start = end
	}
	return keys
}

// readsOver reports whether a decision of req reads its Over pause: it
// has one. On one server's client (a *redis.Client, standalone or behind
// Sentinel) a script may read a key of any tag, and reads the pause; on a
// Redis Cluster's it reads the pause's copy in the slot of req's tag, on a
// Ring's the copy on the shard of req's tag, which PauseOver writes. Any
// other client (a user's own UniversalClient) leaves it out: the request
// is held by its own pauses alone (package doc, "Keys").
func (s *Store) readsOver(req *quota.Request) bool {
	return req.Over.Tag != "" && (s.oneServer || s.copies())
}

// copies reports whether the store's client reads an Over pause through
// copies that PauseOver writes and ResumeOver deletes: on a Redis Cluster
// or a Ring.
func (s *Store) copies() bool { return s.cluster || s.ring }

// decision is a parsed reply of reserve.lua.
type decision struct {
	allowed bool
	now, t  int64
	decider int
	limits  []quota.Status
	// When admitted, per item what cancel.lua and after.lua need: the
	// mark (GCRA: the tat set; window, rolling: the window or bucket start
	// charged) and the prev (GCRA: the stored tat the decision replaced).
	marks, prevs []int64
	// learned is the rate each learning item ran at, in stack order.
	learned []int64
	// lanes is, per GCRA item with classes in stack order, the lane the
	// decision charged (-1 when denied).
	lanes []int64
	// deferred: not admitted, but a Fair item's lane booked the request
	// an appointment (quota.Result.Deferred). fair is, per Fair item in
	// stack order, its tenant's lane as decided.
	deferred bool
	fair     []fairLane
}

var errReply = errors.New("malformed reply")

// packed is one decision's reply of lone.lua: its numbers, 8 bytes each,
// big-endian (struct.pack's "i8" in Redis's Lua).
type packed string

// replyInts appends to buf the numbers of one decision's reply v: an
// array of integers (reserve.lua's) or a packed (lone.lua's). An error
// reply is returned as the error it is.
func replyInts(v any, buf []int64) ([]int64, error) {
	switch v := v.(type) {
	case error: // an error reply for this decision alone
		return nil, v
	case packed:
		for i := 0; i+8 <= len(v); i += 8 {
			buf = append(buf, int64(binary.BigEndian.Uint64([]byte(v[i:i+8]))))
		}
		return buf, nil
	case []any:
		for i, e := range v {
			x, ok := e.(int64)
			if !ok {
				return nil, fmt.Errorf("%w: element %d is %T, want an integer", errReply, i, e)
			}
			buf = append(buf, x)
		}
		return buf, nil
	}
	return nil, fmt.Errorf("%w: %T, want an array", errReply, v)
}

// parseReserve checks and parses a reply of reserve.lua or lone.lua for n
// items, of which x counts the learning ones, the GCRA items with classes
// and the Fair items: every element's type, the count, and the ranges of
// the values.
func parseReserve(v any, n int, ex extra) (decision, error) {
	var buf [32]int64
	vals, err := replyInts(v, buf[:0])
	if err != nil {
		return decision{}, err
	}
	return parseDecision(vals, n, ex)
}

// parseDecision is parseReserve on the numbers of the reply, vals: the
// count and the ranges of the values.
func parseDecision(vals []int64, n int, ex extra) (decision, error) {
	const perItem = 4 // remaining, reset after, mark, prev
	nl, ng, nf := ex.learned, ex.laned, ex.fair
	var d decision
	var err error
	if want := 4 + perItem*n + nl + ng + fairEntries*nf; len(vals) != want {
		return d, fmt.Errorf("%w: %d elements, want %d", errReply, len(vals), want)
	}
	ints := vals[:4]
	if ints[0] != 0 && ints[0] != 1 && (ints[0] != 2 || nf == 0) {
		return d, fmt.Errorf("%w: allowed is %d", errReply, ints[0])
	}
	d.allowed, d.deferred, d.now, d.t = ints[0] == 1, ints[0] == 2, ints[1], ints[2]
	if d.t < d.now {
		return d, fmt.Errorf("%w: slot time %d before now %d", errReply, d.t, d.now)
	}
	if ints[3] < quota.PausedDecider || ints[3] >= int64(n) {
		return d, fmt.Errorf("%w: decider %d of %d limits", errReply, ints[3], n)
	}
	d.decider = int(ints[3])
	d.limits = make([]quota.Status, n)
	if d.allowed {
		mp := make([]int64, 2*n)
		d.marks, d.prevs = mp[:n:n], mp[n:]
	}
	for i := 0; i < n; i++ {
		it := vals[4+perItem*i : 4+perItem*(i+1)]
		if it[0] < 0 || it[1] < 0 {
			return d, fmt.Errorf("%w: limit %d has remaining %d, reset after %dµs", errReply, i, it[0], it[1])
		}
		d.limits[i] = quota.Status{Remaining: it[0], ResetAfter: quota.Micros(it[1])}
		if d.marks != nil {
			d.marks[i], d.prevs[i] = it[2], it[3]
		}
	}
	if nl > 0 {
		d.learned = make([]int64, nl)
		for j := range d.learned {
			e := 4 + perItem*n + j
			x := vals[e]
			if x <= 0 {
				return d, fmt.Errorf("%w: learned rate %d (element %d)", errReply, x, e)
			}
			d.learned[j] = x
		}
	}
	if ng > 0 {
		d.lanes = make([]int64, ng)
		for j := range d.lanes {
			e := 4 + perItem*n + nl + j
			x := vals[e]
			if x < -1 || x >= quota.MaxClasses || (x < 0) == d.allowed {
				return d, fmt.Errorf("%w: lane %d (element %d) of a decision allowed %v", errReply, x, e, d.allowed)
			}
			d.lanes[j] = x
		}
	}
	if nf > 0 {
		if d.fair, err = parseFair(vals[4+perItem*n+nl+ng:], nf, d.allowed); err != nil {
			return d, err
		}
	}
	return d, nil
}
