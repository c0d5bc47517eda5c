package quota

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// A PauseNotifier is a Store that tells a process about the pauses set
// anywhere in the fleet (package doc "A pause set while requests wait"),
// so that a request that reserved its slot before a pause, and waits for
// it, does not go out inside the pause.
//
// It is not part of Store for the reason LeaseNotifier is not: a store
// can do without it, at the cost of the vendor's second 429s.
type PauseNotifier interface {
	// WatchPauses has the store listen for pauses set by the fleet from
	// now until stop is called; call it before waiting for a slot, and
	// stop once the wait is over. An error (the store cannot listen)
	// leaves the caller with the pauses its own process sets.
	WatchPauses(ctx context.Context) (stop func(), err error)
	// PausedFor returns how much longer the pause key in tag holds
	// requests back, as far as this process knows: the pauses it set
	// itself, and those announced while it watched. Zero when none.
	PausedFor(tag, key string) time.Duration
}

// A LeaseNotifier is a Store that tells a process's requests waiting for a
// lease when one comes back (package doc "Waiting for a lease"): a
// release wakes the first waiter of this process queued on the key, one
// waiter per lease released.
//
// It is not part of Store because a Store can do without it: a lease also
// comes back by expiry, which no store can announce, so a waiter must wake
// at the soonest expiry the decision reported (its RetryAfter) anyway, and
// that alone is correct, only slower. A notifier makes the wait end when
// the lease is released instead of when the next one would have expired.
// Both stores of this module implement it.
type LeaseNotifier interface {
	// WatchLeases queues a waiter for a lease of the Concurrency item key
	// in tag (a Request's Tag and the Item's Key), behind the waiters of
	// this process already queued on it. Call it before the decision
	// whose refusal the caller will wait on, so that no release in
	// between goes unseen, and call Done on the waiter when the wait is
	// over. An error (the store cannot listen) leaves the caller waiting
	// for the expiry alone.
	WatchLeases(ctx context.Context, tag, key string) (*LeaseWaiter, error)
}

// LeaseQueues are the waiters of one process for leases, a FIFO queue per
// key, for LeaseNotifier implementations: Join queues a waiter, Wake
// wakes the first one of a key. The zero value is ready to use.
type LeaseQueues struct {
	mu     sync.Mutex
	seq    uint64
	queues map[string][]*LeaseWaiter // by id, in arrival order
}

// A LeaseWaiter is one request's place in the queue of a key (see
// LeaseNotifier). Its methods are safe to call on a nil waiter (a store
// that cannot notify): it is then never woken.
//
// A waiter is queued from Join until a wake takes it out; Rearm puts it
// back at the place it had (its arrival order), so a waiter that was woken
// but lost the lease to another process keeps its turn. Done leaves for
// good, and hands a wake the waiter did not use to the next waiter.
type LeaseWaiter struct {
	qs     *LeaseQueues
	id     string
	seq    uint64
	wake   chan struct{} // one token: woken
	queued bool          // guarded by qs.mu
	done   bool          // guarded by qs.mu
	leave  func()
}

// Join queues a waiter on id (a store's name for a Concurrency key) behind
// those queued already. leave, when not nil, is called once the waiter is
// Done, outside any lock: a store that listens only while it has waiters
// counts them with it.
func (qs *LeaseQueues) Join(id string, leave func()) *LeaseWaiter {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.seq++
	w := &LeaseWaiter{qs: qs, id: id, seq: qs.seq, wake: make(chan struct{}, 1), leave: leave}
	qs.insert(w)
	return w
}

// insert queues w at its place by arrival; the caller holds qs.mu.
func (qs *LeaseQueues) insert(w *LeaseWaiter) {
	if qs.queues == nil {
		qs.queues = make(map[string][]*LeaseWaiter)
	}
	q := qs.queues[w.id]
	i, _ := slices.BinarySearchFunc(q, w.seq, func(x *LeaseWaiter, s uint64) int { return cmp.Compare(x.seq, s) })
	qs.queues[w.id] = slices.Insert(q, i, w)
	w.queued = true
}

// remove takes w out of its queue; the caller holds qs.mu.
func (qs *LeaseQueues) remove(w *LeaseWaiter) {
	q := qs.queues[w.id]
	if i := slices.Index(q, w); i >= 0 {
		q = slices.Delete(q, i, i+1)
	}
	if len(q) == 0 {
		delete(qs.queues, w.id)
	} else {
		qs.queues[w.id] = q
	}
	w.queued = false
}

// Wake wakes the first waiter queued on id, if any, and takes it out of
// the queue: a lease of id was released. A release with nobody queued
// wakes nobody; whoever asks next finds the lease free.
func (qs *LeaseQueues) Wake(id string) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.wakeLocked(id)
}

func (qs *LeaseQueues) wakeLocked(id string) {
	q := qs.queues[id]
	if len(q) == 0 {
		return
	}
	w := q[0]
	qs.remove(w)
	w.wake <- struct{}{} // never blocks: a queued waiter holds no token
}

// C returns the channel a wake is sent on: a lease of the key was
// released, decide again (after Rearm).
func (w *LeaseWaiter) C() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.wake
}

// Rearm is called before each decision the waiter makes: it puts the
// waiter back in its queue at its place, if a wake took it out, and
// reports whether it had been woken since the last Rearm (whether the
// coming decision answers a release). A wake sent after Rearm is one the
// coming decision may not have seen, and Done hands it on.
func (w *LeaseWaiter) Rearm() bool {
	if w == nil {
		return false
	}
	w.qs.mu.Lock()
	defer w.qs.mu.Unlock()
	select {
	case <-w.wake:
	default:
	}
	if w.queued || w.done {
		return false
	}
	w.qs.insert(w)
	return true
}

// Done ends the wait: the waiter leaves its queue. It hands a wake on to
// the next waiter of the key when handOn is true (the caller was woken,
// Rearm said so, and did not take the lease: its decision was refused by
// another limit, or it gave up before deciding) and whenever a wake came
// after the last Rearm, which the caller has not decided on: that lease
// may be free, and it is the next waiter's. A second Done does nothing.
func (w *LeaseWaiter) Done(handOn bool) {
	if w == nil {
		return
	}
	w.qs.mu.Lock()
	if w.done {
		w.qs.mu.Unlock()
		return
	}
	w.done = true
	if w.queued {
		w.qs.remove(w)
	} else {
		handOn = true // woken since the last Rearm
	}
	if handOn {
		w.qs.wakeLocked(w.id)
	}
	w.qs.mu.Unlock()
	if w.leave != nil {
		w.leave()
	}
}
