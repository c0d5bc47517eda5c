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

// MemoryOptions configures a MemoryStore. The zero value is ready to use.
type MemoryOptions struct {
	// Clock is the store's clock. Nil means SystemClock.
	Clock Clock
	// SweepInterval is how often the store forgets state that is back to
	// idle. Each shard is swept when a decision uses it and the interval
	// has passed since its last sweep, so no goroutine is needed and a
	// shard's memory is bounded by the keys used within one interval.
	// Zero (or negative) means one minute.
	SweepInterval time.Duration
}

// MemoryStore is a Store that keeps its state in this process: for a single
// process, for tests, and as the local fallback when Redis is down. It
// decides exactly as the Redis store does. It starts no goroutine and needs
// no closing.
type MemoryStore struct {
	clock    Clock
	interval int64 // µs between sweeps of a shard
	shards   [shardCount]shard
	leaseSeq atomic.Uint64 // the last lease id given out
}

var _ Store = (*MemoryStore)(nil)

type shard struct {
	mu        sync.Mutex
	tags      map[string]map[string]*cell
	nextSweep int64    // µs; the shard is swept by the first use after it
	_         [32]byte // keep shards on separate cache lines
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
		m.shards[i].tags = make(map[string]map[string]*cell)
	}
	return m
}

// Sweep forgets every key whose state is back to idle, in every shard now,
// instead of shard by shard as they are used.
func (m *MemoryStore) Sweep() {
	now := m.now()
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		s.sweep(now)
		s.mu.Unlock()
	}
}

// sweep forgets the shard's idle keys; the caller holds s.mu.
func (s *shard) sweep(now int64) {
	for tag, cells := range s.tags {
		for k, c := range cells {
			if c.expires() <= now {
				delete(cells, k)
			}
		}
		if len(cells) == 0 {
			delete(s.tags, tag)
		}
	}
}

// sweepIfDue sweeps the shard when its interval has passed; the caller
// holds s.mu.
func (s *shard) sweepIfDue(now, interval int64) {
	if now >= s.nextSweep {
		s.sweep(now)
		s.nextSweep = now + interval
	}
}

// Len returns the number of keys held: what a sweep has not reclaimed.
func (m *MemoryStore) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for _, cells := range s.tags {
			n += len(cells)
		}
		s.mu.Unlock()
	}
	return n
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

// cell returns the state of key in tag, creating it; state that is back to
// idle is reset, so an expired key behaves exactly like a missing one.
func (s *shard) cell(tag, key string, now int64) *cell {
	cells := s.tags[tag]
	if cells == nil {
		cells = make(map[string]*cell)
		s.tags[tag] = cells
	}
	c := cells[key]
	if c == nil {
		c = &cell{}
		cells[key] = c
	} else if c.expires() <= now {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	now := m.now()
	s.sweepIfDue(now, m.interval)
	var paused int64
	for _, p := range req.Pauses {
		if cells := s.tags[tag]; cells != nil {
			if c := cells[p]; c != nil {
				paused = max(paused, c.until)
			}
		}
	}
	for i := range req.Items {
		items[i].init(req.Items[i].Limit, s.cell(tag, req.Items[i].Key, now), req.CostOf(i), now)
	}
	t, decider, ok := decide(items, now, paused)
	res := Result{Decider: decider, Limits: make([]Status, len(items))}
	full, soonest := fullLease(items)
	res.Allowed = full < 0 && ok && t-now <= req.MaxWaitMicros()
	var ops ReservationOps
	if res.Allowed {
		res.Wait = Micros(t - now)
		marks := make([]mark, len(items))
		var id uint64
		if hasLease(req) {
			id = m.leaseSeq.Add(1)
			ops.Release, ops.Renew = m.releaser(tag, req, id, false), m.releaser(tag, req, id, true)
		}
		ops.Settle = m.settler(tag, req, marks)
		if t > now {
			ops.Cancel = m.canceller(tag, req, t, marks, id)
		}
		charge(items, now, t, marks, id)
	} else {
		if full >= 0 {
			res.Decider, t = full, max(t, soonest)
		}
		res.RetryAfter = Micros(t - now)
	}
	for i := range items {
		res.Limits[i] = items[i].status(now, t, res.Allowed)
	}
	return NewReservation(res, ops), nil
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

// items returns an item per limit of stack, on the state of shard s; the
// caller holds s.mu.
func (s *shard) items(tag string, stack []Item, costs []int64, now int64) []item {
	items := make([]item, len(stack))
	for i := range stack {
		items[i].lim, items[i].cost = stack[i].Limit, costs[i]
		items[i].c = s.cell(tag, stack[i].Key, now)
	}
	return items
}

// canceller returns the Cancel of a reservation at slot t that holds
// lease id (0: none). It keeps its own copy of the stack, since the caller
// may reuse req.
func (m *MemoryStore) canceller(tag string, req *Request, t int64, marks []mark, id uint64) func(context.Context) error {
	stack := append([]Item(nil), req.Items...)
	costs := make([]int64, len(stack))
	for i := range stack {
		costs[i] = req.CostOf(i)
	}
	return func(context.Context) error {
		s := m.shard(tag)
		s.mu.Lock()
		defer s.mu.Unlock()
		now := m.now()
		refund(s.items(tag, stack, costs, now), now, t, marks, id)
		return nil
	}
}

// settler returns the Settle of a reservation charged as marks says.
func (m *MemoryStore) settler(tag string, req *Request, marks []mark) func(context.Context, []int64) error {
	stack := append([]Item(nil), req.Items...)
	costs := make([]int64, len(stack))
	for i := range stack {
		costs[i] = req.CostOf(i)
	}
	return func(_ context.Context, actual []int64) error {
		s := m.shard(tag)
		s.mu.Lock()
		defer s.mu.Unlock()
		now := m.now()
		settle(s.items(tag, stack, costs, now), now, marks, actual)
		return nil
	}
}

// releaser returns the Release (renew false) or the Renew of lease id,
// held in every Concurrency limit of req.
func (m *MemoryStore) releaser(tag string, req *Request, id uint64, renew bool) func(context.Context) error {
	var stack []Item
	for _, it := range req.Items {
		if it.Limit.Kind == Concurrency {
			stack = append(stack, it)
		}
	}
	return func(context.Context) error {
		s := m.shard(tag)
		s.mu.Lock()
		defer s.mu.Unlock()
		now := m.now()
		for _, it := range stack {
			c := s.cell(tag, it.Key, now)
			x, held := c.leases[id]
			switch {
			case !held:
			case !renew || x <= now: // released, or expired: gone either way
				delete(c.leases, id)
			default:
				c.leases[id] = max(x, now+it.Limit.Period.Microseconds())
			}
		}
		return nil
	}
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
	s.mu.Lock()
	defer s.mu.Unlock()
	now := m.now()
	s.sweepIfDue(now, m.interval)
	c := s.cell(tag, key, now)
	c.until = max(c.until, now+d.Microseconds())
	return nil
}

var errInvalidPause = fmt.Errorf("%w pause: empty tag or key", ErrInvalid)
