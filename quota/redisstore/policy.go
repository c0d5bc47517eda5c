package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrEvictionPolicy is wrapped (with quota.ErrStore) by the error of every
// decision while a Redis server of the store has a maxmemory-policy other
// than noeviction and Options.AllowEviction is not set: such a server
// drops quota keys under memory pressure, and a dropped key is a spent
// quota admitted again, silently.
var ErrEvictionPolicy = errors.New("redisstore: Redis may evict quota keys")

// policyCheck is the store's check of maxmemory-policy. It runs on the
// first decision rather than in New, so that a Redis that is down when the
// process starts does not stop it from starting (on_store_error decides
// meanwhile); until a check passes, every decision checks first, so that an
// operator who fixes the policy needs no restart.
type policyCheck struct {
	// passed is set once a check passed, was skipped, or is not wanted
	// (AllowEviction); decisions then cost nothing more.
	passed atomic.Bool

	mu     sync.Mutex
	flight *policyFlight // the check under way, shared by every caller
}

// policyFlight is one run of the check; err is set before done is closed.
type policyFlight struct {
	done chan struct{}
	err  error
}

// checkPolicy returns nil once the servers' maxmemory-policy is known to be
// noeviction (or cannot be read, or is allowed); otherwise it checks, once
// for all concurrent callers, and returns the check's failure. It waits at
// most the store's timeout, or until ctx ends.
func (s *Store) checkPolicy(ctx context.Context) error {
	if s.policy.passed.Load() {
		return nil
	}
	s.policy.mu.Lock()
	f := s.policy.flight
	if f == nil {
		f = &policyFlight{done: make(chan struct{})}
		s.policy.flight = f
		// Its own goroutine and context: a caller that gives up must not
		// fail the check for the others, and a client that ignores
		// deadlines must not hold any caller longer than the timeout.
		go s.runPolicyCheck(f)
	}
	s.policy.mu.Unlock()
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	select {
	case <-f.done:
		if f.err != nil {
			return s.fail(ctx, "reserve", f.err)
		}
		return nil
	case <-ctx.Done():
		return s.fail(ctx, "reserve", ctx.Err())
	case <-timer.C:
		return s.fail(ctx, "reserve", fmt.Errorf("checking maxmemory-policy: %w", context.DeadlineExceeded))
	}
}

func (s *Store) runPolicyCheck(f *policyFlight) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	err := byDeadline(ctx, evictionPolicy(ctx, s.client))
	if err == nil {
		s.policy.passed.Store(true)
	}
	s.policy.mu.Lock()
	s.policy.flight = nil
	s.policy.mu.Unlock()
	f.err = err
	close(f.done)
}

// evictionPolicy checks maxmemory-policy on every server the client writes
// to: each master of a Redis Cluster, each shard of a Ring, the one server
// (or the failover client's master) otherwise. A server that refuses
// CONFIG GET is not checked.
func evictionPolicy(ctx context.Context, client redis.UniversalClient) error {
	check := func(ctx context.Context, c redis.Cmdable) error {
		return serverPolicy(ctx, c)
	}
	switch c := client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return check(ctx, m) })
	case *redis.Ring:
		return c.ForEachShard(ctx, func(ctx context.Context, sh *redis.Client) error { return check(ctx, sh) })
	}
	return check(ctx, client)
}

// serverPolicy checks one server's maxmemory-policy.
func serverPolicy(ctx context.Context, c redis.Cmdable) error {
	cfg, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		if configRefused(err) {
			return nil
		}
		return fmt.Errorf("checking maxmemory-policy: %w", err)
	}
	policy, ok := cfg["maxmemory-policy"]
	if !ok || policy == "noeviction" {
		// A server that does not know the setting does not evict by it.
		return nil
	}
	addr := "Redis"
	if cl, ok := c.(*redis.Client); ok {
		addr = "Redis at " + cl.Options().Addr
	}
	return fmt.Errorf("%w: %s has maxmemory-policy %s, so under memory pressure it deletes quota keys "+
		"and requests over a spent quota are admitted again without any error; "+
		"run CONFIG SET maxmemory-policy noeviction there (and set it in its configuration), "+
		"or give the throttle a Redis of its own with noeviction, "+
		"or set redisstore.Options.AllowEviction to accept the risk", ErrEvictionPolicy, addr, policy)
}

// configRefused reports whether err is the server refusing CONFIG GET
// rather than failing: managed Redis services rename or disable CONFIG
// ("unknown command"), an ACL may deny it (NOPERM), a proxy may answer
// with its own error. The policy cannot be read there, which is no reason
// to stop deciding; so any error reply counts, except those that say the
// server is busy for a moment (they fail this decision, and the next one
// checks again).
func configRefused(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	for _, p := range transientReplies {
		if strings.HasPrefix(rerr.Error(), p) {
			return false
		}
	}
	return true
}

// transientReplies start the error replies of a server that will answer
// normally soon: loading its data, running a long script, without its
// master, or a cluster between states.
var transientReplies = []string{"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"}
