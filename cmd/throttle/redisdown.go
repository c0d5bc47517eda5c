package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisDown explains a failed PING of client: which address, what failed
// and what to check. The client's own error is often only "context
// deadline exceeded" (it retries a refused dial until the deadline), so a
// plain dial of each address, bounded by timeout, finds the cause.
func redisDown(ctx context.Context, client redis.UniversalClient, spec string, timeout time.Duration, err error) error {
	var addrs []string
	switch c := client.(type) {
	case *redis.Client:
		addrs = []string{c.Options().Addr}
	case *redis.ClusterClient:
		addrs = c.Options().Addrs
	}
	where := fmt.Sprintf("Redis %s", redactURL(spec))
	for _, addr := range addrs[:min(len(addrs), 3)] {
		d := net.Dialer{Timeout: timeout}
		conn, derr := d.DialContext(ctx, "tcp", addr)
		if derr != nil {
			var op *net.OpError
			if errors.As(derr, &op) {
				derr = op.Err
			}
			return fmt.Errorf("%s: cannot connect to %s (%v): check that Redis runs there and that --redis (or $%s) names it",
				where, addr, derr, envRedis)
		}
		_ = conn.Close()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: connected, but no answer to a PING within --timeout %v: check that the address is Redis's (TLS needs rediss://), or raise --timeout for a slow link",
			where, timeout)
	}
	return fmt.Errorf("%s: %w: check the user, password and database in --redis", where, err)
}
