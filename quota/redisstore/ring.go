package redisstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/quota"
)

// A provider's pause of every tenant on a go-redis Ring (PauseOver).
//
// A Ring sends a script to the shard its first key's hash tag hashes to
// (rendezvous hashing of the shard names, or the Ring's own
// NewConsistentHash), and the shard, a server of its own, lets the script
// read any key it holds: Redis checks slots only in cluster mode. So a
// tenant's decision can read a copy of the provider's pause on the
// tenant's shard if that copy has a name the decision can build without
// knowing the shard. The copy has the same name on every shard,
// <prefix>{<tag>}:!copy:{<tag>}:!pause:<key> (writeCopy with the pause's
// own tag for filler), and PauseOver writes it on each shard directly,
// through the shard's own client, not through the Ring's routing, which
// would put all of them on one shard. No shard, name or hash function of
// the Ring is needed to name it, so a Ring of any shards and any hashing
// works, and one whose shards change still finds the copy on every shard
// that was up when the pause was set.
//
// The copy's name is not the pause's own (a decision on the pause's own
// shard could read the pause itself): a pause that Pause set, not
// PauseOver, then holds no tenant on any shard, as on a cluster, instead
// of the tenants of one shard.
//
// A shard that is down when PauseOver runs gets no copy. While it is down
// the Ring sends its tenants to the shards that are up, which hold one;
// once it is back, its tenants are not held. PauseOver says so with an
// error (the pause and the other copies are set), and calling it again
// once the shard is up writes the missing copy. ResumeOver likewise:
// a copy left on a shard that was down holds its tenants until the copy
// expires, so it fails until every shard has been reached.

// eachShard runs one command of do on key on every shard of the store's
// Ring that is up, through the shard's own client, in parallel, bounded
// by the store's timeout; op names the call in its error. It fails when
// a shard the Ring was made with (RingOptions.Addrs) was not reached: it
// is down, as far as the Ring's heartbeat knows.
func (s *Store) eachShard(ctx context.Context, op, key string, do func(ctx context.Context, pipe redis.Pipeliner, k string)) error {
	ring := s.client.(*redis.Ring)
	var mu sync.Mutex
	reached := map[string]bool{}
	_, err := bounded[struct{}](ctx, s, callFunc[struct{}](func(ctx context.Context) (struct{}, error) {
		err := ring.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
			pipe := c.Pipeline()
			do(ctx, pipe, key)
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("shard %s: %w", c.Options().Addr, err)
			}
			mu.Lock()
			reached[c.Options().Addr] = true
			mu.Unlock()
			return nil
		})
		return struct{}{}, err
	}))
	if err != nil {
		return s.fail(ctx, op, err)
	}
	mu.Lock()
	defer mu.Unlock()
	var missed []string
	for name, addr := range ring.Options().Addrs {
		if !reached[addr] {
			missed = append(missed, name+" ("+addr+")")
		}
	}
	if len(missed) > 0 {
		sort.Strings(missed)
		return fmt.Errorf("redisstore: %s: %w: shard %s not reached: the Ring reports it down; "+
			"the copy there decides its tenants once it is back, so run it again when every shard is up",
			op, quota.ErrStore, strings.Join(missed, ", "))
	}
	return nil
}
