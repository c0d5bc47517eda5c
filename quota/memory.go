package quota

import (
	"context"
	"fmt"
	"sync"
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
	// SweepInterval is how often a background goroutine forgets state that
	// is back to idle. Zero means one minute; negative disables the
	// goroutine (idle state is then forgotten only when its key is used).
	SweepInterval time.Duration
}

// MemoryStore is a Store that keeps its state in this process: for a single
// process, for tests, and as the local fallback when Redis is down. It
// decides exactly as the Redis store does. Call Close when done with it.
type MemoryStore struct {
	clock  Clock
	shards [shardCount]shard
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

var _ Store = (*MemoryStore)(nil)

type shard struct {
	mu   sync.Mutex
	tags map[string]map[string]*cell
	_    [40]byte // keep shards on separate cache lines
}

// NewMemoryStore returns a MemoryStore.
func NewMemoryStore(opts MemoryOptions) *MemoryStore {
	m := &MemoryStore{clock: opts.Clock, stop: make(chan struct{}), done: make(chan struct{})}
	if m.clock == nil {
		m.clock = SystemClock{}
	}
	for i := range m.shards {
		m.shards[i].tags = make(map[string]map[string]*cell)
	}
	interval := opts.SweepInterval
	if interval == 0 {
		interval = time.Minute
	}
	if interval < 0 {
		close(m.done)
		return m
	}
	go m.sweepEvery(interval)
	return m
}

// Close stops the background sweeper. The store stays usable.
func (m *MemoryStore) Close() error {
	m.once.Do(func() { close(m.stop) })
	<-m.done
	return nil
}

func (m *MemoryStore) sweepEvery(interval time.Duration) {
	defer close(m.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.Sweep()
		}
	}
}

// Sweep forgets every key whose state is back to idle. The background
// sweeper calls it; tests and callers that disable the sweeper may too.
func (m *MemoryStore) Sweep() {
	now := m.now()
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
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
		s.mu.Unlock()
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
	tag := SafePart(req.Tag)
	cost := req.cost()
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
	var paused int64
	for _, p := range req.Pauses {
		if cells := s.tags[tag]; cells != nil {
			if c := cells[p]; c != nil {
				paused = max(paused, c.until)
			}
		}
	}
	for i := range req.Items {
		items[i].init(req.Items[i].Limit, s.cell(tag, req.Items[i].Key, now), now)
	}
	t, decider, ok := decide(items, now, cost, paused)
	res := Result{Decider: decider, Limits: make([]Status, len(items))}
	res.Allowed = ok && t-now <= req.MaxWait.Microseconds()
	var cancel func(context.Context) error
	if res.Allowed {
		res.Wait = time.Duration(t-now) * time.Microsecond
		var marks []int64
		if t > now {
			marks = make([]int64, len(items))
			cancel = m.canceller(tag, req, cost, t, marks)
		}
		charge(items, now, t, cost, marks)
	} else {
		res.RetryAfter = time.Duration(t-now) * time.Microsecond
	}
	for i := range items {
		res.Limits[i] = items[i].status(now, t, res.Allowed)
	}
	return NewReservation(res, cancel), nil
}

// canceller returns the Cancel of a reservation at slot t. It keeps its own
// copy of the stack, since the caller may reuse req.
func (m *MemoryStore) canceller(tag string, req *Request, cost, t int64, marks []int64) func(context.Context) error {
	stack := append([]Item(nil), req.Items...)
	return func(context.Context) error {
		s := m.shard(tag)
		s.mu.Lock()
		defer s.mu.Unlock()
		now := m.now()
		items := make([]item, len(stack))
		for i := range stack {
			items[i].lim = stack[i].Limit
			items[i].c = s.cell(tag, stack[i].Key, now)
			if items[i].lim.Kind == GCRA {
				items[i].T = items[i].lim.Interval()
			}
		}
		refund(items, now, t, cost, marks)
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
	tag = SafePart(tag)
	s := m.shard(tag)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := m.now()
	c := s.cell(tag, key, now)
	c.until = max(c.until, now+d.Microseconds())
	return nil
}

var errInvalidPause = fmt.Errorf("%w pause: empty tag or key", ErrInvalid)
