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

// TestE2EPauseReason: the pause a vendor's 429 sets records why, as the
// store keeps it for throttle status: the status, the vendor's host and
// the delay's header, nothing of the request's path or query.
func TestE2EPauseReason(t *testing.T) {
	t.Parallel()
	const yaml = `
providers:
  billing:
    hosts: ["HOST"]
    on_limit: fail
    limits:
      - {name: core, limit: 100/s}
`
	rs, err := redisstore.New(redistest.Start(t).Client(t), redisstore.Options{Prefix: "e2ereason:", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	v := e2eVendor(t, throttletest.Options{RetryAfter: 30 * time.Second})
	tr, _ := e2eTransport(t, yaml, v.Host(), throttle.WithStore(rs))
	v.ThrottleNext(1)
	req, _ := http.NewRequest("GET", v.URL+"/charges?api_key=secret", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("RoundTrip: %v, %v; want the 429", resp, err)
	}
	resp.Body.Close()
	notes, err := rs.PauseNotes(context.Background(), []quota.PauseKey{{Tag: "billing", Key: "pause"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "429 from " + v.Host() + ", Retry-After 30s"; notes[0].Reason != want {
		t.Errorf("the pause's reason: %q, want %q", notes[0].Reason, want)
	}
	if strings.Contains(notes[0].Reason, "secret") || strings.Contains(notes[0].Reason, "/charges") {
		t.Errorf("the reason %q names the request's path or query", notes[0].Reason)
	}
}

// TestE2ERefusalObserver: the transport's refusals reach the fleet's
// record through RefusalObserver and a RefusalLog, by provider and the
// limit that refused, with what they were told; a served request is no
// refusal.
func TestE2ERefusalObserver(t *testing.T) {
	t.Parallel()
	const yaml = `
providers:
  billing:
    hosts: ["HOST"]
    on_limit: fail
    limits:
      - {name: core, limit: 1/min}
`
	rs, err := redisstore.New(redistest.Start(t).Client(t), redisstore.Options{Prefix: "e2erefusals:", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	log, err := rs.NewRefusalLog(time.Hour) // written by Flush below
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	defer log.Close(ctx)
	v := e2eVendor(t, throttletest.Options{})
	_, client := e2eTransport(t, yaml, v.Host(), throttle.WithStore(rs), throttle.WithObserver(throttle.RefusalObserver(log)))
	for i := range 3 {
		resp, err := e2eDo(ctx, client, "GET", v.URL+"/charges", "")
		var le *throttle.LimitError
		switch {
		case i == 0 && err != nil:
			t.Fatalf("the first request: %v", err)
		case i == 0:
			resp.Body.Close()
		case !errors.As(err, &le):
			t.Fatalf("request %d: %v, want a *LimitError", i, err)
		}
	}
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, got, err := rs.Refusals(ctx, []redisstore.RefusalKey{{Provider: "billing", Limit: "core"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := got[0]; r.Within(1) != 2 || r.RetryAfter <= 0 || r.RetryAfter > time.Minute {
		t.Errorf("billing/core: %d refusals, the latest told %v; want 2, told under a minute", r.Within(1), r.RetryAfter)
	}
}

// TestE2EProviderPauseHoldsEveryTenantOnRing: on a go-redis Ring the
// provider's pause of every tenant, set as "throttle pause PROVIDER" sets
// it (Store.PauseOver), holds back the tenants whose keys live on each of
// its three shards, through the transport, until it is resumed
// (Store.ResumeOver).
func TestE2EProviderPauseHoldsEveryTenantOnRing(t *testing.T) {
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
	r := redistest.StartRing(t, 3)
	ring := r.Client(t, nil)
	rs, err := redisstore.New(ring, redisstore.Options{Prefix: "e2eringpause:", Timeout: 5 * time.Second})
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
	byTag := map[string]string{}
	tags := r.TagPerShard(t, ring, func(i int) string {
		name := fmt.Sprintf("biz%d", i)
		byTag[p.Tag(name)] = name
		return p.Tag(name)
	})
	var tenants []string
	for _, tag := range tags {
		tenants = append(tenants, byTag[tag])
	}
	providersPauseHoldsAll(ctx, t, rs, p, client, v, tenants, "a Ring")
}
