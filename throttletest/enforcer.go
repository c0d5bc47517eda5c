package throttletest

import (
	"math"
	"slices"
	"time"
)

type kind uint8

const (
	unlimited kind = iota
	gcra
	window
	leaky
	concurrent
	rolling
)

// An Enforcer is the rule a fake vendor enforces on its own, as a real
// vendor does whatever its clients believe. It is a description: each
// Vendor and Ledger (and each scope of one) keeps its own state. The zero
// Enforcer admits everything.
type Enforcer struct {
	kind   kind
	n      int64         // gcra: rate; window, concurrent, rolling: n; leaky: size
	period time.Duration // gcra: period; window, rolling: length; concurrent: serving time
	burst  int64         // gcra
	leak   float64       // leaky: per second
	shared bool          // one state for every scope
	costs  bool          // charges a request's cost, not one
	all    []Enforcer    // a stack (All): its members, none a stack
}

// GCRA returns the generic cell rate algorithm at rate per period with
// burst: from idle, burst requests at once, then one every period/rate.
// It panics unless rate, period and burst are positive.
func GCRA(rate int, period time.Duration, burst int) Enforcer {
	if rate <= 0 || period <= 0 || burst <= 0 || period/time.Duration(rate) <= 0 {
		panic("throttletest: GCRA needs a positive rate, period and burst, and period/rate of at least 1ns")
	}
	return Enforcer{kind: gcra, n: int64(rate), period: period, burst: int64(burst)}
}

// Window returns a fixed window of n requests per length. Windows start
// at multiples of length since the Unix epoch, so a minute window starts
// on the minute, like a vendor's calendar window: Window(n, 24*time.Hour)
// is a quota per UTC calendar day. It panics unless n and length are
// positive.
func Window(n int, length time.Duration) Enforcer {
	if n <= 0 || length <= 0 {
		panic("throttletest: Window needs a positive n and length")
	}
	return Enforcer{kind: window, n: int64(n), period: length}
}

// LeakyBucket returns a bucket of size that leaks leakPerSecond
// continuously (Shopify REST: LeakyBucket(40, 2)). Each request adds one;
// it is admitted while the level after it is at most size. It panics
// unless size and leakPerSecond are positive.
func LeakyBucket(size int, leakPerSecond float64) Enforcer {
	if size <= 0 || !(leakPerSecond > 0) || math.IsInf(leakPerSecond, 0) {
		panic("throttletest: LeakyBucket needs a positive size and leak")
	}
	return Enforcer{kind: leaky, n: int64(size), leak: leakPerSecond}
}

// Concurrent returns a cap of n requests in flight at once, each served
// in serve (a model API's concurrent streams, GitHub's 100 concurrent
// requests). A Vendor holds an admitted request for serve (on the real
// clock) before its Handler answers, and counts it in flight from its
// arrival until its response is written; a Ledger counts it from its
// admission for serve. A refused request is told to retry when the first
// place frees, or in a second while every place is held by a request
// still being answered. It panics unless n is positive and serve is not
// negative.
func Concurrent(n int, serve time.Duration) Enforcer {
	if n <= 0 || serve < 0 {
		panic("throttletest: Concurrent needs a positive n and a serving time of at least 0")
	}
	return Enforcer{kind: concurrent, n: int64(n), period: serve}
}

// Rolling returns a limit of n requests in any trailing length, exactly:
// a sliding log of the admitted arrivals (Salesforce's rolling 24-hour
// API quota). A refused request is told to retry when the oldest arrival
// that keeps it out leaves the log. It panics unless n and length are
// positive.
func Rolling(n int, length time.Duration) Enforcer {
	if n <= 0 || length <= 0 {
		panic("throttletest: Rolling needs a positive n and length")
	}
	return Enforcer{kind: rolling, n: int64(n), period: length}
}

// All returns a stack of enforcers, as a vendor enforces several limits at
// once (100 a second and 10,000 a day): a request is admitted when every
// one admits it, and then charged to every one; a refused one is told to
// retry after the longest wait any of them asks. The counters a vendor
// advertises (Options.Counters, the Signal's headers) are the first
// enforcer's. Zero Enforcers are left out; stacks in es are flattened.
func All(es ...Enforcer) Enforcer {
	var all []Enforcer
	for _, e := range es {
		all = append(all, e.members()...)
	}
	switch len(all) {
	case 0:
		return Enforcer{}
	case 1:
		return all[0]
	}
	return Enforcer{all: all}
}

// Shared returns e with one state for every scope of a vendor with
// Options.ScopeHeader: an account-wide limit beside per-scope ones, as in
// All(GCRA(10, time.Second, 10), Window(2000, 24*time.Hour).Shared()).
// On a stack, every member is shared.
func (e Enforcer) Shared() Enforcer {
	return e.each(func(m *Enforcer) { m.shared = true })
}

// Costs returns e charging each request its cost (Options.Cost, or the
// cost given to a Ledger) rather than one: a model API's tokens per
// minute, beside its requests per minute. Only a GCRA or a Window
// charges costs; the other kinds count requests whatever. On a stack,
// every member charges costs.
func (e Enforcer) Costs() Enforcer {
	return e.each(func(m *Enforcer) { m.costs = m.kind == gcra || m.kind == window })
}

// each returns e with f applied to it, or to every member of a stack.
func (e Enforcer) each(f func(*Enforcer)) Enforcer {
	if e.all == nil {
		f(&e)
		return e
	}
	all := slices.Clone(e.all)
	for i := range all {
		f(&all[i])
	}
	return Enforcer{all: all}
}

// members returns the enforcers e stands for: its stack's, itself, or none.
func (e Enforcer) members() []Enforcer {
	switch {
	case e.all != nil:
		return e.all
	case e.kind == unlimited:
		return nil
	}
	return []Enforcer{e}
}

// nano is one request in the leaky bucket's fixed-point level.
const nano = int64(time.Second)

// open is the end of a place in a Concurrent limit that a Vendor is still
// answering: not known yet.
const open = int64(math.MaxInt64)

// state is one scope's state of one enforcer. Times are ns since the Unix
// epoch.
type state struct {
	tat    int64           // gcra: theoretical arrival time
	counts map[int64]int64 // window: charged per window index
	level  int64           // leaky: in 1e-9 requests
	last   int64           // leaky: when level was computed (0: never)
	// log is, for a rolling limit, the admitted arrivals still in the
	// trailing length, sorted; for a concurrent one, when each place held
	// frees (open while a Vendor still answers its request).
	log []int64
}

// decision is what a Vendor decided about one request, with the counters
// it advertises (its first limit's).
type decision struct {
	ok         bool
	retryAfter time.Duration // when !ok: until the request would fit
	counters
}

// counters are what a limit holds at a time: the capacity it advertises
// (0: no limit), what is left and used of it, and when it is back to full
// capacity (zero: not known).
type counters struct {
	limit, remaining, used int64
	reset                  time.Time
}

// admit reports whether e admits a request of cost c at now, charging
// nothing, and if not, how long until it would. It drops state that now
// has made stale.
func (e *Enforcer) admit(s *state, now, c int64) (bool, time.Duration) {
	c = e.cost(c)
	var wait int64
	switch e.kind {
	case gcra:
		t := int64(e.period) / e.n
		wait = max(s.tat, now) + c*t - e.burst*t - now
	case window:
		idx := floorDiv(now, int64(e.period))
		if s.counts[idx]+c > e.n {
			wait = (idx+1)*int64(e.period) - now
		}
	case leaky:
		if over := s.leveled(e, now) + nano - e.n*nano; over > 0 {
			wait = int64(math.Ceil(float64(over) / e.leak))
		}
	case concurrent:
		s.log = slices.DeleteFunc(s.log, func(end int64) bool { return end <= now })
		if int64(len(s.log)) >= e.n {
			wait = int64(time.Second)
			if first := slices.Min(s.log); first != open {
				wait = first - now
			}
		}
	case rolling:
		i, _ := slices.BinarySearch(s.log, now-int64(e.period)+1)
		s.log = s.log[i:]
		if int64(len(s.log)) >= e.n {
			wait = s.log[int64(len(s.log))-e.n] + int64(e.period) - now
		}
	}
	if wait > 0 {
		return false, time.Duration(wait)
	}
	return true, 0
}

// counters returns e's counters in s at now.
func (e *Enforcer) counters(s *state, now int64) counters {
	c := counters{limit: e.n}
	switch e.kind {
	case unlimited:
		return counters{}
	case gcra:
		t := int64(e.period) / e.n
		tat := max(s.tat, now)
		c.limit = e.burst
		c.remaining = min(max((e.burst*t-(tat-now))/t, 0), e.burst)
		c.used = e.burst - c.remaining
		c.reset = time.Unix(0, tat)
		return c
	case window:
		idx := floorDiv(now, int64(e.period))
		c.used = s.counts[idx]
		c.reset = time.Unix(0, (idx+1)*int64(e.period))
	case leaky:
		level := s.leveled(e, now)
		c.used = (level + nano - 1) / nano
		c.remaining = (e.n*nano - level) / nano
		c.reset = time.Unix(0, now+int64(math.Ceil(float64(level)/e.leak)))
		return c
	case concurrent, rolling:
		c.used = int64(len(s.log))
		if e.kind == rolling && len(s.log) > 0 {
			c.reset = time.Unix(0, max(s.log[len(s.log)-1], now)+int64(e.period))
		}
	}
	c.remaining = max(e.n-c.used, 0)
	return c
}

// charge counts a request of cost c at now, whatever e would say of it. A
// concurrent limit holds its place until end.
func (e *Enforcer) charge(s *state, now, c, end int64) {
	c = e.cost(c)
	switch e.kind {
	case gcra:
		s.tat = max(s.tat, now) + c*(int64(e.period)/e.n)
	case window:
		if s.counts == nil {
			s.counts = map[int64]int64{}
		}
		s.counts[floorDiv(now, int64(e.period))] += c
	case leaky:
		s.level = s.leveled(e, now) + nano
		s.last = max(s.last, now)
	case concurrent:
		s.log = append(s.log, end)
	case rolling:
		i, _ := slices.BinarySearch(s.log, now)
		s.log = slices.Insert(s.log, i, now)
	}
}

// cost is what e charges a request of cost c.
func (e *Enforcer) cost(c int64) int64 {
	if e.costs {
		return c
	}
	return 1
}

// leveled returns the bucket's level at now: what it held at s.last, less
// what leaked since (a time before s.last leaks nothing).
func (s *state) leveled(e *Enforcer, now int64) int64 {
	if s.last == 0 || now <= s.last {
		return s.level
	}
	drained := float64(now-s.last) * e.leak // 1e-9 requests
	if drained >= float64(s.level) {
		return 0
	}
	return s.level - int64(drained)
}

// limit is the capacity the enforcer advertises: a GCRA's burst, the n of
// the others; 0 without a limit.
func (e *Enforcer) limit() int64 {
	switch e.kind {
	case unlimited:
		return 0
	case gcra:
		return e.burst
	}
	return e.n
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// A Ledger is a vendor's enforcement without its server: the state of an
// Enforcer (a stack of them, per scope) at times the caller gives, in any
// order. A Vendor keeps one; a test or a load harness keeps its own to
// ask what the vendor would admit, e.g. how much of an offered load a
// perfect client would have had served. A Ledger is not safe for
// concurrent use.
type Ledger struct {
	es     []Enforcer
	states []map[string]*state
	// live is true in a Vendor: a concurrent limit's places are held until
	// release, not for the serving time.
	live bool
}

// NewLedger returns the ledger of e, every limit idle.
func NewLedger(e Enforcer) *Ledger {
	l := &Ledger{es: e.members()}
	l.states = make([]map[string]*state, len(l.es))
	for i := range l.states {
		l.states[i] = map[string]*state{}
	}
	return l
}

// Admit decides a request of scope and cost (below 1 counts as 1) at at:
// when every limit admits it, it charges it and returns true; otherwise
// it charges nothing and returns how long until it would fit.
func (l *Ledger) Admit(at time.Time, scope string, cost int64) (bool, time.Duration) {
	d := l.decide(at.UnixNano(), scope, max(cost, 1))
	return d.ok, d.retryAfter
}

// Earliest returns the first time from at on when every limit admits a
// request of scope and cost (below 1 counts as 1), charging nothing.
func (l *Ledger) Earliest(at time.Time, scope string, cost int64) time.Time {
	t, c := at.UnixNano(), max(cost, 1)
	// Each limit's wait moves t to where it fits; another may then ask for
	// more. A few rounds settle any stack a vendor publishes.
	for round := 0; round < 16; round++ {
		moved := false
		for i := range l.es {
			if ok, wait := l.es[i].admit(l.state(i, scope), t, c); !ok {
				t, moved = t+int64(wait), true
			}
		}
		if !moved {
			break
		}
	}
	return time.Unix(0, t)
}

// Charge counts a request of scope and cost (below 1 counts as 1) at at
// in every limit, whatever they would say of it, as traffic the vendor
// served regardless (a fixed window may go over its n).
func (l *Ledger) Charge(at time.Time, scope string, cost int64) {
	now := at.UnixNano()
	for i := range l.es {
		l.es[i].charge(l.state(i, scope), now, max(cost, 1), l.end(i, now))
	}
}

// decide admits and charges a request of cost c at now, or returns how
// long until it would fit, with the first limit's counters after it.
func (l *Ledger) decide(now int64, scope string, c int64) decision {
	d := decision{ok: true}
	for i := range l.es {
		if ok, wait := l.es[i].admit(l.state(i, scope), now, c); !ok {
			d.ok, d.retryAfter = false, max(d.retryAfter, wait)
		}
	}
	if d.ok {
		for i := range l.es {
			l.es[i].charge(l.state(i, scope), now, c, l.end(i, now))
		}
	}
	if len(l.es) > 0 {
		d.counters = l.es[0].counters(l.state(0, scope), now)
	}
	return d
}

// limit is the capacity the first limit advertises; 0 without a limit.
func (l *Ledger) limit() int64 {
	if len(l.es) == 0 {
		return 0
	}
	return l.es[0].limit()
}

// end is when a request admitted at now leaves limit i, if it is a
// concurrent one: its serving time later, or (live) when released.
func (l *Ledger) end(i int, now int64) int64 {
	if l.live {
		return open
	}
	return now + int64(l.es[i].period)
}

// release ends, at now, one request of scope a live Vendor has answered:
// its place in every concurrent limit.
func (l *Ledger) release(now int64, scope string) {
	for i := range l.es {
		if l.es[i].kind != concurrent {
			continue
		}
		s := l.state(i, scope)
		if j := slices.Index(s.log, open); j >= 0 {
			s.log[j] = now
		}
	}
}

// serving is how long a Vendor takes to answer an admitted request before
// its Handler: the longest serving time of its concurrent limits.
func (l *Ledger) serving() time.Duration {
	var d time.Duration
	for _, e := range l.es {
		if e.kind == concurrent {
			d = max(d, e.period)
		}
	}
	return d
}

// state returns scope's state of limit i; a shared limit has one.
func (l *Ledger) state(i int, scope string) *state {
	if l.es[i].shared {
		scope = ""
	}
	m := l.states[i]
	if s, ok := m[scope]; ok {
		return s
	}
	if len(m) >= maxScopes {
		scope = "\x00overflow"
		if s, ok := m[scope]; ok {
			return s
		}
	}
	s := &state{}
	m[scope] = s
	return s
}
