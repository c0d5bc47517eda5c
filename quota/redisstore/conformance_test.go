package redisstore

import (
	"testing"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// TestConformance runs package quota's conformance suite, with its
// differential test against the reference model, on the Redis store. Every
// store the suite asks for gets its own key prefix on one redis-server.
func TestConformance(t *testing.T) {
	client := redistest.Start(t).Client(t)
	quotatest.Run(t, func(t *testing.T, clock quota.Clock) quota.Store {
		return newStore(t, client, clock)
	})
}

// TestDifferentialWithMemory runs longer random sequences on the Redis
// store, the memory store and the model side by side.
func TestDifferentialWithMemory(t *testing.T) {
	client := redistest.Start(t).Client(t)
	redisFactory := func(t *testing.T, clock quota.Clock) quota.Store { return newStore(t, client, clock) }
	memoryFactory := func(t *testing.T, clock quota.Clock) quota.Store {
		m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
		return m
	}
	for seed := int64(100); seed < 106; seed++ {
		quotatest.Differential(t, seed, 400, redisFactory, memoryFactory)
	}
}
