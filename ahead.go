package throttle

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// Quota taken ahead (docs/decisions.md, "Quota taken ahead"). A stack
// whose every limit has an "ahead" period is served from a pool: the
// slots this process expects to use in the next period, reserved in one
// store call (a batch: one request of cost k per slot count, charged with
// a lead of about the period, quota.Request.Lead), and handed out to its
// requests without a round trip. Each slot j of a batch is valid from the
// batch's slot until its deadline, the start of its place on the limit's
// schedule (at least the lead ahead of the store's now): spent within
// that, it never exceeds the limit, whatever the rest of the fleet does.
// A keeper goroutine per pool takes the batches, before the pool runs
// out, and gives back the slots not used when the pool goes idle, a
// pause is heard, or the Transport is closed.

// maxAheadItems is the most limits a stack taken ahead may have: its pool
// key holds them inline.
const maxAheadItems = 4

// aheadShare is the share of a limit's burst one batch may take: a
// process takes at most an eighth of the burst at once, so that seven
// eighths stay for the rest of the fleet (less the lead's span).
const aheadShare = 8

// aheadPools holds a Transport's pools of quota taken ahead.
type aheadPools struct {
	mu      sync.Mutex
	pools   map[aheadKey]*aheadPool
	sweepAt int           // the size at which the next new pool sweeps idle ones
	done    chan struct{} // closed by Close: keepers give back and exit
	closed  bool
	keepers sync.WaitGroup
}

// aheadKey names a stack: its tag, its Over pause, its priority class
// and its items, each with its cost. Every request of a stack decides
// alike, so they share one pool.
//
// The class is in the key although no limit with classes takes quota
// ahead yet (providers refuses ahead on a limit with a reserve or pace):
// a stack's other limits ignore it, but pools must never mix classes, so
// that a batch's class is the class of every request it serves once
// lanes do take quota ahead.
//
// When quota.Request gets a field that changes a decision, it belongs
// here too: TestAheadKeyCoversRequest fails until it is added or
// declared irrelevant.
type aheadKey struct {
	tag   string
	over  quota.PauseKey
	class int
	n     int
	items [maxAheadItems]aheadItem
}

// aheadItem is one limit of a stack taken ahead.
type aheadItem struct {
	lim  *quota.Limit
	key  string
	cost int64
}

// aheadPool is the quota one stack has taken ahead, and what the next
// batch should be.
type aheadPool struct {
	key    aheadKey
	pauses []string      // the stack's pauses, which every request of it names
	kick   chan struct{} // wakes the keeper (buffered, one)

	mu       sync.Mutex
	p        *providers.Provider // the latest request's: the keeper's calls run under its policy
	period   time.Duration
	rate     float64       // requests per second, decayed over a period (demand)
	fast     float64       // the same, decayed over a quarter of a period
	rateAt   time.Time     // when rate was last decayed
	last     time.Time     // the latest request
	batches  []*aheadBatch // oldest first
	want     bool          // a batch is asked for
	calling  bool          // a batch call is in flight
	ready    chan struct{} // closed when the batch asked for or in flight is in (nil: none)
	holdOff  time.Time     // no batch before this (after a denial or a failure)
	denied   *aheadBatch   // the last batch's denial, until holdOff: the pool refuses meanwhile
	cap      int64         // largest batch for now: halved by a denial, doubled by a grant
	lastK    int64         // the last batch's size; 0 from idle (slow start)
	spellAt  time.Time     // the first request of the busy spell
	spellN   int64         // the requests of the busy spell
	dry      bool          // a request found no slot since the last batch
	rtt      time.Duration // moving mean of the batch calls' durations
	keeping  bool          // the keeper runs
	giveBack []*aheadBatch // batches retired with slots to give back
}

// aheadBatch is one batch of slots: k slots of the stack, reserved at
// once. Slot j is valid from from until first + j*step (both on this
// process's clock, taken on the safe side of the store's).
type aheadBatch struct {
	rsv     *quota.Reservation
	k       int64
	next    int64   // slots below were handed out or expired
	back    []int64 // slots handed out and given back unused (a cancelled wait), sorted
	from    time.Time
	got     time.Time // when it came in
	first   time.Time
	step    time.Duration
	decider int // the batch's decider, for a request that waits for its slot
	limits  []quota.Status
	retired bool // no more slots are handed out
}

// deadline is when slot j stops being valid: the start of its place on
// the limit's schedule.
func (b *aheadBatch) deadline(j int64) time.Time {
	return b.first.Add(time.Duration(j) * b.step)
}

// held is how many slots b can still hand out (some may expire unused).
func (b *aheadBatch) held() int64 {
	if b.retired {
		return 0
	}
	return b.k - b.next + int64(len(b.back))
}

// aheadPeriod returns the period of quota taken ahead for q, a request of
// res, or zero when q is decided by the store: its stack has a limit
// without "ahead" (a daily quota, a concurrency cap), or its response is
// synced or settled (the vendor's figures cannot know what the process
// holds), or the provider only observes (shadow), or the store is the
// Transport's own memory (nothing to save).
func (t *Transport) aheadPeriod(ctx context.Context, res *providers.Resolution, q *quota.Request) time.Duration {
	if len(q.Items) > maxAheadItems || res.Provider.Mode != providers.Enforce || res.Sync != nil || res.Settle != nil ||
		t.failover.store == quota.Store(t.failover.local) || settlerFrom(ctx) != nil {
		return 0
	}
	return res.Ahead()
}

// reserve decides q, a request of res: from the pool of its stack when it
// takes quota ahead and the pool has a slot for it, else by the store as
// always (failover.reserve).
func (t *Transport) reserve(ctx context.Context, res *providers.Resolution, q *quota.Request) (*quota.Reservation, error) {
	if period := t.aheadPeriod(ctx, res, q); period > 0 {
		rsv, pl := t.ahead.take(ctx, t, res.Provider, q, period)
		if rsv != nil {
			return rsv, nil
		}
		if pl != nil {
			// The store decides: its round trip is the pool's first
			// measure of a batch's, before any batch was taken.
			sent := t.clock.Now()
			rsv, err := t.failover.reserve(ctx, res.Provider, q)
			if err == nil {
				pl.observe(t.clock.Now().Sub(sent))
			}
			return rsv, err
		}
	}
	return t.failover.reserve(ctx, res.Provider, q)
}

// Close gives back what the Transport took ahead and has not used (as a
// Cancel would: where no later reservation has been placed on it) and
// stops the goroutines that keep it. A Transport that takes no quota
// ahead ("ahead" in the providers' configuration) has nothing to close.
// After Close the Transport still works, deciding every request in the
// store. A process that exits without Close leaves what it held to
// expire: its slots lie at most one period and a round trip ahead.
func (t *Transport) Close() error {
	return t.ahead.close()
}

// close retires every pool and waits for their keepers to give back.
func (a *aheadPools) close() error {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		if a.done == nil {
			a.done = make(chan struct{})
		}
		close(a.done)
	}
	a.mu.Unlock()
	a.keepers.Wait()
	return nil
}

// keyOf returns the key of q's stack; false when it has too many items.
func keyOf(q *quota.Request) (aheadKey, bool) {
	k := aheadKey{tag: q.Tag, over: q.Over, class: q.Class, n: len(q.Items)}
	if k.n > maxAheadItems {
		return k, false
	}
	for i := range q.Items {
		k.items[i] = aheadItem{lim: q.Items[i].Limit, key: q.Items[i].Key, cost: q.CostOf(i)}
	}
	return k, true
}

// pool returns the pool of key, making it; nil after Close.
func (a *aheadPools) pool(key aheadKey, q *quota.Request, now time.Time) *aheadPool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	if pl := a.pools[key]; pl != nil {
		return pl
	}
	if a.pools == nil {
		a.pools, a.done = map[aheadKey]*aheadPool{}, make(chan struct{})
	}
	if len(a.pools) >= a.sweepAt {
		a.sweep(now)
	}
	pl := &aheadPool{key: key, pauses: slices.Clone(q.Pauses), kick: make(chan struct{}, 1), rateAt: now, last: now}
	a.pools[key] = pl
	return pl
}

// sweep forgets the pools that hold nothing, have no keeper and have not
// been asked for in ten periods (a second at least): each new pool pays
// for it, once the map has doubled since the last sweep. a.mu is held.
func (a *aheadPools) sweep(now time.Time) {
	for k, pl := range a.pools {
		pl.mu.Lock()
		quiet := !pl.keeping && len(pl.batches) == 0 && now.Sub(pl.last) > max(10*pl.period, time.Second)
		pl.mu.Unlock()
		if quiet {
			delete(a.pools, k)
		}
	}
	a.sweepAt = max(64, 2*len(a.pools))
}

// take returns a reservation of q from the pool of its stack, or nil when
// the store must decide it: the pool has no slot valid within q's max
// wait and no batch comes in time for it, the process is quiet, or a
// pause holds the stack (the pool then gives back what it holds). It
// also returns the pool, when q has one, which is told the round trip of
// the store's decision (observe).
func (a *aheadPools) take(ctx context.Context, t *Transport, p *providers.Provider, q *quota.Request, period time.Duration) (*quota.Reservation, *aheadPool) {
	key, ok := keyOf(q)
	if !ok {
		return nil, nil
	}
	now := t.clock.Now()
	pl := a.pool(key, q, now)
	if pl == nil || !slices.Equal(pl.pauses, q.Pauses) {
		return nil, nil
	}
	return pl.take(ctx, a, t, p, q, period), pl
}

// take is aheadPools.take on the pool of q's stack.
func (pl *aheadPool) take(ctx context.Context, a *aheadPools, t *Transport, p *providers.Provider, q *quota.Request, period time.Duration) *quota.Reservation {
	paused := t.failover.pausedFor(q) > 0
	pl.mu.Lock()
	// Read under the lock: a batch that came in before it is never
	// later than now, so its slots are not taken for ones to wait for.
	now := t.clock.Now()
	pl.p, pl.period = p, period
	pl.demand(now)
	if paused {
		// Slots taken before a pause would go out on top of the drained
		// schedule after it: give them back, and let the store decide.
		pl.retire()
		pl.mu.Unlock()
		pl.wake()
		return nil
	}
	rsv := pl.slot(now, q.MaxWait)
	if rsv == nil {
		pl.dry = true
		rsv = pl.refusal(now, q.MaxWait)
	}
	if rsv != nil || !pl.busy(now) {
		wake := rsv != nil && pl.low(now) && pl.ask(a, t)
		pl.mu.Unlock()
		if wake {
			pl.wake()
		}
		return rsv
	}
	// Empty and busy: the batch asked for (or this one) serves it, and
	// the requests queued behind it, with one call.
	pl.ask(a, t)
	ready := pl.ready
	pl.mu.Unlock()
	pl.wake()
	if ready == nil {
		return nil
	}
	select {
	case <-ready:
	case <-ctx.Done():
		return nil
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	now = t.clock.Now()
	if rsv := pl.slot(now, q.MaxWait); rsv != nil {
		return rsv
	}
	return pl.refusal(now, q.MaxWait)
}

// demand counts a request at now in the pool's rate: a count decayed by
// e^(-dt/period), divided by the period, which follows a steady demand
// within a period or two and forgets a burst as fast. A request after
// two periods without one starts a busy spell: the next batches start
// small again (slow start, batchSize); what the pool held has been given
// back or has passed by then. A shorter pause (bursts a period apart)
// keeps the batches' size. pl.mu is held.
func (pl *aheadPool) demand(now time.Time) {
	if pl.spellN == 0 || now.Sub(pl.last) > 2*pl.period {
		pl.spellAt, pl.spellN, pl.lastK = now, 0, 0
	}
	pl.spellN++
	if dt := now.Sub(pl.rateAt); dt > 0 {
		pl.rate *= math.Exp(-float64(dt) / float64(pl.period))
		pl.fast *= math.Exp(-4 * float64(dt) / float64(pl.period))
		pl.rateAt = now
	}
	pl.rate += float64(time.Second) / float64(pl.period)
	pl.fast += 4 * float64(time.Second) / float64(pl.period)
	pl.last = now
}

// size returns how many slots the next batch takes: what the demand
// expects to use in a period, rounded down, at most most() (and at least
// two); 0 when the demand expects fewer than two, so a quiet process
// takes nothing ahead. The demand is read over a period, and over a
// quarter of one while it rises, so that a process that starts busy
// takes its full batches within a quarter period. pl.mu is held.
func (pl *aheadPool) size() int64 {
	p, most := pl.period.Seconds(), pl.most()
	if most < 2 || pl.demandRate()*p < 2 {
		return 0
	}
	// A rising demand: the quarter-period rate follows it sooner.
	return max(min(int64(max(pl.demandRate(), pl.fast-2/p)*p), most), 2)
}

// demandRate is the demand's rate, requests per second: rate less the
// half of a request's count by which it reads high just after a request
// (see size). pl.mu is held.
func (pl *aheadPool) demandRate() float64 {
	return max(pl.rate-0.5/pl.period.Seconds(), 0)
}

// most is the largest batch the pool may take: an eighth of each
// limit's burst (aheadShare), the limit's rate (so that giving back is
// never an implausible settle), and the cap a denial set. pl.mu is held.
func (pl *aheadPool) most() int64 {
	most := pl.cap
	if most == 0 {
		most = math.MaxInt64
	}
	for i := 0; i < pl.key.n; i++ {
		it := &pl.key.items[i]
		most = min(most, max(1, it.lim.Capacity()/aheadShare/it.cost), it.lim.Rate/it.cost)
	}
	return most
}

// batchSize is the size of the batch to take now: size, or, when a
// request found the pool dry since the last batch, up to twice the last
// batch (the demand outran the estimate, which follows it only within a
// period or two). A busy spell's batches start at two slots and at most
// double (slow start): a batch's lead grows with its size, and the part
// of a lead that reaches past the limit's schedule is burst given up
// (docs/decisions.md, "A busy spell from idle"). Small first leads give
// up little of an idle limit's burst, and when the fleet's demand
// outruns the limit, its own charges take the schedule ahead of the
// next, longer leads. pl.mu is held.
func (pl *aheadPool) batchSize() int64 {
	k := pl.size()
	if k > 0 && pl.dry {
		k = max(k, min(2*pl.lastK, pl.most()))
	}
	pl.dry = false
	if k > 0 {
		k = min(k, max(2, 2*pl.lastK))
	}
	return k
}

// observe takes d, the round trip of a decision the store made for the
// pool's stack, as the batches' round trip until a batch has measured
// one: the first batch's lead then allows for it (see lead).
func (pl *aheadPool) observe(d time.Duration) {
	pl.mu.Lock()
	if pl.rtt == 0 {
		pl.rtt = d
	}
	pl.mu.Unlock()
}

// busy reports whether the pool should take a batch now: the demand
// wants one and no denial or failure holds it off. pl.mu is held.
func (pl *aheadPool) busy(now time.Time) bool {
	return !now.Before(pl.holdOff) && pl.size() > 0
}

// low reports whether the slots held would run out before a batch asked
// for now came in (fewer than the demand of two round trips, and one),
// while the demand is steady: the newest batch has lasted at least half
// as long as the demand's rate says its slots handed out should have. A
// batch used up in a burst is not followed at once by another, which the
// burst's end would leave unused; the next request asks for it instead.
// pl.mu is held.
func (pl *aheadPool) low(now time.Time) bool {
	var held int64
	for _, b := range pl.batches {
		held += b.held()
	}
	if held >= pl.lowMark() || !pl.busy(now) {
		return false
	}
	n := len(pl.batches)
	if n == 0 {
		return true
	}
	b := pl.batches[n-1]
	paced := time.Duration(float64(b.next) / max(pl.demandRate(), 1) * float64(time.Second) / 2)
	return now.Sub(b.got) >= paced
}

// lowMark is what the demand uses in two round trips of a batch, and
// one: held slots below it call for the next batch (low), and a batch
// that waited is not halved below it (batch). pl.mu is held.
func (pl *aheadPool) lowMark() int64 {
	return int64(math.Ceil(pl.demandRate()*(2*max(pl.rtt, time.Millisecond)).Seconds())) + 1
}

// ask asks the keeper for a batch, starting it if it is not running, and
// reports whether the caller must wake it. pl.mu is held.
func (pl *aheadPool) ask(a *aheadPools, t *Transport) bool {
	if pl.ready == nil {
		pl.ready = make(chan struct{})
	}
	if pl.want || pl.calling {
		return false
	}
	pl.want = true
	if !pl.keeping {
		a.mu.Lock()
		closed := a.closed
		if !closed {
			a.keepers.Add(1)
		}
		a.mu.Unlock()
		if closed {
			pl.want = false
			close(pl.ready)
			pl.ready = nil
			return false
		}
		pl.keeping = true
		go pl.keep(a, t)
	}
	return true
}

// wake wakes the keeper, if it waits.
func (pl *aheadPool) wake() {
	select {
	case pl.kick <- struct{}{}:
	default:
	}
}

// slot hands out the first slot valid at the time a request decided at
// now could go (now, or its batch's slot), if that is within maxWait.
// Slots given back come first, then each batch's next; a slot whose
// deadline has passed is in the past, and skipped. pl.mu is held.
func (pl *aheadPool) slot(now time.Time, maxWait time.Duration) *quota.Reservation {
	var rsv *quota.Reservation
	for _, b := range pl.batches {
		if b.retired {
			continue
		}
		at := now
		if b.from.After(at) {
			at = b.from
		}
		if at.Sub(now) > maxWait {
			break // later batches are no sooner
		}
		for len(b.back) > 0 && rsv == nil {
			j := b.back[0]
			b.back = b.back[1:]
			if !at.After(b.deadline(j)) {
				rsv = pl.reservation(b, j, at, now)
			}
		}
		for b.next < b.k && rsv == nil {
			j := b.next
			b.next++
			if !at.After(b.deadline(j)) {
				rsv = pl.reservation(b, j, at, now)
			}
		}
		if rsv != nil {
			break
		}
	}
	// Batches used up have nothing to give back.
	for len(pl.batches) > 0 && pl.batches[0].held() == 0 && !pl.batches[0].retired {
		pl.batches[0] = nil
		pl.batches = pl.batches[1:]
	}
	return rsv
}

// refusal returns a refusal, without a round trip, of a request decided
// at now that cannot wait for the pool's next slot, or nil. The pool's
// slots come later than maxWait when its batches waited for their place
// on a busy limit (a batch waits up to a period: in line on the limit's
// schedule with every other reservation, so a busy fleet does not starve
// a process that takes ahead); the store, asked, would refuse the
// request too, since the limit is taken up to there. After a denial the
// store's retry time holds the pool off (holdOff) and refuses likewise,
// while the batch it then asks for is at least two slots; below that the
// store decides. pl.mu is held.
func (pl *aheadPool) refusal(now time.Time, maxWait time.Duration) *quota.Reservation {
	for _, b := range pl.batches {
		if b.held() > 0 {
			if wait := b.from.Sub(now); wait > maxWait {
				res := quota.Result{RetryAfter: wait, Decider: b.decider, Limits: b.limits}
				return quota.NewReservation(res, quota.ReservationOps{})
			}
			return nil
		}
	}
	b := pl.denied
	if b == nil || !now.Before(pl.holdOff) || pl.size() == 0 || pl.holdOff.Sub(now) <= maxWait {
		return nil
	}
	res := quota.Result{RetryAfter: pl.holdOff.Sub(now), Decider: b.decider, Limits: b.limits}
	return quota.NewReservation(res, quota.ReservationOps{})
}

// reservation is the reservation of slot j of b, going at at (a request
// decided at now). One that waits for its slot gives it back to the pool
// when cancelled, as a store's Cancel does.
func (pl *aheadPool) reservation(b *aheadBatch, j int64, at, now time.Time) *quota.Reservation {
	res := quota.Result{Allowed: true, Decider: quota.NoDecider, Limits: b.limits}
	var ops quota.ReservationOps
	if wait := at.Sub(now); wait > 0 {
		res.Wait, res.Decider = wait, b.decider
		ops.Cancel = func(context.Context) error {
			pl.mu.Lock()
			defer pl.mu.Unlock()
			if !b.retired {
				i, _ := slices.BinarySearch(b.back, j)
				b.back = slices.Insert(b.back, i, j)
			}
			return nil
		}
	}
	return quota.NewReservation(res, ops)
}

// retire stops handing out every batch's slots and queues those with
// slots left for the keeper to give back. pl.mu is held.
func (pl *aheadPool) retire() {
	for _, b := range pl.batches {
		if !b.retired && b.next < b.k {
			pl.giveBack = append(pl.giveBack, b)
		}
		b.retired = true
	}
	pl.batches = pl.batches[:0]
}

// idleAfter is how long without a request makes the pool idle, so that
// it gives back what it holds: half a period, or four of the demand's
// intervals between requests when that is longer (the process has
// slowed down or stopped), at most a period. Slots given back while still
// ahead on the schedule serve the rest of the fleet; kept, they would
// expire unused. A shorter idle time would give back the slots of a
// process that only paused for a moment (a busy machine's scheduling),
// slots that a refund rarely reaches on a busy limit. pl.mu is held.
func (pl *aheadPool) idleAfter() time.Duration {
	idle := pl.period / 2
	if r := pl.demandRate(); r > 0 {
		idle = max(idle, time.Duration(4*float64(time.Second)/r))
	}
	return min(idle, pl.period)
}

// keep is the pool's keeper: it takes the batches asked for, and gives
// back what the pool holds once it is idle (idleAfter; or a pause retired
// it, or the Transport closed), exiting then. It listens
// for the fleet's pauses while it runs, so that a pause set by another
// process retires the pool too (take asks failover.pausedFor).
func (pl *aheadPool) keep(a *aheadPools, t *Transport) {
	defer a.keepers.Done()
	var stop func()
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for {
		pl.mu.Lock()
		now := t.clock.Now()
		closed := false
		select {
		case <-a.done:
			closed = true
		default:
		}
		idle := now.Sub(pl.last) >= pl.idleAfter()
		if closed || idle {
			pl.retire()
			back := pl.giveBack
			pl.giveBack, pl.keeping, pl.want = nil, false, false
			if pl.ready != nil && !pl.calling {
				close(pl.ready)
				pl.ready = nil
			}
			p := pl.p
			pl.mu.Unlock()
			pl.settle(t, p, back)
			return
		}
		if back := pl.giveBack; len(back) > 0 {
			pl.giveBack = nil
			p := pl.p
			pl.mu.Unlock()
			pl.settle(t, p, back)
			continue
		}
		if pl.want {
			pl.want, pl.calling = false, true
			p := pl.p
			pl.mu.Unlock()
			if stop == nil && t.failover.inUse() {
				// Listening before the batch is decided: a pause set
				// after the decision is heard.
				stop = t.failover.watchPauses(context.Background(), p)
			}
			pl.batch(t, p, now)
			continue
		}
		wait := pl.last.Add(pl.idleAfter()).Sub(now)
		pl.mu.Unlock()
		timer := t.clock.NewTimer(wait)
		select {
		case <-pl.kick:
		case <-timer.C():
		case <-a.done:
		}
		timer.Stop()
	}
}

// batch takes one batch from the store and puts it in the pool: k slots
// charged with a lead of the period plus the calls' round trip (capped so
// that the batch is due at once from an idle limit), waiting at most a
// period for its slot. A denial halves the next batches and holds
// them off until the store's retry time; a failure of the store holds
// them off for a period (the store's own rest, failover, decides the
// requests meanwhile). Whatever happens, the requests waiting for it are
// woken.
func (pl *aheadPool) batch(t *Transport, p *providers.Provider, now time.Time) {
	pl.mu.Lock()
	k, q := pl.batchSize(), pl.request()
	if k > 0 {
		q.Lead = pl.lead(k)
	}
	pl.mu.Unlock()
	var rsv *quota.Reservation
	sent := now
	if k > 0 {
		for i := range q.Items {
			q.Items[i].Cost *= k
		}
		sent = t.clock.Now()
		rsv = t.failover.reserveAhead(context.Background(), p, &q)
	}
	got := t.clock.Now()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.calling = false
	if pl.ready != nil {
		defer close(pl.ready)
		pl.ready = nil
	}
	switch {
	case k == 0:
	case rsv == nil:
		pl.holdOff = got.Add(pl.period)
	case !rsv.Allowed:
		pl.holdOff = got.Add(max(rsv.RetryAfter, time.Millisecond))
		pl.cap = max(1, k/2)
		pl.denied = &aheadBatch{decider: rsv.Decider, limits: rsv.Limits}
	case rsv.Wait > 0:
		// The batch waited for its place: the limit's burst is spent,
		// the fleet asks for more than its rate, and this process's
		// slots come at its share of the rate whatever its batches. A
		// smaller next batch holds less of the schedule unused (what
		// a busy spell's end leaves held is lost to everyone), down
		// to what two round trips of the demand use, or a quarter of
		// a period's, whichever is more: calls stay at most four per
		// period.
		floor := max(pl.lowMark(), int64(pl.demandRate()*pl.period.Seconds())/4, 2)
		pl.cap = max(min(k/2, pl.most()), floor)
		fallthrough
	default:
		if pl.cap != 0 && rsv.Wait == 0 {
			pl.cap *= 2
		}
		d := got.Sub(sent)
		if pl.rtt == 0 {
			pl.rtt = d
		} else {
			pl.rtt = (3*pl.rtt + d) / 4
		}
		pl.batches = append(pl.batches, pl.newBatch(rsv, k, sent, got))
		pl.denied, pl.lastK = nil, k
	}
}

// request is a copy of the pool's stack, each item's cost set, to be
// scaled to a batch. pl.mu is held.
func (pl *aheadPool) request() quota.Request {
	q := quota.Request{Tag: pl.key.tag, Over: pl.key.over, Class: pl.key.class, Pauses: pl.pauses, MaxWait: pl.period,
		Items: make([]quota.Item, pl.key.n)}
	for i := range q.Items {
		it := &pl.key.items[i]
		q.Items[i] = quota.Item{Limit: it.lim, Key: it.key, Cost: it.cost}
	}
	return q
}

// lead is how far ahead a batch of k slots is charged, so that each slot
// is still valid when the demand comes to it: the round trip that brings
// the batch (what the conversion from the store's clock takes off, see
// newBatch), plus, for the k slots, how much longer the demand takes to
// use one (a quarter more than its rate says, for its ups and downs)
// than the limit's schedule spaces them: slot j is used about j/rate
// after the batch comes, and its place is j intervals after the first. It is at
// most the period and the round trip, and no more than lets the batch be
// due at once from an idle limit (its lead and its k slots within each
// limit's tolerance). The lead is what the other processes give up of
// the burst while this one holds slots: the less, the better. pl.mu is
// held.
func (pl *aheadPool) lead(k int64) time.Duration {
	lead := pl.period + pl.rtt
	if r := pl.leadRate(); r > 0 {
		var step time.Duration // the shortest place of a slot on the schedules
		for i := 0; i < pl.key.n; i++ {
			it := &pl.key.items[i]
			if d := time.Duration(it.cost*it.lim.Interval()) * time.Microsecond; i == 0 || d < step {
				step = d
			}
		}
		use := time.Duration(float64(time.Second) / r * 5 / 4)
		lead = min(lead, pl.rtt+time.Duration(k)*max(use-step, 0))
	}
	for i := 0; i < pl.key.n; i++ {
		it := &pl.key.items[i]
		room := time.Duration(it.lim.Tolerance()-k*it.cost*it.lim.Interval()) * time.Microsecond
		lead = min(lead, room)
	}
	return max(lead, 0)
}

// leadRate is the demand's rate that lead spaces a batch's slots by:
// the decayed estimates, or, in a busy spell's first period, the spell's
// own rate (its requests over their span) when that is higher. The
// decayed counts start from nothing and read a fast start far too low
// for a period, and a lead sized on them would give up most of a period
// of an idle limit's burst for a batch its process uses in a few
// milliseconds. Read too high, the lead is short and a slot may pass
// before it is used: at most the batch, small at a spell's start. pl.mu
// is held.
func (pl *aheadPool) leadRate() float64 {
	r := max(pl.demandRate(), pl.fast-2/pl.period.Seconds())
	if span := pl.last.Sub(pl.spellAt); pl.spellN > 2 && span > 0 && span < pl.period {
		r = max(r, float64(pl.spellN-1)/span.Seconds())
	}
	return r
}

// newBatch makes the batch of k slots that rsv granted, on the safe side
// of the store's clock: the store's now lies between sent and got, so a
// slot is valid from got plus the wait, and until sent plus the time from
// the store's now to the start of its place on the schedule. pl.mu is
// held.
func (pl *aheadPool) newBatch(rsv *quota.Reservation, k int64, sent, got time.Time) *aheadBatch {
	b := &aheadBatch{rsv: rsv, k: k, from: got.Add(rsv.Wait), got: got, decider: rsv.Decider, limits: rsv.Limits}
	var first time.Duration
	for i := 0; i < pl.key.n; i++ {
		it := &pl.key.items[i]
		occupy := time.Duration(it.cost*it.lim.Interval()) * time.Microsecond // one slot's place
		start := rsv.Limits[i].ResetAfter - time.Duration(k)*occupy           // the batch's first place
		if i == 0 || start < first {
			first = start
		}
		if i == 0 || occupy < b.step {
			b.step = occupy
		}
	}
	b.first = sent.Add(first)
	return b
}

// settle gives back the unused slots of each batch in back, newest first
// (the newest is the one a refund can reach first): it settles the batch
// at the slots handed out, so that the store gives back the rest while
// the batch is still the latest charged on its limits (package quota's
// Settle).
func (pl *aheadPool) settle(t *Transport, p *providers.Provider, back []*aheadBatch) {
	for i := len(back) - 1; i >= 0; i-- {
		b := back[i]
		used := b.next
		actual := make([]int64, pl.key.n)
		for j := range actual {
			actual[j] = used * pl.key.items[j].cost
		}
		ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
		t.failover.settleAhead(ctx, p, b.rsv, actual)
		cancel()
	}
}

// reserveAhead decides a batch in the store, as reserve decides a
// request, but with no fallback: a batch the in-process limiter decided,
// or one sent unthrottled, would hold nothing. It returns nil when the
// store rests or fails (the pool's requests then go to reserve, which
// falls back as the provider says) or the call errs.
func (f *failover) reserveAhead(ctx context.Context, p *providers.Provider, q *quota.Request) *quota.Reservation {
	probe, ok := f.admit()
	if !ok {
		return nil
	}
	rsv, err := f.store.Reserve(ctx, q)
	if f.settle(ctx, p, probe, err) || err != nil {
		return nil
	}
	return rsv
}

// settleAhead gives back a batch's unused slots (Reservation.Settle),
// unless the store rests; a failure of the store starts a rest, as a
// decision's does.
func (f *failover) settleAhead(ctx context.Context, p *providers.Provider, rsv *quota.Reservation, actual []int64) {
	probe, ok := f.admit()
	if !ok {
		return
	}
	f.settle(ctx, p, probe, rsv.Settle(ctx, actual))
}
