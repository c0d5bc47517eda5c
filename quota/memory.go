package quota

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// shardCount spreads tags over independent locks. A decision locks one
// shard (all its keys share a tag), so unrelated providers and tenants do
// not contend; 64 is well above the cores of a typical host.
const shardCount = 64

// sweepBatch bounds the reclaim work of one decision: it examines at most
// this many keys of its own shard, and as many of one other shard; each is
// a step along a list and, for an idle key, a map delete.
const sweepBatch = 32

// rebuildMin is the smallest peak at which a shard rebuilds its map: below
// it the memory a map keeps after deletes is too little to matter.
const rebuildMin = 1024

// MemoryOptions configures a MemoryStore. The zero value is ready to use.
type MemoryOptions struct {
	// Clock is the store's clock. Nil means SystemClock.
	Clock Clock
	// SweepInterval is how long the store keeps a key that is back to
	// idle, when decisions are frequent enough. Decisions walk each
	// shard's keys, at a pace that passes every key twice an interval but
	// never more than 32 keys of a shard per decision, and forget the idle
	// ones: no goroutine is needed, and no decision pays for a whole
	// sweep. With fewer decisions a key is kept longer; docs/operations.md
	// has the bounds. Zero (or negative) means one minute.
	SweepInterval time.Duration
}

// MemoryStore is a Store that keeps its state in this process: for a single
// process, for tests, and as the local fallback when Redis is down. It
// decides exactly as the Redis store does. It starts no goroutine and needs
// no closing: decisions do the reclaim work, a bounded amount each.
type MemoryStore struct {
	clock    Clock
	interval int64 // µs; a lap of a shard's ring takes half of it, when decisions allow
	shards   [shardCount]shard
	leaseSeq atomic.Uint64 // the last lease id given out
	// waiters are the requests waiting for a lease; a release wakes them
	// directly (LeaseNotifier).
	waiters LeaseQueues
}

var (
	_ Store         = (*MemoryStore)(nil)
	_ LeaseNotifier = (*MemoryStore)(nil)
)

// A shard holds the state of the tags that hash to it. Its entries are on
// a ring that a cursor walks, a few entries per decision, forgetting the
// idle ones: one lap of the ring examines every entry held when it began,
// since new entries go in just behind the cursor. A Go map never shrinks,
// so when a lap ends with far fewer entries than the map once held, the
// next lap moves the entries it passes to a new map and the old one is
// dropped when the lap ends: memory comes back without any decision
// copying a whole map.
type shard struct {
	mu    sync.Mutex
	keys  map[string]*entry // tag, 0, key → entry
	old   map[string]*entry // while a lap moves entries to keys: the map it replaces
	prev  *entry            // the sweep cursor: prev.next is examined next
	n     int               // entries on the ring
	lapN  int               // entries on the ring when the current lap began
	peak  int               // most entries held since keys was made
	swept int64             // µs; the sweep has examined what was due up to here
	id    int               // the shard's index
	turn  int               // which other shard this shard's next decision sweeps
	buf   []byte            // scratch for building map keys
	ring  entry             // the ring's sentinel; it holds no key
}

// entry is one key's state on its shard's ring.
type entry struct {
	cell
	k    string // the map key
	next *entry
}

// NewMemoryStore returns a MemoryStore.
func NewMemoryStore(opts MemoryOptions) *MemoryStore {
	m := &MemoryStore{clock: opts.Clock, interval: opts.SweepInterval.Microseconds()}
	if m.clock == nil {
		m.clock = SystemClock{}
	}
	if m.interval <= 0 {
		m.interval = time.Minute.Microseconds()
	}
	for i := range m.shards {
		s := &m.shards[i]
		s.keys = make(map[string]*entry)
		s.ring.next = &s.ring
		s.prev = &s.ring
		s.id = i
	}
	return m
}

// Sweep examines every key of every shard once, now, and forgets the idle
// ones. A running store needs no call: its decisions sweep it, a bounded
// amount each. Sweep is for tests that want the result at once; it holds
// each shard's lock for time in proportion to the shard's keys.
func (m *MemoryStore) Sweep() {
	now := m.now()
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		s.sweep(s.n, now)
		s.mu.Unlock()
	}
}

// Len returns the number of keys held: those in use and the idle ones the
// sweep has not reached yet. It is for tests and benchmarks.
func (m *MemoryStore) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += s.n
		s.mu.Unlock()
	}
	return n
}

// reclaim advances the sweep of s as far as is due, and returns the other
// shard this decision sweeps after it has released s (round robin, so that
// shards no decision uses are swept too). The caller holds s.mu.
func (m *MemoryStore) reclaim(s *shard, now int64) *shard {
	s.sweep(s.due(now, m.interval), now)
	other := &m.shards[(s.id+1+s.turn)%shardCount]
	s.turn = (s.turn + 1) % (shardCount - 1)
	return other
}

// sweepOther advances the sweep of s as far as is due, unless s is locked:
// then it is in use, and its user sweeps it. The caller holds no shard's
// lock, so two decisions can never wait for each other's shard. s is nil
// when the decision panicked before reclaim.
func (m *MemoryStore) sweepOther(s *shard, now int64) {
	if s != nil && s.mu.TryLock() {
		s.sweep(s.due(now, m.interval), now)
		s.mu.Unlock()
	}
}

// due returns how many entries the sweep may examine at now: at the pace
// of a lap every half interval, at most sweepBatch. An entry idle at some
// time is examined by the end of the next lap at the latest, so within an
// interval. The pace is set by the entries at the start of the lap (or
// more, if the shard has grown since), so that a lap keeps its pace as it
// deletes. The credit beyond sweepBatch is dropped; a fraction of an entry
// is kept for later. The caller holds s.mu.
func (s *shard) due(now, interval int64) int {
	elapsed := now - s.swept
	if elapsed <= 0 {
		return 0
	}
	step := interval / int64(2*max(s.lapN, s.n, 1)) // µs per entry
	if step == 0 || elapsed/step >= sweepBatch {
		s.swept = now
		return min(s.n, sweepBatch)
	}
	k := elapsed / step
	s.swept += k * step
	return int(min(k, int64(s.n)))
}

// sweep examines up to budget entries at the cursor and forgets those back
// to idle; the caller holds s.mu.
func (s *shard) sweep(budget int, now int64) {
	for ; budget > 0 && s.n > 0; budget-- {
		e := s.prev.next
		if e == &s.ring {
			s.lap()
			s.prev = &s.ring
			e = s.ring.next
		}
		if e.expires() <= now {
			s.prev.next = e.next
			delete(s.keys, e.k)
			delete(s.old, e.k)
			s.n--
			continue
		}
		if s.old != nil {
			s.keys[e.k] = e
		}
		s.prev = e
	}
}

// lap ends a lap of the sweep. If the lap moved the entries to a new map,
// the old map is dropped. Otherwise, when the entries are fewer than a
// quarter of the most the map has held, the next lap moves them to a new
// map: the move costs one map insert per entry left, paid for by the three
// times as many deletes since the map was made.
func (s *shard) lap() {
	s.lapN = s.n
	if s.old != nil {
		s.old = nil
		return
	}
	if s.peak >= rebuildMin && s.n < s.peak/4 {
		s.old, s.keys = s.keys, make(map[string]*entry)
		s.peak = s.n
	}
}

func (m *MemoryStore) now() int64 { return m.clock.Now().UnixMicro() }

func (m *MemoryStore) shard(tag string) *shard {
	// FNV-1a, inline so that choosing a shard allocates nothing.
	h := uint32(2166136261)
	for i := 0; i < len(tag); i++ {
		h ^= uint32(tag[i])
		h *= 16777619
	}
	return &m.shards[h%shardCount]
}

// overPaused returns the paused-until of the pause key in tag (a
// request's Over; none when tag is ""), 0 when it has none, when tag is on
// another shard than s: read under that shard's lock before the decision
// takes s's, so that no decision holds two shard locks. A pause only
// starts, lengthens or is lifted, so a read a moment before the decision
// holds the request back as one at the decision would have, but for a
// pause set or lifted in that moment.
func (m *MemoryStore) overPaused(s *shard, tag, key string) int64 {
	if tag == "" {
		return 0
	}
	o := m.shard(tag)
	if o == s {
		return 0 // read with the request's own pauses
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if e := o.lookup(o.ref(tag, key)); e != nil {
		return e.until
	}
	return 0
}

// ref builds the map key of key in tag in s.buf and returns it; a tag (a
// SafeKey) holds no 0 byte. The caller holds s.mu.
func (s *shard) ref(tag, key string) []byte {
	s.buf = append(append(append(s.buf[:0], tag...), 0), key...)
	return s.buf
}

// lookup returns the entry of map key k, or nil; the caller holds s.mu.
func (s *shard) lookup(k []byte) *entry {
	if e := s.keys[string(k)]; e != nil {
		return e
	}
	return s.old[string(k)]
}

// cell returns the state of key in tag, creating it; state that is back to
// idle is reset, so an expired key behaves exactly like a missing one.
func (s *shard) cell(tag, key string, now int64) *cell {
	k := s.ref(tag, key)
	e := s.lookup(k)
	if e == nil {
		e = &entry{k: string(k)}
		s.keys[e.k] = e
		// Just behind the cursor: the current lap does not reach it.
		e.next = s.prev.next
		s.prev.next = e
		s.prev = e
		s.n++
		s.peak = max(s.peak, s.n)
		return &e.cell
	}
	c := &e.cell
	if c.expires() <= now {
		*c = cell{wins: c.wins[:0]}
	}
	return c
}

// Reserve decides req; see Store.
func (m *MemoryStore) Reserve(ctx context.Context, req *Request) (*Reservation, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tag := SafeKey(req.Tag)
	var buf [8]item
	items := buf[:0]
	if len(req.Items) > len(buf) {
		items = make([]item, 0, len(req.Items))
	}
	items = items[:len(req.Items)]

	s := m.shard(tag)
	overTag := ""
	if req.Over.Tag != "" {
		overTag = SafeKey(req.Over.Tag)
	}
	paused := m.overPaused(s, overTag, req.Over.Key)
	var now int64
	var other *shard
	defer func() { m.sweepOther(other, now) }() // after the unlock below
	s.mu.Lock()
	defer s.mu.Unlock()
	now = m.now()
	other = m.reclaim(s, now)
	for _, p := range req.Pauses {
		if e := s.lookup(s.ref(tag, p)); e != nil {
			paused = max(paused, e.until)
		}
	}
	if overTag != "" && m.shard(overTag) == s {
		if e := s.lookup(s.ref(overTag, req.Over.Key)); e != nil {
			paused = max(paused, e.until)
		}
	}
	for i := range req.Items {
		items[i].init(req.Items[i].Limit, s.cell(tag, req.Items[i].Key, now), req.CostOf(i), req.Class, now)
		if req.Items[i].Limit.Fair {
			items[i].initFair(s, tag, req.Items[i].Key, req.Share, req.Appointment, now)
		}
	}
	if lead := req.LeadMicros(); lead > 0 {
		leadAll(items, now+lead)
	}
	t, decider, ok := decide(items, now, paused)
	res := Result{Decider: decider, Limits: make([]Status, len(items))}
	full, soonest := fullLease(items)
	res.Allowed = full < 0 && ok && t-now <= req.MaxWaitMicros()
	if !ok && full < 0 && hasFair(items) { // a fair item could not go near now
		t, res.Decider, ok = deferFair(items, now, paused)
		if res.Deferred = ok && t-now <= req.MaxWaitMicros(); res.Deferred {
			bookFair(items, now)
		} else {
			t, res.Decider, _ = denyFair(items, now, paused)
		}
	}
	var ops ReservationOps
	var b *booking
	if res.Allowed {
		res.Wait = Micros(t - now)
		b = m.book(tag, req, t)
		if hasLease(req) {
			b.lease = m.leaseSeq.Add(1)
			ops.Release, ops.Renew = b.release, b.renew
		}
		charge(items, now, t, b.marks, b.lease)
		if hasFair(items) {
			chargeFair(items, now, t)
			b.fair = fairMarks(items)
		}
		ops.Sync, ops.Settle = b.sync, b.settle
		if t > now {
			ops.Cancel = b.cancel
		}
	} else {
		if full >= 0 {
			res.Decider, t = full, max(t, soonest)
		}
		res.RetryAfter = Micros(t - now)
	}
	for i := range items {
		res.Limits[i] = items[i].status(now, t, res.Allowed)
		if r := res.Limits[i].Rate; r != 0 && res.Allowed { // Settle and Sync work at it
			if b.rates == nil {
				b.rates = make([]int64, len(items))
			}
			b.rates[i] = r
		}
	}
	return NewReservation(res, ops), nil
}

// booking is what acts on an admitted reservation afterwards: its own
// copy of the stack (the caller may reuse req), each item's Cost set to
// what it was charged, its slot t and its marks. A small stack lives in
// the booking itself: one allocation.
type booking struct {
	m     *MemoryStore
	tag   string
	t     int64
	lease uint64 // the lease id, when the stack has Concurrency limits
	stack []Item
	marks []mark
	// rates are the rates the learning limits ran at (Status.Rate), nil
	// when the stack has none.
	rates []int64
	// fair is the lane charges of a stack with a Fair item, nil for any
	// other.
	fair  *fairBooking
	items [4]Item
	mks   [4]mark
}

// book returns the booking of a reservation of req at slot t, its marks
// yet to be filled by charge.
func (m *MemoryStore) book(tag string, req *Request, t int64) *booking {
	n := len(req.Items)
	b := &booking{m: m, tag: tag, t: t}
	if n <= len(b.items) {
		b.stack, b.marks = b.items[:0], b.mks[:n:n]
	} else {
		b.stack, b.marks = make([]Item, 0, n), make([]mark, n)
	}
	b.stack = append(b.stack, req.Items...)
	for i := range b.stack {
		b.stack[i].Cost = req.CostOf(i)
	}
	return b
}

// hasLease reports whether req's stack has a Concurrency limit.
func hasLease(req *Request) bool {
	for i := range req.Items {
		if req.Items[i].Limit.Kind == Concurrency {
			return true
		}
	}
	return false
}

// cells returns an item per limit of the booking's stack, on the state of
// shard s; the caller holds s.mu.
func (b *booking) cells(s *shard, now int64) []item {
	items := make([]item, len(b.stack))
	for i := range b.stack {
		items[i].lim, items[i].cost = b.limit(i, 0), b.stack[i].Cost
		items[i].c = s.cell(b.tag, b.stack[i].Key, now)
	}
	return items
}

// cancel is the reservation's Cancel. Leases it gives back wake their
// waiters, as a release does.
func (b *booking) cancel(context.Context) error {
	s := b.m.shard(b.tag)
	s.mu.Lock()
	now := b.m.now()
	items := b.cells(s, now)
	freed := b.held(items, now)
	refund(items, now, b.t, b.marks, b.lease)
	if b.fair != nil && now < b.t {
		for i, fm := range b.fair.lanes {
			if fm.charged {
				s.cell(b.tag, fairLaneKey(b.stack[i].Key, b.fair.part), now).gcraState.cancel(fm.mark, now)
			}
		}
	}
	s.mu.Unlock()
	b.wake(freed)
	return nil
}

// held returns the keys of the Concurrency items whose lease the booking
// still holds at now (live: neither released nor expired); the caller
// holds the shard's lock.
func (b *booking) held(items []item, now int64) []string {
	var keys []string
	for i := range items {
		if items[i].lim.Kind != Concurrency {
			continue
		}
		if x, ok := items[i].c.leases[b.lease]; ok && x > now {
			keys = append(keys, b.stack[i].Key)
		}
	}
	return keys
}

// wake wakes a waiter for each of the keys whose lease was given back.
func (b *booking) wake(keys []string) {
	for _, k := range keys {
		b.m.waiters.Wake(waiterID(b.tag, k))
	}
}

// waiterID names the Concurrency key key of tag (already SafeKey'd) in
// the store's LeaseQueues.
func waiterID(tag, key string) string { return tag + "\x00" + key }

// WatchLeases queues a waiter for a lease of key in tag; see
// LeaseNotifier. A release or a Cancel in this store wakes it.
func (m *MemoryStore) WatchLeases(_ context.Context, tag, key string) (*LeaseWaiter, error) {
	return m.waiters.Join(waiterID(SafeKey(tag), key), nil), nil
}

// limit returns the limit of item i as the booking works at it: a
// learning limit at the rate stated, if any (a vendor's remaining counts
// in its bucket as it states it), else at the rate the decision ran it.
func (b *booking) limit(i int, stated int64) *Limit {
	l := b.stack[i].Limit
	if stated == 0 && b.rates != nil {
		stated = b.rates[i]
	}
	return l.Learned(stated)
}

// sync is the reservation's Sync.
func (b *booking) sync(ctx context.Context, obs []Observed) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := b.m.shard(b.tag)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := b.m.now()
	for _, o := range obs {
		it := &b.stack[o.Item]
		c := s.cell(b.tag, it.Key, now)
		if it.Limit.Learn && o.Limit > 0 {
			c.learn(it.Limit, o.Limit, b.t, now)
		}
		if !o.LimitOnly {
			drain(b.limit(o.Item, o.Limit), c, b.marks[o.Item], o.Remaining, now)
		}
	}
	return nil
}

// settle is the reservation's Settle.
func (b *booking) settle(_ context.Context, actual []int64) error {
	s := b.m.shard(b.tag)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := b.m.now()
	settle(b.cells(s, now), now, b.marks, actual)
	if b.fair != nil {
		b.settleLanes(s, now, actual)
	}
	return nil
}

// release is the reservation's Release.
func (b *booking) release(context.Context) error { return b.leases(false) }

// renew is the reservation's Renew.
func (b *booking) renew(context.Context) error { return b.leases(true) }

// leases releases (renew false) or renews the booking's lease in every
// Concurrency limit of its stack. A lease released while still held wakes
// a waiter of its key.
func (b *booking) leases(renew bool) error {
	var freed []string
	defer func() { b.wake(freed) }() // after the unlock below
	s := b.m.shard(b.tag)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := b.m.now()
	lost := false
	for _, it := range b.stack {
		if it.Limit.Kind != Concurrency {
			continue
		}
		c := s.cell(b.tag, it.Key, now)
		x, held := c.leases[b.lease]
		switch {
		case !held:
			lost = true
		case !renew || x <= now: // released, or expired: gone either way
			delete(c.leases, b.lease)
			if !renew && x > now {
				freed = append(freed, it.Key)
			}
			lost = x <= now
		default:
			c.leases[b.lease] = max(x, now+it.Limit.Period.Microseconds())
		}
	}
	if renew && lost {
		return ErrLeaseLost
	}
	return nil
}

// Pause holds back requests naming key in tag for d; see Store.
func (m *MemoryStore) Pause(ctx context.Context, tag, key string, d time.Duration) error {
	if tag == "" || key == "" {
		return errInvalidPause
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	tag = SafeKey(tag)
	s := m.shard(tag)
	var now int64
	var other *shard
	defer func() { m.sweepOther(other, now) }() // after the unlock below
	s.mu.Lock()
	defer s.mu.Unlock()
	now = m.now()
	other = m.reclaim(s, now)
	c := s.cell(tag, key, now)
	c.until = max(c.until, now+d.Microseconds())
	return nil
}

var _ PauseNotifier = (*MemoryStore)(nil)

// WatchPauses does nothing: every pause of a MemoryStore is set in this
// process, so PausedFor knows it at once.
func (m *MemoryStore) WatchPauses(context.Context) (stop func(), err error) {
	return func() {}, nil
}

// PausedFor returns how much longer the pause key in tag holds requests
// back; see PauseNotifier.
func (m *MemoryStore) PausedFor(tag, key string) time.Duration {
	tag = SafeKey(tag)
	s := m.shard(tag)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.lookup(s.ref(tag, key))
	if e == nil {
		return 0
	}
	return max(time.Duration(e.cell.until-m.now())*time.Microsecond, 0)
}

var errInvalidPause = fmt.Errorf("%w pause: empty tag or key", ErrInvalid)
