package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/quota"
)

// The Store is a quota.LeaseNotifier: a release anywhere in the fleet
// wakes the first waiter for that key in every process that has one.
//
// after.lua's "release" (and cancel.lua's lease) PUBLISHes the
// concurrency key on one channel per store prefix, <prefix>!released.
// A Store subscribes to it only while it has waiters: the first
// WatchLeases subscribes (one round trip, confirmed before it returns, so
// that the decision the waiter makes next cannot miss a release), and the
// last waiter's Done unsubscribes and stops the goroutine that reads the
// messages. A Store starts nothing otherwise, and has no Close.
//
// Plain PUBLISH, not Redis 7's sharded SPUBLISH: a sharded channel lives
// in one slot, so the store would need a subscription per tag (per
// cluster node) instead of one. A cluster forwards a PUBLISH to every
// node, which costs a message on the cluster bus per release; the
// subscriber may be on any node. A Ring does not forward: a release is
// published on the shard of its key, so on a Ring the store subscribes on
// every shard the Ring has when the first waiter comes (a shard added
// while waiters remain is heard only once they have all left and a new
// first waiter subscribes again). A waiter whose release nobody
// hears wakes at the lease expiry its decision reported or at the end of
// its wait, as it does whenever a message is lost (a reconnect of a
// subscription; an expiry, which nobody announces).
type notifier struct {
	mu      sync.Mutex
	waiters int             // lease waiters and pause watchers
	subs    []*redis.PubSub // while waiters > 0: one, or one per Ring shard
	stop    chan struct{}   // closed to end the readers
	readers sync.WaitGroup  // one reader per subscription
	queues  quota.LeaseQueues
	pauses  pauseBoard
}

var (
	_ quota.LeaseNotifier = (*Store)(nil)
	_ quota.PauseNotifier = (*Store)(nil)
)

// channel is the channel releases are announced on.
func (s *Store) channel() string { return s.prefix + "!released" }

// pauseChannel is the channel pauses are announced on (pause.lua). The
// same subscription hears both channels.
func (s *Store) pauseChannel() string { return s.prefix + "!paused" }

// The Store is a quota.PauseNotifier too: pause.lua PUBLISHes each pause
// it sets, "<d µs> <pause key>", and a Store that has slot waiters
// (WatchPauses) listens on the same subscription as its lease waiters.
// A pause is held from when this process hears of it, for d on its own
// clock, so the clocks of the fleet never meet; the pauses the Store sets
// itself are noted at once. A waiter learns of another process's pause
// one PUBLISH delivery after it was set, or not at all while this process
// was not subscribed: between the decision of its first waiter after an
// idle spell and that waiter's subscription (one round trip), and while
// a broken subscription reconnects.

// WatchPauses listens for the fleet's pauses until stop is called; see
// quota.PauseNotifier. The first watcher or lease waiter of the process
// subscribes (one round trip); the others cost nothing.
func (s *Store) WatchPauses(ctx context.Context) (stop func(), err error) {
	n := &s.notify
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := s.join(ctx); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(s.leave) }, nil
}

// join counts one more waiter or watcher, subscribing for the process's
// first; s.notify.mu is held. A failed subscription counts nobody.
func (s *Store) join(ctx context.Context) error {
	n := &s.notify
	if n.waiters == 0 {
		if err := s.subscribe(ctx); err != nil {
			return err
		}
	}
	n.waiters++
	return nil
}

// PausedFor returns how much longer the pause key in tag holds requests
// back, as far as this process knows; see quota.PauseNotifier.
func (s *Store) PausedFor(tag, key string) time.Duration {
	return s.notify.pauses.left(s.PauseKey(tag, key), s.now())
}

// now is the time on this process's clock: the store's injected clock in
// tests.
func (s *Store) now() time.Time {
	if s.clock != nil {
		return s.clock.Now()
	}
	return time.Now()
}

// pauseBoard holds the pauses this process knows of, by pause key, until
// they end: at most twice the pause keys paused at once across the fleet
// (and 64).
type pauseBoard struct {
	mu    sync.Mutex
	until map[string]time.Time
	// sweepAt is the size at which note next drops the pauses that have
	// ended: twice what was left after the last sweep, so a note costs
	// O(1) amortized however many pauses are in force.
	sweepAt int
}

// note holds the pause key pk for d from now, unless a longer pause holds
// it already.
func (b *pauseBoard) note(pk string, d time.Duration, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.until == nil {
		b.until = make(map[string]time.Time)
	}
	if len(b.until) >= b.sweepAt {
		for k, u := range b.until {
			if !u.After(now) {
				delete(b.until, k)
			}
		}
		b.sweepAt = max(2*len(b.until), 64)
	}
	if u := now.Add(d); u.After(b.until[pk]) {
		b.until[pk] = u
	}
}

// left returns how long the pause key pk is held from now, or zero.
func (b *pauseBoard) left(pk string, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.until[pk].Sub(now), 0)
}

// heard notes a pause announced on the pause channel; a payload that is
// not "<d µs> <key>" is ignored.
func (s *Store) heard(payload string) {
	ds, pk, ok := strings.Cut(payload, " ")
	us, err := strconv.ParseInt(ds, 10, 64)
	if !ok || err != nil || us <= 0 || us > quota.MaxExact {
		return
	}
	s.notify.pauses.note(pk, time.Duration(us)*time.Microsecond, s.now())
}

// WatchLeases queues a waiter for a lease of key in tag, subscribing to
// the store's release announcements when it is the process's first
// waiter; see quota.LeaseNotifier. An error says the subscription failed
// (wrapping quota.ErrStore, or the context's error); the waiter then has
// only its expiry timer.
func (s *Store) WatchLeases(ctx context.Context, tag, key string) (*quota.LeaseWaiter, error) {
	n := &s.notify
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := s.join(ctx); err != nil {
		return nil, err
	}
	return n.queues.Join(s.Key(tag, key), s.leave), nil
}

// subscribe subscribes to the channel (on a Ring, on every shard) and
// starts a reader per subscription; the caller holds s.notify.mu.
func (s *Store) subscribe(ctx context.Context) error {
	n := &s.notify
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var subs []*redis.PubSub
	var err error
	if ring, ok := s.client.(*redis.Ring); ok {
		var mu sync.Mutex // ForEachShard runs its shards at once
		err = ring.ForEachShard(ctx, func(ctx context.Context, shard *redis.Client) error {
			ps, err := s.confirmed(ctx, shard)
			if ps != nil {
				mu.Lock()
				subs = append(subs, ps)
				mu.Unlock()
			}
			return err
		})
	} else {
		var ps *redis.PubSub
		ps, err = s.confirmed(ctx, s.client)
		if ps != nil {
			subs = append(subs, ps)
		}
	}
	if err != nil {
		for _, ps := range subs {
			_ = ps.Close()
		}
		return s.fail(ctx, "subscribe", err)
	}
	n.subs, n.stop = subs, make(chan struct{})
	for _, ps := range subs {
		n.readers.Add(1)
		go s.read(ps, n.stop)
	}
	return nil
}

// confirmed subscribes c to the channel and waits for Redis to confirm:
// once it has, every later PUBLISH on that server reaches the
// subscription. On failure it returns no subscription.
func (s *Store) confirmed(ctx context.Context, c redis.UniversalClient) (*redis.PubSub, error) {
	ps := c.Subscribe(ctx, s.channel(), s.pauseChannel())
	var err error
	for range 2 { // one confirmation per channel
		v, rerr := ps.ReceiveTimeout(ctx, s.timeout)
		if rerr != nil {
			err = rerr
			break
		}
		if sub, ok := v.(*redis.Subscription); !ok || sub.Kind != "subscribe" {
			err = fmt.Errorf("%w: %T, want a subscription", errReply, v)
			break
		}
	}
	if err != nil {
		_ = ps.Close()
		return nil, err
	}
	return ps, nil
}

// leave counts a waiter out; the last one ends the subscriptions and
// waits for their readers to end.
func (s *Store) leave() {
	n := &s.notify
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.waiters--; n.waiters > 0 {
		return
	}
	close(n.stop)
	for _, ps := range n.subs {
		_ = ps.Close() // ends the reader's blocked receive
	}
	n.readers.Wait()
	n.subs, n.stop = nil, nil
}

// read wakes a waiter per message until stop is closed. A failed receive
// (the connection broke: go-redis reconnects and subscribes again on the
// next one) is retried after the store's timeout; the releases announced
// meanwhile are lost, and their waiters wake at their expiry timers.
func (s *Store) read(ps *redis.PubSub, stop chan struct{}) {
	defer s.notify.readers.Done()
	for {
		msg, err := ps.ReceiveMessage(context.Background())
		if err == nil {
			if msg.Channel == s.pauseChannel() {
				s.heard(msg.Payload)
			} else {
				s.notify.queues.Wake(msg.Payload)
			}
			continue
		}
		if errors.Is(err, redis.ErrClosed) {
			return
		}
		select {
		case <-stop:
			return
		case <-time.After(s.timeout):
		}
	}
}
