package redistest

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Ring is a set of independent redis-server processes that a go-redis
// Ring shards keys over, by its own hashing of each key's hash tag.
type Ring struct {
	// Servers are the shards' servers, shard i named "s<i>".
	Servers []*Server
	// Addrs maps each shard's name to its server's address, as
	// redis.RingOptions.Addrs wants it.
	Addrs map[string]string
}

// StartRing starts n redis-servers, stopped by tb.Cleanup.
func StartRing(tb testing.TB, n int) *Ring {
	tb.Helper()
	r := &Ring{Addrs: map[string]string{}}
	for i := 0; i < n; i++ {
		s := Start(tb)
		r.Servers = append(r.Servers, s)
		r.Addrs[fmt.Sprintf("s%d", i)] = s.Addr
	}
	return r
}

// Client returns a new go-redis Ring over the servers, closed when the
// test ends. opt, when not nil, sets its other options (its Addrs are
// replaced).
func (r *Ring) Client(tb testing.TB, opt *redis.RingOptions) *redis.Ring {
	tb.Helper()
	o := redis.RingOptions{}
	if opt != nil {
		o = *opt
	}
	o.Addrs = r.Addrs
	c := redis.NewRing(&o)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Shard returns the index in Servers of the shard that c sends the keys
// of hash tag tag to, or -1 when c has no shard up for it.
func (r *Ring) Shard(c *redis.Ring, tag string) int {
	sc, err := c.GetShardClientForKey("{" + tag + "}")
	if err != nil {
		return -1
	}
	for i, s := range r.Servers {
		if s.Addr == sc.Options().Addr {
			return i
		}
	}
	return -1
}

// TagPerShard returns, for each server in order, the first of name(0),
// name(1), ... that c sends to that server's shard. It fails tb when
// 10,000 names leave a shard without one (a shard down).
func (r *Ring) TagPerShard(tb testing.TB, c *redis.Ring, name func(i int) string) []string {
	tb.Helper()
	tags := make([]string, len(r.Servers))
	for i, found := 0, 0; found < len(tags); i++ {
		if i == 10000 {
			tb.Fatalf("redistest: no tag of 10,000 for every shard: %q", tags)
		}
		tag := name(i)
		if s := r.Shard(c, tag); s >= 0 && tags[s] == "" {
			tags[s] = tag
			found++
		}
	}
	return tags
}
