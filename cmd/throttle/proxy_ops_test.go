package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/throttletest"
)

// TestProxyRecordsPauseAndRefusals: what the proxy does shows in status:
// the pause a vendor's 429 set through one proxy, with the vendor's
// reason, and the refusals the pause made through the other, which the
// proxy records once a second.
func TestProxyRecordsPauseAndRefusals(t *testing.T) {
	t.Parallel()
	v := throttletest.NewVendor(throttletest.Options{RetryAfter: time.Minute})
	defer v.Close()
	cfg := writeConfig(t, fmt.Sprintf("providers:\n  vendor:\n    hosts: [%q]\n    on_limit: fail\n    limits: [{name: peak, limit: 100/s}]\n", v.Host()))
	redisSrv := redistest.Start(t)
	args := []string{"--redis", "redis://" + redisSrv.Addr, "--config", cfg, "--insecure-upstream-http", "--retries", "0"}
	a, b := startProxy(t, 1, args...), startProxy(t, 1, args...)
	v.ThrottleNext(1)
	for i, base := range []string{a.addrs[0], b.addrs[0], b.addrs[0]} {
		resp, err := http.Get(base + "/" + v.Host() + "/x?token=secret")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 429 {
			t.Fatalf("request %d: %d, want 429", i, resp.StatusCode)
		}
	}
	status := func() view {
		out := mustCLI(t, "status", "--json", "--redis", "redis://"+redisSrv.Addr, "--config", cfg)
		var st view
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return st
	}
	st := status()
	if want := "429 from " + v.Host() + ", Retry-After 1m"; len(st.Pauses) != 1 || st.Pauses[0].Reason != want {
		t.Errorf("status's pauses: %+v, want the vendor's pause, %q", st.Pauses, want)
	}
	// The proxy writes its refusals within a second; a loaded machine
	// may take longer.
	for deadline := time.Now().Add(time.Minute); len(st.Refusals) == 0 && time.Now().Before(deadline); st = status() {
		time.Sleep(100 * time.Millisecond)
	}
	if len(st.Refusals) != 1 || st.Refusals[0].Limit != "pause" || st.Refusals[0].Last5Min != 2 || st.Refusals[0].RetryAfterMS < 50_000 {
		t.Errorf("status's refusals: %+v, want the pause's 2, told about a minute", st.Refusals)
	}
}
