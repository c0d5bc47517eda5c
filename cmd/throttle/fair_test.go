package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/throttletest"
)

// TestProxyFairShareRedis runs two tenants through the proxy against a
// real Redis, on the real clock, at a fair 10/s burst 10: a heavy tenant
// queues 60 requests (6 seconds of the limit), then a light tenant sends
// 3, one after another. The light tenant's requests reach the vendor
// before the heavy tenant's last 20 (an order, not a speed: the backlog
// is seconds long), every request is answered 200, and the vendor, which
// enforces 10/s with a burst of 15 (slack for the requests' jitter on
// their way from the proxy), throttles none.
func TestProxyFairShareRedis(t *testing.T) {
	t.Parallel()
	redisSrv := redistest.Start(t)
	v := throttletest.NewVendor(throttletest.Options{Enforcer: throttletest.GCRA(10, time.Second, 15)})
	defer v.Close()
	cfg := writeConfig(t, fmt.Sprintf(`
providers:
  vendor:
    hosts: [%q]
    max_wait: 30s
    limits: [{name: account, limit: 10/s burst 10, fair: tenant}]
`, v.Host()))
	p := startProxy(t, 1, "--redis", "redis://"+redisSrv.Addr, "--config", cfg, "--insecure-upstream-http", "--retries", "0")
	send := func(business string, i int) int {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/%s/%s/%d", p.addrs[0], v.Host(), business, i), nil)
		req.Header.Set("Throttle-Business", business)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	var wg sync.WaitGroup
	for i := 0; i < 60; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st := send("heavy", i); st != 200 {
				t.Errorf("heavy %d: %d", i, st)
			}
		}()
	}
	// Wait for the heavy tenant's backlog: its first requests served.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if served, _ := v.Counts(); served >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the heavy tenant's requests do not reach the vendor")
		}
	}
	for i := 0; i < 3; i++ {
		if st := send("light", i); st != 200 {
			t.Errorf("light %d: %d", i, st)
		}
	}
	wg.Wait()
	var order []string
	for _, a := range v.Arrivals() {
		if a.Throttled {
			t.Errorf("the vendor throttled %s: the fleet went over the limit", a.Path)
		}
		order = append(order, strings.Split(a.Path, "/")[1])
	}
	lastLight := 0
	for i, who := range order {
		if who == "light" {
			lastLight = i
		}
	}
	if heavyAfter := len(order) - 1 - lastLight; heavyAfter < 20 {
		t.Errorf("%d heavy requests reached the vendor after the light tenant's last, want at least 20 of the backlog: %v", heavyAfter, order)
	}
}
