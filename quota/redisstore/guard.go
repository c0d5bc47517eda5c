package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// A call is one call to Redis that bounded runs. A decision's is a
// script (a struct value, so that a client that honours deadlines
// decides without allocating for the guard); the operators' tools pass
// a callFunc.
type call[T any] interface {
	do(ctx context.Context) (T, error)
}

// callFunc is a call written as a func.
type callFunc[T any] func(context.Context) (T, error)

func (f callFunc[T]) do(ctx context.Context) (T, error) { return f(ctx) }

// script is a call of a Lua script: EVALSHA, and EVAL when the server
// does not have the script cached.
type script struct {
	client redis.UniversalClient
	sc     *redis.Script
	keys   []string
	args   []any
}

func (c script) do(ctx context.Context) (any, error) {
	return c.sc.Run(ctx, c.client, c.keys, c.args...).Result()
}

// byDeadline returns err, saying which deadline caused it when ctx's
// deadline has passed: a deadline that reached the socket first shows as
// an i/o timeout, which callers could not tell from a slow network.
func byDeadline(ctx context.Context, err error) error {
	if cerr := ended(ctx); err != nil && cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", cerr, err)
	}
	return err
}

// bounded runs c with the store's timeout: the one timeout guard of every
// call the store makes, decisions (run) and operators' reads (inspect.go)
// alike. It runs c on the caller's goroutine when the client stops a call
// at the context's deadline itself and the store's Redis is near (direct);
// otherwise on one of the store's workers, and the store stops waiting at
// the timeout (or when ctx ends) and lets c finish in the background, a
// reply that raced the deadline still counting.
//
// On a worker, c's own context keeps ctx's values but ends only
// callTimeout after the timeout, whatever the client: the store gives up
// on a call, the call need not give up on its connection. A client that
// honours context deadlines on its sockets (ContextTimeoutEnabled) drops
// a connection whose call the deadline cut, and the next call paid a new
// one (dial, HELLO, CLIENT SETINFO, then the call: about 4 round trips);
// with a round trip of more than a quarter of the timeout, every call then
// timed out and dropped its connection again, and no decision ever
// succeeded. Finished in the background, the call leaves its connection
// in the pool for the next. A direct call is cut at the deadline and may
// drop its connection, which is why it is taken only while the deadline
// is many round trips away: a call it cuts is a hung Redis, not a far one,
// and a cut turns the direct path off until calls are quick again (cut).
func bounded[T any, C call[T]](ctx context.Context, s *Store, c C) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := ctx.Err(); err != nil { // a call nobody waits for would charge
		var zero T
		return zero, err
	}
	if deadline, _ := ctx.Deadline(); s.direct(deadline) {
		begin := time.Now()
		v, err := c.do(ctx)
		if err != nil && ended(ctx) != nil { // the socket's deadline may fire first
			s.cut(time.Since(begin))
		}
		return v, byDeadline(ctx, err)
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	s.workers.do(func() {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout+callTimeout(s.timeout))
		defer ccancel()
		v, err := c.do(cctx)
		done <- result{v, err}
	})
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // a reply that raced the deadline still counts
			return r.v, r.err
		default:
		}
		var zero T
		return zero, ctx.Err()
	}
}

// directMargin is how many call budgets (see budget) a call's time left
// must hold for it to run directly on the caller's goroutine.
const directMargin = 8

// direct reports whether a call that must end by deadline runs directly on
// the caller's goroutine, sparing the handoff to a worker and back (two
// goroutine wake-ups, tens of µs on a busy VM at one caller): only with a
// client that cuts a call at the context's deadline itself (honours), and
// only while the recent calls' budget is below a directMargin-th of the
// time left. Then a call the deadline cuts has run directMargin budgets, a
// Redis that hangs rather than one that is far, and the connection the cut
// may drop costs nothing a hung Redis does not cost anyway. With no call
// measured yet (roundTrip 0: the first calls, or a store whose calls all
// failed) calls go to the workers, which measure it.
func (s *Store) direct(deadline time.Time) bool {
	if !s.honours {
		return false
	}
	budget := s.budget()
	return budget > 0 && time.Until(deadline) > directMargin*budget
}

// cut records a direct call that a deadline (or the caller) ended after d:
// the recent round trip is taken to be at least d, so that the next calls
// go to the workers (d is at least directMargin budgets when a deadline
// cut it) until calls that succeed bring the mean back down.
func (s *Store) cut(d time.Duration) {
	for {
		old := s.roundTrip.Load()
		if int64(d) <= old || s.roundTrip.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// honoursDeadlines reports whether client bounds its socket reads and
// writes by the context's deadline: go-redis does only with
// ContextTimeoutEnabled, and only while it sets deadlines at all (a
// ReadTimeout or WriteTimeout of -2 sets none: kept as -1 in a Client's
// Options, as -2 in a ClusterClient's or a Ring's). Any other client type
// is run on the workers.
func honoursDeadlines(client redis.UniversalClient) bool {
	honours := func(enabled bool, read, write time.Duration) bool {
		return enabled && read >= 0 && write >= 0
	}
	switch c := client.(type) {
	case *redis.Client:
		o := c.Options()
		return honours(o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout)
	case *redis.ClusterClient:
		o := c.Options()
		return honours(o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout)
	case *redis.Ring:
		o := c.Options()
		return honours(o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout)
	}
	return false
}

// callTimeout is how much longer than the timeout a call may run in the
// background once the store has stopped waiting for it: long enough for
// a new connection's handshake and the call (4 round trips) whenever a
// call alone fits the timeout (1 round trip), and at least a second. It
// bounds what a hung Redis holds: a worker and a connection per call.
func callTimeout(timeout time.Duration) time.Duration {
	return max(4*timeout, time.Second)
}

// workers run the calls of a guarded store (see bounded): goroutines that
// stay while calls keep coming, so that a call costs a handoff to a
// goroutine whose stack has already grown through go-redis, not a new
// goroutine that grows its stack again on every call. There are as many
// as calls in flight at once; each exits once it has served nothing for
// a whole workerIdle.
type workers struct {
	jobs chan func() // unbuffered: a send succeeds only to an idle worker
}

// workerIdle is how long an idle worker stays.
const workerIdle = time.Second

// do runs f on an idle worker, or on a new one when none is idle.
func (w *workers) do(f func()) {
	select {
	case w.jobs <- f:
	default:
		go w.work(f)
	}
}

// work runs f, then the jobs of w until it has served none for a whole
// tick.
func (w *workers) work(f func()) {
	f()
	tick := time.NewTicker(workerIdle)
	defer tick.Stop()
	served := true
	for {
		select {
		case f := <-w.jobs:
			f()
			served = true
		case <-tick.C:
			if !served {
				return
			}
			served = false
		}
	}
}
