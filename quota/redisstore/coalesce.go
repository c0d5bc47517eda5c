package redisstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"time"
)

// Coalescing. Decisions of one Store that go to the same tag (one hash
// slot) while a decision of that tag is in flight wait for it, then go
// together in one reserve.lua call, which decides them one after the other
// in their order of arrival, each all or nothing on its own, reading and
// writing each shared key once (see reserve.lua, "Requests"). A decision
// that finds no call in flight goes at once, alone, from its caller's
// goroutine: one caller at a time pays nothing for it. Nor does a caller
// whose time would not cover the call in flight and its own: it goes
// alone too (decide). Only stacks of GCRA and window limits are
// coalesced; any other goes alone.

const (
	// lanes is the number of queues decisions are spread over, by tag.
	lanes = 64
	// maxBatch bounds the decisions of one call, and so the time one
	// script holds Redis.
	maxBatch = 64
)

// pending is one decision's part of a reserve.lua call.
type pending struct {
	ctx  context.Context
	tag  string
	keys []string // its KEYS: item keys, then pause keys
	args []any    // its ARGV entries: 3 free slots, then its count, ...
	lone bool     // lone.lua decides it alone or in a run (reserveCall.lone, oneStack)
	done chan reply
}

// reply is one decision's reply of reserve.lua, or the call's error.
type reply struct {
	v   any
	err error
}

// lane is the queue of the decisions of the tags that hash to it.
type lane struct {
	mu    sync.Mutex
	busy  bool      // a call of this lane is in flight
	since time.Time // when it was sent
	queue []*pending
}

// decide runs p's decision, coalesced with others of its tag when alone
// is false, and returns its part of the reply. p is taken by value so that
// a decision that goes at once costs no allocation for it; only a queued
// one is copied to the heap.
//
// Coalescing must never fail a decision that would have succeeded alone.
// A queued decision waits for the call in flight, then for its own: when
// its time left (its context's deadline or the store's timeout) would not
// cover what the call in flight is expected to take still plus a call of
// its own (budget), it goes alone at once, in a call of its own beside
// the one in flight, as it would without coalescing.
func (s *Store) decide(p pending, alone bool) (any, error) {
	if alone {
		return s.call(p.ctx, []*pending{&p})
	}
	l := &s.lanes[maphash.String(s.seed, p.tag)%lanes]
	l.mu.Lock()
	if !l.busy {
		l.busy, l.since = true, time.Now()
		l.mu.Unlock()
		v, err := s.call(p.ctx, []*pending{&p})
		s.next(l)
		return v, err
	}
	now := time.Now()
	budget := s.budget()
	deadline := now.Add(s.timeout)
	if d, ok := p.ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if ahead := max(budget-now.Sub(l.since), 0); deadline.Sub(now) < ahead+budget {
		l.mu.Unlock()
		return s.call(p.ctx, []*pending{&p})
	}
	return s.wait(l, p, deadline, budget)
}

// budget is the time a call is expected to take, with a margin: one and a
// half times the recent calls' mean (roundTrip); 0 before the first.
func (s *Store) budget() time.Duration {
	rt := time.Duration(s.roundTrip.Load())
	return rt + rt/2
}

// observeCall folds the duration d of a call that succeeded into
// roundTrip, a moving mean over about the last four calls.
func (s *Store) observeCall(d time.Duration) {
	old := s.roundTrip.Load()
	if old == 0 {
		s.roundTrip.Store(int64(d))
		return
	}
	s.roundTrip.Store(old + (int64(d)-old)/4) // a lost race loses one sample
}

// wait queues p on lane l, whose call is in flight, and waits for its
// reply until deadline. If it is still queued when its time left falls
// below budget, it leaves the queue and goes alone (see decide).
func (s *Store) wait(l *lane, queued pending, deadline time.Time, budget time.Duration) (any, error) {
	p := &queued
	p.done = make(chan reply, 1)
	l.queue = append(l.queue, p)
	l.mu.Unlock()
	// One timer for both: it fires at the point of leaving, then the
	// caller's time runs on to deadline.
	t := timers.Get().(*time.Timer)
	t.Reset(time.Until(deadline.Add(-budget)))
	defer release(t)
	select {
	case r := <-p.done:
		return r.v, r.err
	case <-t.C:
	case <-p.ctx.Done():
	}
	if p.ctx.Err() == nil && budget > 0 && s.unqueue(l, p) {
		ctx, cancel := context.WithDeadline(p.ctx, deadline)
		defer cancel()
		return s.call(ctx, []*pending{p})
	}
	if p.ctx.Err() == nil && budget > 0 { // sent: its reply is on the way
		t.Reset(time.Until(deadline))
		select {
		case r := <-p.done:
			return r.v, r.err
		case <-t.C:
		case <-p.ctx.Done():
		}
	}
	s.unqueue(l, p) // if not sent, nothing was decided
	select {
	case r := <-p.done: // a reply that raced the deadline still counts
		return r.v, r.err
	default:
	}
	if err := p.ctx.Err(); err != nil {
		return nil, err
	}
	return nil, context.DeadlineExceeded
}

// timers are stopped timers for wait: a queued decision takes one and
// gives it back, where a context with a deadline of its own cost it five
// allocations, and its wait 4.0 µs of Go time instead of 1.6 (8 callers,
// bench/redisrate). Since Go 1.23 a stopped timer keeps no stale tick;
// wait still drains one that fired unread, since a program can ask for
// the old timers (GODEBUG asynctimerchan=1), and a stale tick would make
// the next waiter leave, or give up, at once.
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// release stops t and gives it back to timers with no tick left in it.
func release(t *time.Timer) {
	if !t.Stop() {
		select { // a tick an asynctimerchan=1 program left unread
		case <-t.C:
		default:
		}
	}
	timers.Put(t)
}

// unqueue takes p out of l's queue and reports whether it was there (not
// sent).
func (s *Store) unqueue(l *lane, p *pending) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, q := range l.queue {
		if q == p {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			return true
		}
	}
	return false
}

// next hands lane l on after a call: to a worker that sends what was
// queued meanwhile (one whose stack has grown through go-redis already,
// as a new goroutine's would again on every spell of drain), or to the
// next caller.
func (s *Store) next(l *lane) {
	l.mu.Lock()
	if len(l.queue) == 0 {
		l.busy = false
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	s.workers.do(func() { s.drain(l) })
}

// drain sends l's queue, a tag at a time and up to maxBatch decisions per
// call, until it is empty.
func (s *Store) drain(l *lane) {
	for {
		l.mu.Lock()
		if len(l.queue) == 0 {
			l.busy = false
			l.mu.Unlock()
			return
		}
		// The decisions of the first one's tag, in order; the others
		// keep their places.
		tag := l.queue[0].tag
		var batch []*pending
		rest := l.queue[:0]
		for _, q := range l.queue {
			if q.tag == tag && len(batch) < maxBatch {
				batch = append(batch, q)
			} else {
				rest = append(rest, q)
			}
		}
		clear(l.queue[len(rest):])
		l.queue = rest
		l.since = time.Now()
		l.mu.Unlock()
		// The call serves every caller in it, so no caller's end ends it:
		// it keeps the first one's values, bounded by the store's timeout.
		v, err := s.call(context.WithoutCancel(batch[0].ctx), batch)
		if len(batch) == 1 {
			batch[0].done <- reply{v, err}
			continue
		}
		vals, _ := v.([]any)
		for i, q := range batch {
			if err != nil {
				q.done <- reply{nil, err}
			} else {
				q.done <- reply{vals[i], nil}
			}
		}
		// Let the callers just woken run before the next batch is taken:
		// callers that ask again at once (a worker pool, a crawler) join
		// it, so calls grow and Redis decides a run of one stack for a few
		// µs a decision; callers that went off to make their request cost
		// this goroutine one turn of the scheduler. Measured at 8 callers
		// (bench/redisrate/README.md, "A yield before the next batch,
		// again"): 6–7 decisions a call instead of 4, 1.11–1.26× Allow for
		// one limit instead of 0.89–1.04×.
		runtime.Gosched()
	}
}

// call runs reserve.lua for batch, or lone.lua (issue 22's lean path) for
// a lone stack of GCRA limits and calendar windows alone in its call or
// repeated by every decision of the batch (oneStack), and returns, for a
// batch of one, its reply, else every reply (checked to be one per
// decision).
func (s *Store) call(ctx context.Context, batch []*pending) (any, error) {
	var keys []string
	var args []any
	sc := reserveScript
	switch {
	case len(batch) == 1:
		keys, args = batch[0].keys, batch[0].args
		if batch[0].lone {
			sc = loneScript
		}
	case oneStack(batch):
		keys, args, sc = batch[0].keys, loneArgs(batch), loneScript
	default:
		nk, na := 0, 3
		for _, p := range batch {
			nk += len(p.keys)
			na += len(p.args) - 3
		}
		keys = make([]string, 0, nk)
		args = make([]any, 3, na)
		for _, p := range batch {
			keys = append(keys, p.keys...)
			args = append(args, p.args[3:]...)
		}
	}
	args[0], args[1], args[2] = s.nowArg(), s.slack, len(batch)
	begin := time.Now()
	v, err := s.run(ctx, sc, keys, args)
	if err != nil {
		return nil, err
	}
	s.observeCall(time.Since(begin))
	if sc == loneScript {
		return loneReplies(v, len(batch))
	}
	vals, ok := v.([]any)
	if !ok || len(vals) != len(batch) {
		return nil, fmt.Errorf("%w: %T of %d replies, want an array of %d", errReply, v, len(vals), len(batch))
	}
	if len(batch) == 1 {
		return vals[0], nil
	}
	return vals, nil
}

// loneReplies splits lone.lua's reply v into the replies of its m
// decisions, as call returns them: for m = 1 the reply itself. Each is
// a packed, its part of the string lone.lua packed them in; an array of
// one error is every decision's.
func loneReplies(v any, m int) (any, error) {
	if vals, ok := v.([]any); ok && len(vals) == 1 {
		if _, ok := vals[0].(error); ok {
			if m == 1 {
				return vals[0], nil
			}
			each := make([]any, m)
			for i := range each {
				each[i] = vals[0]
			}
			return each, nil
		}
	}
	str, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%w: %T for %d packed replies, want a string", errReply, v, m)
	}
	w := len(str) / m // bytes per reply
	if w < 4*8 || w%8 != 0 || len(str) != m*w {
		return nil, fmt.Errorf("%w: %d bytes for %d packed replies", errReply, len(str), m)
	}
	if m == 1 {
		return packed(str), nil
	}
	each := make([]any, m)
	for i := range each {
		each[i] = packed(str[i*w : (i+1)*w])
	}
	return each, nil
}

// oneStack reports whether every decision of batch is lone.lua's and the
// same request as the first but for its max wait: the same keys, the same
// items and costs. lone.lua then reads and writes each key once for the
// whole batch and makes each further decision with arithmetic alone, where
// reserve.lua would parse and check each request of its own. A process's
// busy tag is mostly one stack, so most coalesced calls are such runs.
func oneStack(batch []*pending) bool {
	first := batch[0]
	if !first.lone {
		return false
	}
	for _, p := range batch[1:] {
		if !p.lone || len(p.keys) != len(first.keys) || len(p.args) != len(first.args) {
			return false
		}
		for i, k := range p.keys {
			if k != first.keys[i] {
				return false
			}
		}
		// args[4] is the max wait; args[0:3] are the call's (call).
		if p.args[3] != first.args[3] {
			return false
		}
		for i := 5; i < len(p.args); i++ {
			if p.args[i] != first.args[i] {
				return false
			}
		}
	}
	return true
}

// loneArgs returns lone.lua's ARGV for the run batch (oneStack): the
// first decision's, then the max wait of each other decision in order.
func loneArgs(batch []*pending) []any {
	first := batch[0].args
	args := make([]any, len(first), len(first)+len(batch)-1)
	copy(args, first)
	for _, p := range batch[1:] {
		args = append(args, p.args[4])
	}
	return args
}
