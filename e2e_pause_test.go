package throttle_test

import (
	"context"
	"errors"
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
