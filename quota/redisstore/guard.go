package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// A call is one call to Redis that bounded runs. A decision's is a
// script (a struct value, so that a client that honours deadlines
// decides without allocating for the guard); the operators' tools pass
// a callFunc.
type call[T any] interface {
	do(ctx context.Context) (T, error)
}

// callFunc is a call written as a func.
type callFunc[T any] func(context.Context) (T, error)

func (f callFunc[T]) do(ctx context.Context) (T, error) { return f(ctx) }

// script is a call of a Lua script: EVALSHA, and EVAL when the server
// does not have the script cached.
type script struct {
	client redis.UniversalClient
	sc     *redis.Script
	keys   []string
	args   []any
}

func (c script) do(ctx context.Context) (any, error) {
	return c.sc.Run(ctx, c.client, c.keys, c.args...).Result()
}

// bounded runs c with the store's timeout: the one timeout guard of every
// call the store makes, decisions (run) and operators' reads (inspect.go)
// alike. With a client that honours context deadlines on its sockets
// (s.guard false) c runs directly, and an error caused by the deadline
// says which deadline it was, keeping what the socket said. Otherwise the
// store stops waiting at the deadline and lets c finish in the
// background; a reply that raced the deadline still counts.
func bounded[T any, C call[T]](ctx context.Context, s *Store, c C) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if !s.guard {
		v, err := c.do(ctx)
		if cerr := ended(ctx); err != nil && cerr != nil && !errors.Is(err, cerr) {
			// The deadline reached the socket as an i/o timeout.
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return v, err
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := c.do(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // a reply that raced the deadline still counts
			return r.v, r.err
		default:
		}
		var zero T
		return zero, ctx.Err()
	}
}
