package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/providers"
)

// ringText explains --ring in the help of every command that takes it.
const ringText = `connect to a go-redis Ring: --redis names its shards as NAME=ADDR,... with the
names the fleet's RingOptions.Addrs gives them (the Ring places keys by hashing the names)`

// newRing connects to the go-redis Ring whose shards spec names as
// NAME=ADDR separated by commas, each ADDR a redis:// URL or host:port.
// The Ring hashes shard names, so they must be the fleet's for status to
// read a tenant's keys where the fleet writes them; the user, password,
// database and TLS of the first shard are every shard's. Every call is
// bounded by timeout.
func newRing(spec string, timeout time.Duration) (*redis.Ring, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, usagef("--redis is required with --ring (or set $%s): NAME=ADDR,... for each shard", envRedis)
	}
	if timeout <= 0 {
		return nil, usagef("--timeout %v must be positive", timeout)
	}
	ro := &redis.RingOptions{Addrs: map[string]string{}}
	for i, part := range strings.Split(spec, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" || strings.Contains(name, "://") {
			return nil, usagef("--ring: --redis %q: want NAME=ADDR for each shard, e.g. shard1=10.0.0.1:6379,shard2=10.0.0.2:6379", redactURL(part))
		}
		if _, dup := ro.Addrs[name]; dup {
			return nil, usagef("--ring: shard %q is named twice", name)
		}
		opt, err := parseNode(addr)
		if err != nil {
			return nil, err
		}
		ro.Addrs[name] = opt.Addr
		if i == 0 {
			ro.Username, ro.Password, ro.DB, ro.TLSConfig = opt.Username, opt.Password, opt.DB, opt.TLSConfig
		}
	}
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = timeout, timeout, timeout
	ro.ContextTimeoutEnabled = true
	ro.MaxRetries = -1
	return redis.NewRing(ro), nil
}

// pingShards pings every shard of ring, so that a shard that is down is
// named before a command acts on the others.
func pingShards(ctx context.Context, ring *redis.Ring, timeout time.Duration) error {
	names := make([]string, 0, len(ring.Options().Addrs))
	for name := range ring.Options().Addrs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		addr := ring.Options().Addrs[name]
		c := redis.NewClient(&redis.Options{Addr: addr, Username: ring.Options().Username, Password: ring.Options().Password,
			DB: ring.Options().DB, TLSConfig: ring.Options().TLSConfig, DialTimeout: timeout, ReadTimeout: timeout, MaxRetries: -1})
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := c.Ping(pctx).Err()
		cancel()
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("shard %s of the Redis Ring (%s): %w: check that Redis runs there and that --redis names it", name, addr, err)
		}
	}
	return nil
}

// openRing is storeFlags.open for --ring: a Ring over the shards --redis
// names, every one of which must answer.
func (f *storeFlags) openRing(ctx context.Context, cfg *providers.Config) (*env, error) {
	if f.cluster {
		return nil, usagef("--ring and --cluster: name one kind of Redis")
	}
	ring, err := newRing(f.redis, f.timeout)
	if err != nil {
		return nil, err
	}
	e, err := f.newEnv(cfg, ring)
	if err != nil {
		return nil, err
	}
	if err := pingShards(ctx, ring, f.timeout); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}
