package quota

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// ErrStore is wrapped by every error a Store returns because the store
// itself failed (Redis down, a timeout, a server that cannot serve:
// loading, read-only, out of memory), as opposed to a decision that
// refused the request. Every request would fail the same way for a while,
// so a caller may stop asking the store and fall back.
var ErrStore = errors.New("quota: store failed")

// ErrState is wrapped by every error a Store returns because it could not
// decide this one request although it works: the state under the
// request's keys, or the store's reply for it, is unusable (a key of the
// wrong type, calendar windows the store cannot place, a malformed
// reply). Other requests are unaffected, so it is no reason to stop using
// the store, and the same request is likely to fail again. A caller treats
// an error that wraps none of ErrInvalid, ErrStore, ErrState and the
// context's errors as ErrStore.
var ErrState = errors.New("quota: the request's state in the store is unusable")

// ErrLeaseLost is what Renew returns when a lease of the reservation was
// no longer held: it expired (its renewals came too late), or the store
// lost it (an empty restart, a flush). The request is still in flight, so
// a caller may take a lease again with a new decision; Renew itself never
// does, since the lease's place may be another request's by now.
var ErrLeaseLost = errors.New("quota: a lease of the reservation is no longer held")

// A Store decides requests against stacks of limits and keeps their state.
// Implementations are safe for concurrent use. The store is the one clock:
// every time in a decision is read from the store's clock, never the
// caller's, so a fleet whose machines disagree on the time still agrees on
// the quota.
type Store interface {
	// Reserve decides req atomically: it finds the earliest time at which
	// every limit of the stack (and every pause) admits the request and,
	// when that is within req.MaxWait, charges every limit for that time.
	// Otherwise it changes nothing. A denied request is not an error: the
	// Reservation says Allowed false and when to retry.
	Reserve(ctx context.Context, req *Request) (*Reservation, error)
	// Pause holds back every later request that names key (in tag) among
	// its pauses for d from now on the store's clock. A shorter pause never
	// shortens a longer one already in force.
	Pause(ctx context.Context, tag, key string, d time.Duration) error
}

// An Item is one limit of a stack together with the key that holds its
// state for this request's scope.
type Item struct {
	// Limit is the limit; it must pass Validate.
	Limit *Limit
	// Key names the state of this limit for this scope within the
	// request's Tag, e.g. "peak" or "per-account:acct_1". Build it with
	// KeyOf so that untrusted scope values stay inside their key.
	Key string
	// Cost is how many events the request counts for in this limit. Zero
	// means the request's Cost. It lets one decision charge different
	// limits differently: a model API's requests-per-minute 1 and its
	// tokens-per-minute 1,200; GitHub's hourly quota 1 and its secondary
	// "points" 5 for a POST.
	Cost int64
}

// CostOf returns what the request counts for in item i: the item's Cost,
// else the request's, else 1. A Concurrency item always counts 1: a
// request is one request in flight, whatever it costs elsewhere.
func (r *Request) CostOf(i int) int64 {
	if r.Items[i].Limit != nil && r.Items[i].Limit.Kind == Concurrency {
		return 1
	}
	if c := r.Items[i].Cost; c > 0 {
		return c
	}
	return r.cost()
}

// A PauseKey names a pause: its tag and its key within that tag, the
// arguments Store.Pause takes.
type PauseKey struct {
	Tag, Key string
}

// A Request asks a Store to admit one event against a stack of limits.
type Request struct {
	// Tag groups the keys of one decision. The Redis store makes it the
	// hash tag of every key, so all of them live in one Redis Cluster slot.
	// It must not be empty.
	Tag string
	// Items is the stack. It may be empty only when Pauses is not: a
	// request with no limit of its own is still held back by its pauses.
	Items []Item
	// Pauses are keys (within Tag) of pauses that hold this request back.
	Pauses []string
	// Over is a pause in another tag that holds this request back too:
	// a provider's pause, over the requests in its tenants' tags. The zero
	// value is none. On a Redis Cluster, where a decision reads one slot,
	// the Redis store reads the pause's copy in the request's slot, and on
	// a Ring the copy on the request's shard, which its PauseOver writes
	// (see quota/redisstore's doc).
	Over PauseKey
	// Cost is how many events the request counts for. Zero means 1.
	Cost int64
	// Class is the request's priority class, 0 the top (package doc
	// "Priority classes"). It must be below Classes() of every item whose
	// limit has a Reserve; items without one ignore it.
	Class int
	// MaxWait is the longest wait the caller accepts. A request that
	// could only be admitted later is denied and charges nothing. Zero
	// admits only a request that can go at once. Above LongestWait it
	// counts as LongestWait.
	MaxWait time.Duration
	// Share names the tenant a Fair item is shared by, and its weight
	// (package doc "Fair share"). Items whose limit is not Fair ignore
	// it.
	Share Share
	// Appointment says the request comes back at the appointment a
	// Deferred result gave it: its lane slot is booked already (package
	// doc "Fair share"). Items whose limit is not Fair ignore it.
	Appointment bool
}

// LongestWait is the longest wait a store grants: a Request's MaxWait above
// it counts as LongestWait. It is MaxExact µs (71 years), the bound a pause
// has too: a wait of up to that on top of a limit's own tolerance (also
// bounded by MaxExact) keeps every stored time below 2^53 µs, where a Lua
// number is still an exact integer, and every duration of a Result within
// time.Duration. A longer wait is no wait anyone means.
const LongestWait = MaxExact * time.Microsecond

// MaxWaitMicros returns r.MaxWait in µs, at most LongestWait: what a
// store compares a slot's wait with.
func (r *Request) MaxWaitMicros() int64 {
	return min(r.MaxWait, LongestWait).Microseconds()
}

// Micros converts a store's µs to a Duration, saturating instead of
// overflowing: a Status or Result duration is never negative nor wrapped.
func Micros(us int64) time.Duration {
	const most = int64(math.MaxInt64 / time.Microsecond)
	return time.Duration(min(max(us, 0), most)) * time.Microsecond
}

// cost returns the cost with its default applied.
func (r *Request) cost() int64 {
	if r.Cost == 0 {
		return 1
	}
	return r.Cost
}

// Validate reports whether the request is possible: a tag, a stack of
// valid limits (or at least one pause), keys, and a cost that each limit
// can ever admit.
func (r *Request) Validate() error {
	if r.Tag == "" {
		return fmt.Errorf("%w request: empty tag", ErrInvalid)
	}
	if len(r.Items) == 0 && len(r.Pauses) == 0 {
		return fmt.Errorf("%w request: empty stack and no pauses", ErrInvalid)
	}
	if r.Cost < 0 {
		return fmt.Errorf("%w request: cost %d is negative", ErrInvalid, r.Cost)
	}
	if r.MaxWait < 0 {
		return fmt.Errorf("%w request: max wait %v is negative", ErrInvalid, r.MaxWait)
	}
	for i := range r.Items {
		it := &r.Items[i]
		if it.Limit == nil {
			return fmt.Errorf("%w request: item %d has no limit", ErrInvalid, i)
		}
		if err := it.Limit.Validate(); err != nil {
			return err
		}
		if it.Key == "" {
			return fmt.Errorf("%w limit %q: empty key", ErrInvalid, it.Limit.Name)
		}
		if it.Cost < 0 {
			return fmt.Errorf("%w limit %q: cost %d is negative", ErrInvalid, it.Limit.Name, it.Cost)
		}
		if c, capacity := r.CostOf(i), it.Limit.Capacity(); c > capacity {
			return fmt.Errorf("%w limit %q: cost %d exceeds its capacity %d, so it could never be admitted",
				ErrInvalid, it.Limit.Name, c, capacity)
		}
		if it.Limit.Reserve != nil {
			if err := it.Limit.validateClass(r.Class, r.CostOf(i)); err != nil {
				return err
			}
		}
	}
	if r.Class < 0 {
		return fmt.Errorf("%w request: class %d is negative", ErrInvalid, r.Class)
	}
	if r.Share != (Share{}) && r.HasFair() {
		if err := r.validateShare(); err != nil {
			return err
		}
	}
	for _, p := range r.Pauses {
		if p == "" {
			return fmt.Errorf("%w request: empty pause key", ErrInvalid)
		}
	}
	if (r.Over.Tag == "") != (r.Over.Key == "") {
		return fmt.Errorf("%w request: over pause %q in tag %q: want both or neither", ErrInvalid, r.Over.Key, r.Over.Tag)
	}
	return nil
}

// Decider values that are not an index into Request.Items.
const (
	// NoDecider: no limit held the request back; it may go at once.
	NoDecider = -1
	// PausedDecider: a pause set the time, not a limit.
	PausedDecider = -2
)

// Status is the state of one limit after a decision.
type Status struct {
	// Remaining is how many more events of cost 1 the limit would admit at
	// once, at the decision's slot time (at the store's now when denied).
	Remaining int64
	// ResetAfter is how long until the limit is back to its full capacity:
	// a GCRA limit drained, the current calendar window ended, or every
	// bucket of a rolling window expired.
	ResetAfter time.Duration
	// Rate is, for a limit with Learn set, the rate the decision ran it
	// at: its Rate, or the larger one learned (package doc "Learning").
	// Zero for other limits.
	Rate int64
}

// A Result is what a Store decided.
type Result struct {
	// Allowed is true when the request was admitted and charged.
	Allowed bool
	// Deferred is set when a request with a Fair item was not admitted
	// near now, but the tenant's lane booked a slot for it (package doc
	// "Fair share"): the caller comes back after RetryAfter with
	// Request.Appointment set. A Deferred result is only given when
	// RetryAfter is within the request's MaxWait; it is not Allowed, and
	// holds nothing to cancel. (Beside Allowed, so that a Result is no
	// larger than before.)
	Deferred bool
	// Wait is, when Allowed, how long from the decision until the
	// reserved slot; zero means go at once.
	Wait time.Duration
	// RetryAfter is, when not Allowed, how long until the stack would
	// admit the request if nobody else reserved meanwhile.
	RetryAfter time.Duration

	// Decider is the index in Request.Items of the limit that set the
	// slot time (the one that made the request wait or be denied), or
	// NoDecider, or PausedDecider.
	Decider int
	// Limits holds one Status per Request.Items entry, in order.
	Limits []Status
}

// A Reservation is an admitted or denied decision. An admitted reservation
// holds its slot in every limit until it is used or cancelled, and its
// leases (Concurrency limits) until they are released or expire.
type Reservation struct {
	Result
	ops       ReservationOps
	cancelled atomic.Bool
	released  atomic.Bool
	settled   atomic.Bool
}

// ReservationOps are what a Store gives a Reservation to act on its
// decision afterwards, each in one round trip. A nil func means there is
// nothing to do (a denial; a slot already due without leases has nothing
// to give back).
type ReservationOps struct {
	// Cancel gives the slot back (see Reservation.Cancel), leases
	// included.
	Cancel func(context.Context) error
	// Sync drains the state of some items to what the vendor reports;
	// see Reservation.Sync. Every Item is in range (Reservation.Sync
	// checks); a negative Remaining counts as 0.
	Sync func(context.Context, []Observed) error
	// Release gives the leases back.
	Release func(context.Context) error
	// Renew extends every lease still held to its TTL from now (never
	// shortening it).
	Renew func(context.Context) error
	// Settle books the actual costs, one per item (below zero: as
	// charged); see Reservation.Settle.
	Settle func(ctx context.Context, actual []int64) error
}

// NewReservation is for Store implementations: it wraps a decision and
// what acts on it afterwards.
func NewReservation(res Result, ops ReservationOps) *Reservation {
	return &Reservation{Result: res, ops: ops}
}

// Cancel gives the reservation's slot back (package doc "Cancel"). Call
// it when the caller will not use a slot it waited for: the context ended,
// the request was dropped. A window gets the cost back at once. A GCRA
// limit gets it back once no later reservation holds the limit: at once
// for the latest reservation; for an earlier one when every later one has
// been cancelled too, in any order, so waiters cancelled together give all
// their slots back. While a later reservation stays, the slot stays
// reserved until its time passes: that later slot may have been set by
// another limit or a pause, and giving back any part of this one could
// over-admit. A cancel after the slot's time, a second cancel and a cancel
// of a denied reservation give back nothing. A reservation that waited
// for its slot gives its leases back too; one admitted at once releases
// them with Release.
func (r *Reservation) Cancel(ctx context.Context) error {
	if r == nil || r.ops.Cancel == nil || !r.Allowed || !r.cancelled.CompareAndSwap(false, true) {
		return nil
	}
	r.released.Store(true)
	return r.ops.Cancel(ctx)
}

// HoldsLeases reports whether the reservation took leases (its stack has
// a Concurrency limit and it was admitted): then the caller releases them
// when the request is done (Release), and renews them (Renew) at least
// once per lease TTL while it is still in flight.
func (r *Reservation) HoldsLeases() bool {
	return r != nil && r.Allowed && r.ops.Release != nil
}

// Release gives the reservation's leases back (package doc "Leases"), in
// one step. A second Release, and a Release after Cancel, do nothing.
func (r *Reservation) Release(ctx context.Context) error {
	if !r.HoldsLeases() || !r.released.CompareAndSwap(false, true) {
		return nil
	}
	return r.ops.Release(ctx)
}

// Renew extends the reservation's leases that are still held to their
// TTL from now, in one step: a request still in flight keeps its leases,
// while those of a process that died expire. A lease that has expired
// already, or that the store lost, is not taken again (another request
// may hold its place): Renew then returns ErrLeaseLost. After Release it
// does nothing.
func (r *Reservation) Renew(ctx context.Context) error {
	if !r.HoldsLeases() || r.released.Load() {
		return nil
	}
	return r.ops.Renew(ctx)
}

// Settle books what the request actually cost, once it is known (a model
// API's tokens used, a GraphQL query's actual cost), in one step (package
// doc "Settle"). actual has one entry per item of the request: the actual
// cost in that limit, or -1 to keep what was charged; Concurrency and
// Rolling items are ignored. An excess is charged even past the limit, as a debt that delays
// the requests after it, by at most about a period (Limit.DebtReach); an
// actual above the limit's rate is malformed (Implausible) and keeps the
// estimate; a refund comes back where it cannot let later
// requests exceed the limit, and is dropped otherwise. A second Settle, and
// a Settle of a denied or cancelled reservation, do nothing.
func (r *Reservation) Settle(ctx context.Context, actual []int64) error {
	if r == nil || r.ops.Settle == nil || !r.Allowed || r.cancelled.Load() {
		return nil
	}
	if len(actual) != len(r.Limits) {
		return fmt.Errorf("%w settle: %d costs for %d limits", ErrInvalid, len(actual), len(r.Limits))
	}
	for _, c := range actual {
		if c > MaxExact {
			return fmt.Errorf("%w settle: cost %d is above 2^51", ErrInvalid, c)
		}
	}
	if !r.settled.CompareAndSwap(false, true) {
		return nil
	}
	return r.ops.Settle(ctx, actual)
}

// Observed is what the vendor reported, on the response to a
// reservation's request, about one limit of its stack.
type Observed struct {
	// Item is the limit's index in the reservation's Request.Items.
	Item int
	// Remaining is how many more events of cost 1 the vendor would admit
	// at once, in the limit's own units (the caller maps the vendor's
	// counter onto the limit). Negative counts as 0.
	Remaining int64
	// Limit is, for a limit with Learn set, the limit the vendor states
	// in the limit's units per its Period (headroom applied), which the
	// store records for every process's later decisions (package doc
	// "Learning"); zero states none. Other limits ignore it.
	Limit int64
	// LimitOnly says the observation states only Limit: Remaining is not
	// applied.
	LimitOnly bool
}

// Sync drains the state of the observed limits to what the vendor reports
// (package doc "Sync"), in one round trip: the vendor is the one who
// counts, and its account may be shared with traffic the store never saw,
// or the store may have forgotten its state. Each observed limit is left
// admitting at most Remaining more at once on top of the reservations
// made after this one, which stay charged: a response sent before them
// cannot have counted them. Sync never loosens a limit: an observation
// above what the store holds changes nothing.
//
// A rolling window (Kind Rolling) is not synced: its observations are
// ignored, since a trailing count cannot be placed in the buckets the
// vendor's events fell in. Nor is a Concurrency limit: its leases are
// what is in flight, which Release gives back.
//
// A learning limit (Limit.Learn) also records the vendor's stated Limit,
// ordered by the reservations' slot times: a figure stated in the
// response of a reservation older than the one that set the recorded
// figure changes nothing, so a stale response cannot undo a newer plan.
//
// Call it only with figures below the reservation's own Status.Remaining,
// or a stated limit other than its Status.Rate, or it is a round trip
// that changes nothing. A Sync of a denied or
// cancelled reservation, or with no observations, does nothing. An item
// index outside the stack is an error wrapping ErrInvalid, and nothing is
// synced.
func (r *Reservation) Sync(ctx context.Context, obs []Observed) error {
	if r == nil || r.ops.Sync == nil || !r.Allowed || len(obs) == 0 || r.cancelled.Load() {
		return nil
	}
	for _, o := range obs {
		if o.Item < 0 || o.Item >= len(r.Limits) {
			return fmt.Errorf("%w sync: item %d of a stack of %d", ErrInvalid, o.Item, len(r.Limits))
		}
	}
	return r.ops.Sync(ctx, obs)
}
