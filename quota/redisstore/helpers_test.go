package redisstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/quota"
)

// start is where the clocked tests begin.
var start = time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC)

var prefixes atomic.Int64

// uniquePrefix gives every store of a test binary its own keys, so stores
// can share one redis-server without clearing it.
func uniquePrefix() string { return fmt.Sprintf("t%d:", prefixes.Add(1)) }

// newStore returns a Store on client with its own prefix.
func newStore(t testing.TB, client redis.UniversalClient, clock quota.Clock) *Store {
	t.Helper()
	st, err := New(client, Options{Prefix: uniquePrefix(), Clock: clock, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func gcra(name string, rate int64, period time.Duration, burst int64) *quota.Limit {
	return &quota.Limit{Name: name, Kind: quota.GCRA, Rate: rate, Period: period, Burst: burst}
}

func window(name string, rate int64, unit quota.Unit, loc *time.Location) *quota.Limit {
	return &quota.Limit{Name: name, Kind: quota.Window, Rate: rate, Calendar: quota.Calendar{Unit: unit, Location: loc}}
}

// stack returns a request with one item per limit, keyed by its name.
func stack(tag string, limits ...*quota.Limit) quota.Request {
	req := quota.Request{Tag: tag}
	for _, l := range limits {
		req.Items = append(req.Items, quota.Item{Limit: l, Key: quota.KeyOf(l.Name, "")})
	}
	return req
}

func reserve(t testing.TB, st *Store, req quota.Request, cost int64, maxWait time.Duration) *quota.Reservation {
	t.Helper()
	req.Cost, req.MaxWait = cost, maxWait
	res, err := st.Reserve(context.Background(), &req)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	return res
}

// keyState is what a key holds: its type, value and TTL.
type keyState struct {
	typ   string
	value string
	pttl  time.Duration
}

// snapshot reads every key that starts with prefix.
func snapshot(t testing.TB, c redis.UniversalClient, prefix string) map[string]keyState {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]keyState{}
	for _, k := range keys {
		var ks keyState
		ks.typ = c.Type(ctx, k).Val()
		switch ks.typ {
		case "string":
			ks.value = c.Get(ctx, k).Val()
		case "hash":
			m := c.HGetAll(ctx, k).Val()
			var fs []string
			for f, v := range m {
				fs = append(fs, f+"="+v)
			}
			sort.Strings(fs)
			ks.value = strings.Join(fs, ",")
		case "zset":
			var fs []string
			for _, z := range c.ZRangeWithScores(ctx, k, 0, -1).Val() {
				fs = append(fs, fmt.Sprintf("%v=%.0f", z.Member, z.Score))
			}
			ks.value = strings.Join(fs, ",")
		}
		ks.pttl = c.PTTL(ctx, k).Val()
		out[k] = ks
	}
	return out
}
