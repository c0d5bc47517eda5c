package throttle

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// EventKind says what happened to a request.
type EventKind uint8

const (
	// Decided: the store admitted the request (Wait says for when).
	Decided EventKind = iota + 1
	// Waited: the request slept Wait for its slot and is being sent; or,
	// naming a concurrency limit, it waited Wait for a lease and got one.
	Waited
	// Refused: the stack could not admit the request in time (Wait is the
	// retry-after). In shadow mode the request is sent anyway.
	Refused
	// Cancelled: the request's context ended while it waited; its slot was
	// given back (a request waiting for a lease, or for its appointment
	// in a fair limit, held none). Wait is the wait planned for a slot,
	// the time waited for a lease or an appointment.
	Cancelled
	// UpstreamThrottled: the vendor answered that it throttled the
	// request (Status says how).
	UpstreamThrottled
	// Paused: the scope was paused fleet-wide for Wait after an upstream
	// throttle.
	Paused
	// StoreError: the quota store failed, or failed this request alone
	// (Err says how; it matches quota.ErrState in the second case, and
	// the store stays in use).
	StoreError
	// FellBack: the store failed or rests after failing, so the
	// provider's on_store_error policy (Policy) decided the request:
	// refused it (fail_closed), sent it unthrottled (fail_open) or had the
	// in-process limiter decide (local). Err says why the store did not.
	FellBack
	// Leased: the admitted request holds a lease in each Concurrency
	// limit of its stack, from now until Released or LeaseExpired (it
	// took them at its decision; a waiter's are reported once it goes).
	Leased
	// Released: the request's leases were given back: its response body
	// was read to its end or closed, or the round trip failed.
	Released
	// LeaseExpired: the request's leases were not given back and expire
	// on their TTL in the store, as far as this process knows: its body
	// was neither read nor closed for a whole TTL, so the renewals
	// stopped, or the release failed (Err says how; a StoreError comes
	// first). A process that dies reports nothing: its leases expire all
	// the same.
	LeaseExpired
	// Settled: a request's actual cost in the limit Limit differed from
	// the estimate it reserved, and was settled (Reservation.Settle).
	// Delta is actual - estimate: above zero the excess charged, a debt
	// that the next requests wait out once it takes the limit past its
	// capacity; below zero the refund asked for, which the store gives
	// back only where it cannot let later requests exceed the limit (see
	// package quota, "Settle").
	Settled
	// SettleMalformed: the response reported an actual cost in the limit
	// Limit above the limit's rate, more than it admits in one period or
	// window (quota.Implausible), which no vendor enforcing the limit
	// could have served: the figure was not settled, and the limit keeps
	// the estimate. Delta is the figure reported minus the estimate.
	SettleMalformed
	// Deferred: the request's tenant was over its share of the fair
	// limit Limit (the fair field), so the store booked it an
	// appointment in the tenant's lane instead of a slot: the request
	// waits Wait and then asks again, which ends in Decided or Refused
	// (or Deferred again, when others took the limit first), or in
	// Cancelled when its context ends meanwhile. A deferral holds
	// nothing. In shadow mode (Shadow) the request is sent at once.
	Deferred
)

var kindNames = [...]string{"", "decided", "waited", "refused", "cancelled", "upstream_throttled", "paused", "store_error", "fell_back",
	"leased", "released", "lease_expired", "settled", "settle_malformed", "deferred"}

// String returns the kind in snake case, e.g. "upstream_throttled", or
// EventKind(n) for a kind this version does not know.
func (k EventKind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// An Event is one thing the transport did with one request. Observers must
// not keep Items or Statuses beyond the call: they may be reused.
type Event struct {
	// Kind says what happened; it decides which other fields are set.
	Kind EventKind
	// Provider is the provider's name.
	Provider string
	// Limit names the limit that decided ("pause" for a pause), or "".
	// Waited and Cancelled name the limit that made the request wait.
	Limit string
	// Class is the request's priority class (WithPriority, its route's
	// or its provider's default), one of the provider's classes; "" when
	// the provider declares none, and in the events of no one request
	// (a StoreError of a watch).
	Class string
	// Wait is the wait for the slot (Decided, Waited), the retry-after
	// (Refused), the wait for the appointment (Deferred) or the pause
	// (Paused).
	Wait time.Duration
	// Shadow is true when the provider is in shadow mode: nothing was
	// delayed or refused.
	Shadow bool
	// Status is the upstream response's status (UpstreamThrottled).
	Status int
	// Err is the store's error (StoreError), or why the store did not
	// decide (FellBack), or why the vendor's signal in the body could not
	// be read (UpstreamThrottled: it wraps backoff.ErrMalformed, and the
	// headers gave the delay).
	Err error
	// Policy is the on_store_error policy that decided (FellBack).
	Policy providers.StoreErrorPolicy
	// Delta is, for Settled and SettleMalformed, the actual cost minus
	// the estimate in the limit's units (a model API's tokens).
	Delta int64
	// Calls is, for Decided, Refused and Deferred, how many decisions
	// the request has taken so far, this one included: calls to the
	// store (or, while it fails, to the in-process limiter). 1 for a
	// request decided once; each appointment kept, lease waited for
	// and pause that came during a wait asks again. (A request decided
	// again after a pause reports a Decided event per decision.)
	Calls int
	// Items and Statuses are the stack and its state after the decision
	// (Decided, Refused, Deferred).
	Items    []quota.Item
	Statuses []quota.Status
}

// An Observer is told what the transport does. Observe is called on the
// request's goroutine, so it must be fast and safe for concurrent use.
// ctx is the request's context: a span in it is the caller's (an HTTP
// client span, when otelhttp wraps the transport). A transport may have
// several observers: WithObserver adds one per call.
type Observer interface {
	// Observe is told one event of one request.
	Observe(ctx context.Context, e Event)
}

// SlogObserver logs every event that is not routine to logger: refusals,
// cancellations, upstream throttles, pauses, store errors, fallbacks,
// leases left to expire and malformed usage figures at Warn; waits,
// deferrals to a fair limit's appointment, leases taken and released and
// settled costs at Debug. Decisions that let a request go at once are not
// logged. Scope values (tenant ids) are never logged.
func SlogObserver(logger *slog.Logger) Observer { return slogObserver{logger} }

type slogObserver struct{ l *slog.Logger }

func (o slogObserver) Observe(ctx context.Context, e Event) {
	level := slog.LevelWarn
	switch e.Kind {
	case Decided:
		if e.Wait == 0 {
			return
		}
		level = slog.LevelDebug
	case Waited, Leased, Released, Settled, Deferred:
		level = slog.LevelDebug
	}
	if !o.l.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("provider", e.Provider), slog.String("event", e.Kind.String())}
	if e.Limit != "" {
		attrs = append(attrs, slog.String("limit", e.Limit))
	}
	if e.Class != "" {
		attrs = append(attrs, slog.String("class", e.Class))
	}
	if e.Wait != 0 {
		attrs = append(attrs, slog.Duration("wait", e.Wait))
	}
	if e.Shadow {
		attrs = append(attrs, slog.Bool("shadow", true))
	}
	if e.Status != 0 {
		attrs = append(attrs, slog.Int("status", e.Status))
	}
	if e.Kind == FellBack {
		attrs = append(attrs, slog.String("policy", e.Policy.String()))
	}
	if e.Kind == Settled || e.Kind == SettleMalformed {
		attrs = append(attrs, slog.Int64("delta", e.Delta))
	}
	if e.Calls > 1 {
		attrs = append(attrs, slog.Int("calls", e.Calls))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	o.l.LogAttrs(ctx, level, "throttle", attrs...)
}
