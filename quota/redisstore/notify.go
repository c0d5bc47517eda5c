package redisstore

import (
	"context"
	"errors"
	"fmt"
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
// subscriber may be on any node. A Ring's Subscribe listens on the shard
// of the channel's name only: releases on other shards reach nobody, and
// their waiters wake at the lease expiry their decision reported or at the
// end of their wait, as they do whenever a message is lost (a reconnect of
// the subscription; an expiry, which nobody announces).
type notifier struct {
	mu      sync.Mutex
	waiters int           // waiters not Done
	ps      *redis.PubSub // while waiters > 0
	stop    chan struct{} // closed to end the reader
	done    chan struct{} // closed by the reader when it ends
	queues  quota.LeaseQueues
}

var _ quota.LeaseNotifier = (*Store)(nil)

// channel is the channel releases are announced on.
func (s *Store) channel() string { return s.prefix + "!released" }

// WatchLeases queues a waiter for a lease of key in tag, subscribing to
// the store's release announcements when it is the process's first
// waiter; see quota.LeaseNotifier. An error says the subscription failed
// (wrapping quota.ErrStore, or the context's error); the waiter then has
// only its expiry timer.
func (s *Store) WatchLeases(ctx context.Context, tag, key string) (*quota.LeaseWaiter, error) {
	n := &s.notify
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.waiters == 0 {
		if err := s.subscribe(ctx); err != nil {
			return nil, err
		}
	}
	n.waiters++
	return n.queues.Join(s.Key(tag, key), s.leave), nil
}

// subscribe subscribes to the channel and starts the reader; the caller
// holds s.notify.mu.
func (s *Store) subscribe(ctx context.Context) error {
	n := &s.notify
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	ps := s.client.Subscribe(ctx, s.channel())
	// The confirmation: once it is in, every later PUBLISH reaches ps.
	v, err := ps.ReceiveTimeout(ctx, s.timeout)
	if err == nil {
		if sub, ok := v.(*redis.Subscription); !ok || sub.Kind != "subscribe" {
			err = fmt.Errorf("%w: %T, want a subscription", errReply, v)
		}
	}
	if err != nil {
		_ = ps.Close()
		return s.fail(ctx, "subscribe", err)
	}
	n.ps, n.stop, n.done = ps, make(chan struct{}), make(chan struct{})
	go s.read(ps, n.stop, n.done)
	return nil
}

// leave counts a waiter out; the last one ends the subscription and waits
// for its reader to end.
func (s *Store) leave() {
	n := &s.notify
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.waiters--; n.waiters > 0 {
		return
	}
	close(n.stop)
	_ = n.ps.Close() // ends the reader's blocked receive
	<-n.done
	n.ps, n.stop, n.done = nil, nil, nil
}

// read wakes a waiter per message until stop is closed. A failed receive
// (the connection broke: go-redis reconnects and subscribes again on the
// next one) is retried after the store's timeout; the releases announced
// meanwhile are lost, and their waiters wake at their expiry timers.
func (s *Store) read(ps *redis.PubSub, stop, done chan struct{}) {
	defer close(done)
	for {
		msg, err := ps.ReceiveMessage(context.Background())
		if err == nil {
			s.notify.queues.Wake(msg.Payload)
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
