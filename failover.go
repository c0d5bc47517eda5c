package throttle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// failover owns the quota store and what the transport does when it
// fails. A call that fails because the store itself failed
// (quota.ErrStore) rests the store for the retry interval; after that,
// one request at a time probes it while the others still fall back, and
// the probe's answer ends the rest or starts the next one. Meanwhile each
// provider's on_store_error policy decides: refuse, send unthrottled, or
// ask the in-process limiter at the provider's local share. A store that
// answers with an error for one request (quota.ErrState) fails that
// request alone.
type failover struct {
	store quota.Store
	// local is the in-process limiter of providers whose on_store_error
	// is local, and the store itself when none is given.
	local   *quota.MemoryStore
	clock   quota.Clock
	retry   time.Duration
	observe func(context.Context, Event)
	// heldShared counts the leases of a Concurrency key this process
	// holds in the store: requests still in flight that the in-process
	// limiter must count against the process's share.
	heldShared func(tag, key string) int

	// downUntil is zero while the store is in use; after a failure, the
	// Unix µs (on clock) until which it rests. Once that has passed, the
	// request that sets probing tries the store; the rest ends only with
	// the probe's answer, so that no reservation of the local limiter is
	// still waiting when the store decides again.
	downUntil atomic.Int64
	probing   atomic.Bool
	// scaled caches the local-share copies of limits, by original.
	scaled sync.Map
}

// errFailOpen says: the store failed and the provider fails open.
var errFailOpen = errors.New("throttle: fail open")

// errStoreResting is the cause of a fallback while the store rests.
var errStoreResting = fmt.Errorf("%w recently and is left alone until its retry interval passes", quota.ErrStore)

// reserve decides q: by the store while it is in use or as the probe of
// a resting store, else by p's on_store_error policy. It returns
// errFailOpen when the policy sends the request unthrottled.
func (f *failover) reserve(ctx context.Context, p *providers.Provider, q *quota.Request) (*quota.Reservation, error) {
	probe, ok := f.admit()
	if !ok {
		return f.fallback(ctx, p, q, errStoreResting)
	}
	rsv, err := f.store.Reserve(ctx, q)
	if f.settle(ctx, p, probe, err) {
		return f.fallback(ctx, p, q, err)
	}
	if err != nil {
		return nil, fmt.Errorf("throttle: %s: %w", p.Name, err)
	}
	return rsv, nil
}

// watch queues a waiter for a lease of key in tag when the store can
// tell one comes back (quota.LeaseNotifier); nil otherwise, or when it
// cannot listen now: the waiter then wakes at the lease expiry its
// decision reported, or at the end of its wait.
// While the store rests, the in-process limiter decides the provider's
// requests (or nothing does): its own releases are the ones to wait for.
func (f *failover) watch(ctx context.Context, p *providers.Provider, tag, key string) *quota.LeaseWaiter {
	var n quota.LeaseNotifier = f.local
	if f.inUse() {
		var ok bool
		if n, ok = f.store.(quota.LeaseNotifier); !ok {
			return nil
		}
	}
	w, err := n.WatchLeases(ctx, tag, key)
	if err != nil {
		if ctx.Err() == nil {
			f.observe(ctx, Event{Kind: StoreError, Provider: p.Name, Err: err})
		}
		return nil
	}
	return w
}

// watchPauses has the store listen for the fleet's pauses while a
// request waits for its slot, when it can (quota.PauseNotifier); the
// returned stop ends it. While the store rests, only this process's
// pauses matter: the in-process limiter decides.
func (f *failover) watchPauses(ctx context.Context, p *providers.Provider) (stop func()) {
	n, ok := f.store.(quota.PauseNotifier)
	if !ok || !f.inUse() {
		return func() {}
	}
	stop, err := n.WatchPauses(ctx)
	if err != nil {
		if ctx.Err() == nil {
			f.observe(ctx, Event{Kind: StoreError, Provider: p.Name, Err: err})
		}
		return func() {}
	}
	return stop
}

// pausedFor returns how much longer the pauses of q hold it back, as far
// as this process knows (quota.PauseNotifier): its own pauses and its
// Over pause (a provider's pause of every tenant), those set here and
// those the store heard of; while the store rests, the in-process
// limiter's.
func (f *failover) pausedFor(q *quota.Request) time.Duration {
	var n quota.PauseNotifier = f.local
	if f.inUse() {
		var ok bool
		if n, ok = f.store.(quota.PauseNotifier); !ok {
			return 0
		}
	}
	var d time.Duration
	for _, k := range q.Pauses {
		d = max(d, n.PausedFor(q.Tag, k))
	}
	if q.Over.Tag != "" {
		d = max(d, n.PausedFor(q.Over.Tag, q.Over.Key))
	}
	return d
}

// pause holds back key (in tag) for d after p's vendor throttled a
// request: in the store, with why (a store that keeps reasons records it
// for operators: quota.ReasonPauser), and in the in-process limiter when
// that decides p's requests during an outage, since it must honour the
// vendor's delay too. It reports whether either took the pause.
func (f *failover) pause(ctx context.Context, p *providers.Provider, tag, key string, d time.Duration, why string) bool {
	paused := false
	if p.OnStoreError == providers.Local && f.store != quota.Store(f.local) {
		paused = f.local.Pause(ctx, tag, key, d) == nil
	}
	if probe, ok := f.admit(); ok {
		err := quota.PauseWithReason(ctx, f.store, tag, key, d, why)
		f.settle(ctx, p, probe, err)
		paused = paused || err == nil
	}
	return paused
}

// sync applies obs to rsv in the store, unless the store rests after a
// failure; a failure of the store starts a rest, as a decision's does.
func (f *failover) sync(ctx context.Context, p *providers.Provider, rsv *quota.Reservation, obs []quota.Observed) {
	probe, ok := f.admit()
	if !ok {
		return
	}
	f.settle(ctx, p, probe, rsv.Sync(ctx, obs))
}

// retakeLeases decides q's Concurrency limits alone again, at once, for
// a request in flight whose leases the store lost (leaseHold.retake):
// only while the store is in use, since the in-process limiter has
// leases of its own. It returns nil when the store rests.
func (f *failover) retakeLeases(ctx context.Context, p *providers.Provider, q *quota.Request) (*quota.Reservation, error) {
	lq := quota.Request{Tag: q.Tag}
	for _, it := range q.Items {
		if it.Limit.Kind == quota.Concurrency {
			lq.Items = append(lq.Items, it)
		}
	}
	probe, ok := f.admit()
	if !ok {
		return nil, nil
	}
	rsv, err := f.store.Reserve(ctx, &lq)
	if f.settle(ctx, p, probe, err) || err != nil {
		return nil, err
	}
	return rsv, nil
}

// inUse reports whether the store decides, as opposed to resting after
// a failure: the reservations made now are the store's.
func (f *failover) inUse() bool { return f.downUntil.Load() == 0 }

// admit reports whether a call may go to the store (ok), and whether it
// is the one probe of a resting store. Only the probe's answer ends a
// rest; every admitted probe must be settled.
func (f *failover) admit() (probe, ok bool) {
	until := f.downUntil.Load()
	if until == 0 {
		return false, true
	}
	if f.clock.Now().UnixMicro() < until || !f.probing.CompareAndSwap(false, true) {
		return false, false
	}
	// Another probe may have answered between the load and the swap.
	switch f.downUntil.Load() {
	case until:
		return true, true
	case 0:
		f.probing.Store(false)
		return false, true
	}
	f.probing.Store(false)
	return false, false
}

// settle records the outcome of a call to the store and reports whether
// the store itself failed, so that p's policy must decide instead. A
// caller's ended context and an invalid request say nothing about the
// store.
func (f *failover) settle(ctx context.Context, p *providers.Provider, probe bool, err error) (failed bool) {
	switch {
	case err == nil || errors.Is(err, quota.ErrState):
		// The store answered: a probe ends the rest. An error for this
		// request alone is still worth an alert.
		if err != nil {
			f.observe(ctx, Event{Kind: StoreError, Provider: p.Name, Err: err})
		}
		if probe {
			f.downUntil.Store(0)
		}
	case ctx.Err() != nil || errors.Is(err, quota.ErrInvalid):
	default:
		// Set before the probe is released, so that no second probe
		// slips into the same interval.
		f.downUntil.Store(f.clock.Now().Add(f.retry).UnixMicro())
		f.observe(ctx, Event{Kind: StoreError, Provider: p.Name, Err: err})
		failed = true
	}
	if probe {
		f.probing.Store(false)
	}
	return failed
}

// fallback applies p's on_store_error policy to q; cause is why the store
// did not decide.
func (f *failover) fallback(ctx context.Context, p *providers.Provider, q *quota.Request, cause error) (*quota.Reservation, error) {
	f.observe(ctx, Event{Kind: FellBack, Provider: p.Name, Class: p.ClassName(q.Class), Policy: p.OnStoreError, Err: cause})
	switch p.OnStoreError {
	case providers.FailOpen:
		return nil, errFailOpen
	case providers.Local:
		return f.reserveLocally(ctx, p, q)
	default:
		return nil, fmt.Errorf("throttle: %s: %w: %w", p.Name, ErrStoreUnavailable, cause)
	}
}

// reserveLocally decides q in the in-process limiter, every limit scaled
// to p's local share. Two rules keep this process within its share (see
// docs/decisions.md, "Failure"):
//
//   - A reservation must be due before the store decides again (when the
//     rest ends), or it would go out on top of what the store admits
//     then: the wait is capped at what is left of the rest.
//   - A cost above a scaled limit's capacity is not cut down to it. A
//     GCRA limit admits it once the limit is idle and charges it in full:
//     the debt delays the requests after it, so the long-run rate stays
//     at the share. A calendar or rolling window cannot carry a debt
//     (into the next window, past its period), so it refuses the request
//     until the store is back.
func (f *failover) reserveLocally(ctx context.Context, p *providers.Provider, q *quota.Request) (*quota.Reservation, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("throttle: %s: %w", p.Name, err)
	}
	left := max(time.Duration(f.downUntil.Load()-f.clock.Now().UnixMicro())*time.Microsecond, 0)
	lq := *q
	lq.MaxWait = min(q.MaxWait, left)
	lq.Items = make([]quota.Item, len(q.Items))
	for i, it := range q.Items {
		l := f.scaledLimit(it.Limit, p.LocalShare)
		c := q.CostOf(i)
		if l.Kind == quota.Concurrency {
			l = f.localLeases(l, q.Tag, it.Key)
		}
		if c > l.Capacity() {
			if l.Kind != quota.GCRA {
				retry := left
				if retry == 0 {
					retry = f.retry
				}
				// No limiter decided, so there is no state to report:
				// zero statuses, one per item as a Result promises.
				return quota.NewReservation(quota.Result{RetryAfter: retry, Decider: i,
					Limits: make([]quota.Status, len(q.Items))}, quota.ReservationOps{}), nil
			}
			debt := *l
			debt.Burst = c
			l = &debt
		}
		it.Limit, it.Cost = l, c
		lq.Items[i] = it
	}
	rsv, err := f.local.Reserve(ctx, &lq)
	if err != nil {
		return nil, fmt.Errorf("throttle: %s: local limiter: %w", p.Name, err)
	}
	return rsv, nil
}

// localLeases returns l, the local share of a Concurrency limit, less
// the leases of key in tag that this process holds in the store: their
// requests are in flight, so they count against the share (Rate 0: none
// left, which refuses the request).
func (f *failover) localLeases(l *quota.Limit, tag, key string) *quota.Limit {
	n := f.heldShared(tag, key)
	if n == 0 {
		return l
	}
	s := *l
	s.Rate = max(l.Rate-int64(n), 0)
	return &s
}

// scaledLimit returns l at share of its rate and burst (at least 1 each),
// the in-process limiter's part of a fleet-wide limit.
func (f *failover) scaledLimit(l *quota.Limit, share float64) *quota.Limit {
	if v, ok := f.scaled.Load(l); ok {
		return v.(*quota.Limit)
	}
	if share <= 0 || share > 1 {
		share = 1
	}
	s := *l
	s.Rate = max(1, int64(math.Floor(float64(l.Rate)*share)))
	if l.Burst > 0 {
		s.Burst = max(1, int64(math.Floor(float64(l.Burst)*share)))
	}
	v, _ := f.scaled.LoadOrStore(l, &s)
	return v.(*quota.Limit)
}
