package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

// TestE2EProviderPauseHoldsEveryTenant: the provider's pause of every
// tenant (what "throttle pause PROVIDER" writes) holds back every request
// of a provider whose keys are per tenant, with a tenant or without, on
// the Redis store and the memory store: the vendor sees none of them.
func TestE2EProviderPauseHoldsEveryTenant(t *testing.T) {
	t.Parallel()
	const yaml = `
providers:
  billing:
    hosts: ["HOST"]
    keys: per_tenant
    on_limit: fail
    limits:
      - {name: core, limit: 100/s, scope: business}
`
	srv := redistest.Start(t)
	rs, err := redisstore.New(srv.Client(t), redisstore.Options{Prefix: "e2epause:", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for name, store := range map[string]quota.Store{
		"redis":  rs,
		"memory": quota.NewMemoryStore(quota.MemoryOptions{}),
	} {
		t.Run(name, func(t *testing.T) {
			v := e2eVendor(t, throttletest.Options{})
			_, client := e2eTransport(t, yaml, v.Host(), throttle.WithStore(store))
			cfg, err := providers.Load("e2e.yaml", []byte(strings.ReplaceAll(yaml, "HOST", v.Host())))
			if err != nil {
				t.Fatal(err)
			}
			p, _ := cfg.Provider("billing")
			ctx := context.Background()
			tag, key := p.AllPauseKey()
			if err := store.Pause(ctx, tag, key, time.Hour); err != nil {
				t.Fatal(err)
			}
			for _, tenant := range []string{"", "acme", "globex"} {
				rctx := throttle.WithBusiness(ctx, tenant)
				_, err := e2eDo(rctx, client, "GET", v.URL+"/charges", "")
				var le *throttle.LimitError
				if !errors.As(err, &le) || le.Limit != "pause" || le.RetryAfter < 30*time.Minute {
					t.Errorf("tenant %q during the provider's pause: %v, want a *LimitError by the pause", tenant, err)
				}
			}
			if served, _ := v.Counts(); served != 0 {
				t.Errorf("the vendor served %d requests during the provider's pause, want 0", served)
			}
		})
	}
}

// TestE2EProviderPauseHoldsEveryTenantOnCluster: on a Redis Cluster the
// provider's pause of every tenant, set as "throttle pause PROVIDER" sets
// it (Store.PauseOver), holds back the tenants whose keys live on each of
// the three masters, through the transport: the vendor sees none of their
// requests until it is resumed (Store.ResumeOver).
func TestE2EProviderPauseHoldsEveryTenantOnCluster(t *testing.T) {
	t.Parallel()
	const yaml = `
providers:
  billing:
    hosts: ["HOST"]
    keys: per_tenant
    on_limit: fail
    limits:
      - {name: core, limit: 100/s, scope: business}
`
	cluster := redistest.StartCluster(t).Client(t)
	// PauseOver makes 16,384 writes in one call: a timeout a loaded
	// machine cannot exceed.
	rs, err := redisstore.New(cluster, redisstore.Options{Prefix: "e2eclusterpause:", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	v := e2eVendor(t, throttletest.Options{})
	_, client := e2eTransport(t, yaml, v.Host(), throttle.WithStore(rs))
	cfg, err := providers.Load("e2e.yaml", []byte(strings.ReplaceAll(yaml, "HOST", v.Host())))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := cfg.Provider("billing")
	ctx := context.Background()
	// One tenant per master: redistest splits the slots evenly.
	tenants := make([]string, 3)
	for i, found := 0, 0; found < 3; i++ {
		name := fmt.Sprintf("biz%d", i)
		s, err := cluster.ClusterKeySlot(ctx, "{"+p.Tag(name)+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if m := s * 3 / 16384; tenants[m] == "" {
			tenants[m] = name
			found++
		}
	}
	providersPauseHoldsAll(ctx, t, rs, p, client, v, tenants, "a cluster")
}

// providersPauseHoldsAll pauses provider p's every tenant with
// rs.PauseOver and checks, through client, that a request without a
// tenant and one of each of tenants are held back by the pause (on
// where: "a cluster", "a Ring") and the vendor v serves none; then
// resumes it and checks that each goes.
func providersPauseHoldsAll(ctx context.Context, t *testing.T, rs *redisstore.Store, p *providers.Provider,
	client *http.Client, v *throttletest.Vendor, tenants []string, where string) {
	t.Helper()
	tag, key := p.AllPauseKey()
	if err := rs.PauseOver(ctx, tag, key, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range append([]string{""}, tenants...) {
		resp, err := e2eDo(throttle.WithBusiness(ctx, tenant), client, "GET", v.URL+"/charges", "")
		if err == nil {
			_ = resp.Body.Close()
		}
		var le *throttle.LimitError
		if !errors.As(err, &le) || le.Limit != "pause" || le.RetryAfter < 30*time.Minute {
			t.Errorf("tenant %q during the provider's pause on %s: %v, want a *LimitError by the pause", tenant, where, err)
		}
	}
	if served, _ := v.Counts(); served != 0 {
		t.Errorf("the vendor served %d requests during the provider's pause, want 0", served)
	}
	if err := rs.ResumeOver(ctx, tag, key); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range append([]string{""}, tenants...) {
		resp, err := e2eDo(throttle.WithBusiness(ctx, tenant), client, "GET", v.URL+"/charges", "")
		if err != nil {
			t.Errorf("tenant %q after the resume: %v, want served", tenant, err)
			continue
		}
		_ = resp.Body.Close()
	}
}
