package quota_test

import (
	"testing"

	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

func newMemory(t *testing.T, clock quota.Clock) quota.Store {
	m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
	t.Cleanup(func() { m.Close() })
	return m
}

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	quotatest.Run(t, newMemory)
}
