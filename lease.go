package throttle

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// leaseHold keeps the leases of one admitted request (its stack's
// Concurrency limits) while the request is in flight, and releases them
// when it is done: the response body read to EOF or closed, or the round
// trip failed.
//
// Renewal is a goroutine per request that holds leases, woken every half
// lease TTL. A renewal done lazily on Read (no goroutine) was the
// alternative; it cannot cover the wait for the response headers (a
// model API may think for minutes before its first byte) nor a Read that
// blocks past the TTL (a stream's gap), and a lease that expires while
// its request is in flight lets one more request in than the cap. The
// goroutines are bounded by the leases: at most the cap of the limit,
// fleet-wide. A body the caller neither reads nor closes (its bug) must
// not hold its leases forever: a tick that finds no Read since the last
// one and none in progress skips the renewal, and after two such ticks
// (a whole TTL without renewal: the leases have expired) the goroutine
// ends.
type leaseHold struct {
	l        *leases
	rsv      *quota.Reservation // replaced by retake, before release reads it
	provider string
	class    string          // the request's priority class, for its events
	ctx      context.Context // the request's values, without its cancellation
	every    time.Duration

	// keys are counted in l's shared leases, and again decides the
	// stack's Concurrency limits anew (retake); both nil when the leases
	// are the in-process limiter's.
	keys  []leaseKey
	again func(context.Context) (*quota.Reservation, error)

	active atomic.Int32  // > 0 while the round trip or a Read is in progress
	reads  atomic.Uint64 // Reads started
	// expired: the renewals stopped, so the leases expire in the store
	// (reported as LeaseExpired, once).
	expired atomic.Bool

	once sync.Once
	stop chan struct{}
	done chan struct{}
}

// leases holds the leases of admitted requests, with the clock that
// times their renewals and the observer told about them handed in. It
// counts the leases this process holds in the shared store, per key, for
// the in-process limiter of an outage (failover.reserveLocally): those
// requests are still in flight, and count against the process's share.
type leases struct {
	clock   quota.Clock
	observe func(context.Context, Event)

	mu     sync.Mutex
	shared map[leaseKey]int // leases held in the shared store, by key
}

// leaseKey names a Concurrency limit's state: a request's tag and the
// item's key.
type leaseKey struct{ tag, key string }

// hold starts keeping rsv's leases, those of q, a request to provider.
// again is set when the shared store (not the in-process limiter)
// decided it: it takes the leases again should the store lose them
// (retake).
// The round trip counts as activity until the caller takes it off
// (leaseHold.active).
func (l *leases) hold(ctx context.Context, provider, class string, q *quota.Request, rsv *quota.Reservation, again func(context.Context) (*quota.Reservation, error)) *leaseHold {
	h := &leaseHold{l: l, rsv: rsv, provider: provider, class: class, ctx: context.WithoutCancel(ctx),
		every: max(leaseTTL(q)/2, time.Millisecond), stop: make(chan struct{}), done: make(chan struct{})}
	if again != nil {
		h.keys, h.again = leaseKeys(q), again
		l.count(h.keys, 1)
	}
	h.active.Store(1)
	l.observe(ctx, Event{Kind: Leased, Provider: provider, Class: class})
	go h.renew()
	return h
}

// count adds n to the shared leases of keys.
func (l *leases) count(keys []leaseKey, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shared == nil {
		l.shared = make(map[leaseKey]int)
	}
	for _, k := range keys {
		if l.shared[k] += n; l.shared[k] <= 0 {
			delete(l.shared, k)
		}
	}
}

// heldShared returns how many leases of the Concurrency key key in tag
// this process holds in the shared store.
func (l *leases) heldShared(tag, key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shared[leaseKey{tag, key}]
}

// leaseKeys returns the keys of q's Concurrency limits.
func leaseKeys(q *quota.Request) []leaseKey {
	var keys []leaseKey
	for _, it := range q.Items {
		if it.Limit.Kind == quota.Concurrency {
			keys = append(keys, leaseKey{q.Tag, it.Key})
		}
	}
	return keys
}

// renew renews the leases every half TTL while the request shows
// activity; see leaseHold.
func (h *leaseHold) renew() {
	defer close(h.done)
	seen, idle := h.reads.Load(), 0
	for {
		timer := h.l.clock.NewTimer(h.every)
		select {
		case <-h.stop:
			timer.Stop()
			return
		case <-timer.C():
		}
		r := h.reads.Load()
		if h.active.Load() == 0 && r == seen {
			if idle++; idle >= 2 {
				h.expired.Store(true)
				h.l.observe(h.ctx, Event{Kind: LeaseExpired, Provider: h.provider, Class: h.class})
				return
			}
			continue
		}
		seen, idle = r, 0
		err := h.rsv.Renew(h.ctx)
		switch {
		case errors.Is(err, quota.ErrLeaseLost):
			h.retake()
		case err != nil:
			h.l.observe(h.ctx, Event{Kind: StoreError, Provider: h.provider, Class: h.class, Err: err})
		}
	}
}

// end ends the hold of a request that is done with err (nil: its
// response was read to the end or closed): release, unless the request's
// context ended first. Then the caller gave up on a request the vendor
// may still be serving, and counting: a lease given back now would let
// one more request reach the vendor than the cap (its handler has not
// noticed the closed connection yet). Its leases are left to expire, a
// lease TTL after their last renewal at the latest.
func (h *leaseHold) end(ctx context.Context, err error) {
	if err != nil && ctx.Err() != nil {
		h.abandon()
		return
	}
	h.release()
}

// abandon stops the renewals, once, and leaves the leases to expire in
// the store. The in-process limiter stops counting them at once, as after
// a release: it cannot see when they expire, and a count kept for good
// would shrink its share with every abandoned request.
func (h *leaseHold) abandon() {
	h.once.Do(func() {
		close(h.stop)
		<-h.done
		h.l.count(h.keys, -1)
		if !h.expired.Load() { // else reported when the renewals stopped
			h.l.observe(h.ctx, Event{Kind: LeaseExpired, Provider: h.provider, Class: h.class})
		}
	})
}

// retake takes the leases again when the store lost them (an empty
// restart, a flush) or they expired while the request was still in
// flight: a new decision of the stack's Concurrency limits alone, which
// admits only where a lease is free, so it never takes a cap over. Until
// one is free the request runs unregistered, and the next renewal tries
// again; then the store counts it again, and admits no request over the
// cap in its place. The leases of the old reservation still held (a
// stack with two caps may lose one) are given back.
func (h *leaseHold) retake() {
	if h.again == nil {
		return
	}
	rsv, err := h.again(h.ctx)
	if err != nil || rsv == nil || !rsv.Allowed {
		return
	}
	old := h.rsv
	h.rsv = rsv // release reads it only once the renewals have ended
	if err := old.Release(h.ctx); err != nil {
		h.l.observe(h.ctx, Event{Kind: StoreError, Provider: h.provider, Class: h.class, Err: err})
	}
}

// release gives the leases back, once, and stops the renewals.
func (h *leaseHold) release() {
	h.once.Do(func() {
		close(h.stop)
		<-h.done
		h.l.count(h.keys, -1)
		err := h.rsv.Release(h.ctx)
		if err != nil {
			h.l.observe(h.ctx, Event{Kind: StoreError, Provider: h.provider, Class: h.class, Err: err})
		}
		switch {
		case h.expired.Load(): // reported when the renewals stopped
		case err != nil:
			h.l.observe(h.ctx, Event{Kind: LeaseExpired, Provider: h.provider, Class: h.class, Err: err})
		default:
			h.l.observe(h.ctx, Event{Kind: Released, Provider: h.provider, Class: h.class})
		}
	})
}

// leasedBody ends its request's hold of its leases at EOF, at the first
// read error, or on Close, whichever comes first (leaseHold.end).
type leasedBody struct {
	io.ReadCloser
	h   *leaseHold
	ctx context.Context // the request's
}

func (b *leasedBody) Read(p []byte) (int, error) {
	b.h.reads.Add(1)
	b.h.active.Add(1)
	n, err := b.ReadCloser.Read(p)
	b.h.active.Add(-1)
	switch {
	case err == io.EOF:
		b.h.release()
	case err != nil:
		b.h.end(b.ctx, err)
	}
	return n, err
}

func (b *leasedBody) Close() error {
	err := b.ReadCloser.Close()
	b.h.release()
	return err
}

// leaseTTL is the shortest lease TTL of q's Concurrency limits.
func leaseTTL(q *quota.Request) time.Duration {
	var ttl time.Duration
	for _, it := range q.Items {
		if it.Limit.Kind == quota.Concurrency && (ttl == 0 || it.Limit.Period < ttl) {
			ttl = it.Limit.Period
		}
	}
	return ttl
}
