package throttle_test

// Fleet tests: several Transports, each with its own go-redis client and
// redisstore.Store, as separate processes would have, share one quota in
// one real Redis (or a real three-master Redis Cluster) and keep a fake
// vendor inside its limit together.

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

// fleetStoreTimeout bounds each store call. It is generous: these tests
// are about sharing a quota, not about a slow Redis, and the machine may
// be busy with other packages' tests: TestE2ELearnsVendorLimit's burst of
// 400 decisions at once once took more than 2 s under a load of 10-14.
const fleetStoreTimeout = 5 * time.Second

// fleetMember returns the client of one member of a fleet: a Transport
// with its own Redis client and store.
func fleetMember(t *testing.T, yaml, host string, rc redis.UniversalClient) *http.Client {
	t.Helper()
	return fleetTransport(t, yaml, host, rc).Client()
}

// fleetTransport returns the Transport of one member of a fleet, with its
// own Redis client and store.
func fleetTransport(t *testing.T, yaml, host string, rc redis.UniversalClient) *throttle.Transport {
	t.Helper()
	store, err := redisstore.New(rc, redisstore.Options{Timeout: fleetStoreTimeout})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := e2eTransport(t, yaml, host, throttle.WithStore(store))
	return tr
}

// fleetRun drives every client with workers goroutines for d at once and
// returns the longest stall any driver measured.
func fleetRun(t *testing.T, clients []*http.Client, url string, workers int, d time.Duration,
	prepare func(worker int, req *http.Request) *http.Request) time.Duration {
	t.Helper()
	var wg sync.WaitGroup
	stalls := make([]time.Duration, len(clients))
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stalls[i] = e2eLoad(t, c, url, workers, d, prepare)
		}()
	}
	wg.Wait()
	var worst time.Duration
	for _, s := range stalls {
		worst = max(worst, s)
	}
	return worst
}

// TestFleetSharesOneQuota: four transports, each driven by three
// goroutines, share a quota of 20/s burst 5 (at headroom 90%: 18/s burst
// 4) through one Redis. The vendor never throttles, and never sees more
// than the one shared limit allows, although each transport alone would
// send 18/s.
//
// The vendor enforces 20/s with a burst of 5 + 12: requests reach it no
// earlier than their slots, but a waiter that wakes late (a starved CPU)
// sends at once, together with the next slots' requests, so in any
// interval the vendor may see the throttle's burst and rate plus one
// request per worker. The burst's margin makes zero 429s a guarantee.
func TestFleetSharesOneQuota(t *testing.T) {
	t.Parallel()
	const transports, workers = 4, 3
	v := e2eVendor(t, throttletest.Options{Enforcer: throttletest.GCRA(20, time.Second, 5+transports*workers)})
	const yaml = `
providers:
  vendor:
    hosts: ["HOST"]
    headroom: 90%
    max_wait: 10s
    on_store_error: fail_closed
    limits: [{name: peak, limit: 20/s, burst: 5}]
`
	srv := redistest.Start(t)
	var clients []*http.Client
	for i := 0; i < transports; i++ {
		clients = append(clients, fleetMember(t, yaml, v.Host(), srv.Client(t)))
	}
	stalled := fleetRun(t, clients, v.URL+"/v1/items", workers, 3*time.Second, nil)

	served, throttled := v.Counts()
	t.Logf("served %d, throttled %d, at most %d in a second; stalled %v", served, throttled, v.MaxIn(time.Second), stalled)
	if throttled != 0 {
		t.Errorf("the vendor throttled %d of %d requests, want none", throttled, served+throttled)
	}
	// The shared limit: 4 at once, then one per 1/18 s; plus the
	// requests in flight. Each transport on its own would send 4 times
	// as many.
	for _, w := range []time.Duration{time.Second, 3 * time.Second} {
		limit := 4 + int(w*18/time.Second) + transports*workers
		if got := v.MaxIn(w); got > limit {
			t.Errorf("the vendor saw %d requests in %v; the fleet's shared limit allows %d", got, w, limit)
		}
	}
	e2eBusy(t, v, 20, time.Second, 5, 0.7, stalled)
}

// TestFleetTenantsOnACluster: a per-tenant stack (every limit scoped by
// business) on a real three-master Redis Cluster. Each tenant's keys
// share one hash tag, provider + tenant, so every decision runs on one
// shard with no CROSSSLOT error, and the tenants spread over all three
// masters. Four transports, each with its own cluster client, drive six
// tenants; the vendor limits each tenant on its own and never throttles.
func TestFleetTenantsOnACluster(t *testing.T) {
	t.Parallel()
	const transports = 4
	// Names whose tags hash to all three masters (whether the store keeps
	// the tag "tenanted:<name>" as it is or hashes it).
	tenants := []string{"acme", "globex", "hooli", "soylent", "tyrell", "wonka"}
	// Per tenant: 10/s burst 3 (at headroom 90%: 9/s burst 2), plus a
	// per-minute limit and a daily window so that each decision has a
	// stack of three keys; the daily window's key lasts until the day
	// ends, so the keys are still there to count per master however long
	// a loaded machine takes to get there (the GCRA keys expire within
	// seconds of the last request). One goroutine per tenant per
	// transport: four in flight per tenant.
	const yaml = `
providers:
  tenanted:
    hosts: ["HOST"]
    keys: per_tenant
    headroom: 90%
    max_wait: 10s
    on_store_error: fail_closed
    limits:
      - {name: peak, limit: 10/s, burst: 3, scope: business, missing: refuse}
      - {name: minute, limit: 550/min burst 50, scope: business, missing: refuse}
      - {name: daily, limit: 1000000/day, scope: business, missing: refuse}
`
	v := e2eVendor(t, throttletest.Options{Enforcer: throttletest.GCRA(10, time.Second, 3+transports), ScopeHeader: "X-Tenant"})
	cluster := redistest.StartCluster(t)

	var clients []*http.Client
	for i := 0; i < transports; i++ {
		clients = append(clients, fleetMember(t, yaml, v.Host(), cluster.Client(t)))
	}
	stalled := fleetRun(t, clients, v.URL+"/v1/things", len(tenants), 2500*time.Millisecond,
		func(w int, req *http.Request) *http.Request {
			tenant := tenants[w]
			req = req.WithContext(throttle.WithBusiness(req.Context(), tenant))
			req.Header.Set("X-Tenant", tenant)
			return req
		})

	served, throttled := v.Counts()
	t.Logf("served %d, throttled %d; stalled %v", served, throttled, stalled)
	if throttled != 0 {
		t.Errorf("the vendor throttled %d of %d requests, want none", throttled, served+throttled)
	}
	for _, tenant := range tenants {
		// 2 at once, 9/s, and the four in flight.
		if got, limit := v.MaxInScope(tenant, time.Second), 2+9+transports; got > limit {
			t.Errorf("tenant %s: the vendor saw %d requests in a second; its limit allows %d", tenant, got, limit)
		}
	}
	// The tenants' state spread over all three masters.
	var mu sync.Mutex
	var sizes []int64
	err := cluster.Client(t).ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, n)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range sizes {
		if n == 0 || len(sizes) != 3 {
			t.Errorf("keys per master %v: want the tenants' keys on all three", sizes)
			break
		}
	}
	// Every tenant was served: one tenant's keys are not another's.
	count := map[string]int{}
	for _, a := range v.Arrivals() {
		count[a.Scope]++
	}
	for _, tenant := range tenants {
		// At least a few each, not a rate: a starved machine serves
		// fewer than the limit allows, and the limit is checked above.
		if count[tenant] < 3 {
			t.Errorf("tenant %s was served %d times, want at least 3 (%v)", tenant, count[tenant], fmt.Sprint(count))
		}
	}
}
