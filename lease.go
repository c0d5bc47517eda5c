package throttle

import (
	"context"
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
	l        leases
	rsv      *quota.Reservation
	provider string
	ctx      context.Context // the request's values, without its cancellation
	every    time.Duration

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
// times their renewals and the observer told about them handed in.
type leases struct {
	clock   quota.Clock
	observe func(context.Context, Event)
}

// hold starts keeping rsv's leases, those of a request to provider; ttl
// is the shortest lease TTL of its stack. The round trip counts as
// activity until the caller takes it off (leaseHold.active).
func (l leases) hold(ctx context.Context, provider string, rsv *quota.Reservation, ttl time.Duration) *leaseHold {
	h := &leaseHold{l: l, rsv: rsv, provider: provider, ctx: context.WithoutCancel(ctx),
		every: max(ttl/2, time.Millisecond), stop: make(chan struct{}), done: make(chan struct{})}
	h.active.Store(1)
	l.observe(ctx, Event{Kind: Leased, Provider: provider})
	go h.renew()
	return h
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
				h.l.observe(h.ctx, Event{Kind: LeaseExpired, Provider: h.provider})
				return
			}
			continue
		}
		seen, idle = r, 0
		if err := h.rsv.Renew(h.ctx); err != nil {
			h.l.observe(h.ctx, Event{Kind: StoreError, Provider: h.provider, Err: err})
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

// abandon stops the renewals, once, and leaves the leases to expire.
func (h *leaseHold) abandon() {
	h.once.Do(func() {
		close(h.stop)
		<-h.done
		if !h.expired.Load() { // else reported when the renewals stopped
			h.l.observe(h.ctx, Event{Kind: LeaseExpired, Provider: h.provider})
		}
	})
}

// release gives the leases back, once, and stops the renewals.
func (h *leaseHold) release() {
	h.once.Do(func() {
		close(h.stop)
		<-h.done
		err := h.rsv.Release(h.ctx)
		if err != nil {
			h.l.observe(h.ctx, Event{Kind: StoreError, Provider: h.provider, Err: err})
		}
		switch {
		case h.expired.Load(): // reported when the renewals stopped
		case err != nil:
			h.l.observe(h.ctx, Event{Kind: LeaseExpired, Provider: h.provider, Err: err})
		default:
			h.l.observe(h.ctx, Event{Kind: Released, Provider: h.provider})
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
