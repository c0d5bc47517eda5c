package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/throttletest"
)

// TestProxyPriorityHeader runs the proxy against a real Redis and a fake
// vendor: Throttle-Priority names the class the request is decided in (the
// metrics count it so), never reaches the vendor, and a class the provider
// does not declare is a 400 with the usual JSON error.
func TestProxyPriorityHeader(t *testing.T) {
	t.Parallel()
	leaks := &leakCheck{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	v := throttletest.NewVendor(throttletest.Options{Handler: leaks})
	defer v.Close()
	cfg := writeConfig(t, fmt.Sprintf(`
providers:
  vendor:
    hosts: [%q]
    on_limit: fail
    priority: {classes: [interactive, batch], reserve: {interactive: 50%%}}
    limits: [{name: hourly, quota: 100, per: hour}]
`, v.Host()))
	redisSrv := redistest.Start(t)
	p := startProxy(t, 1, "--redis", "redis://"+redisSrv.Addr, "--config", cfg, "--insecure-upstream-http")
	send := func(class string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", p.addrs[0]+"/"+v.Host()+"/x", nil)
		if class != "" {
			req.Header.Set("Throttle-Priority", class)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, class := range []string{"interactive", "batch", ""} {
		if status, body := send(class); status != 200 {
			t.Fatalf("class %q: %d %s", class, status, body)
		}
	}
	status, body := send("urgent")
	var answer map[string]string
	if status != 400 || json.Unmarshal([]byte(body), &answer) != nil || answer["error"] != "bad_request" ||
		!strings.Contains(answer["message"], "Throttle-Priority") || !strings.Contains(answer["message"], "interactive, batch") {
		t.Errorf("an unknown class: %d %s, want 400 bad_request naming the header and the classes", status, body)
	}
	if served, _ := v.Counts(); served != 3 {
		t.Errorf("vendor served %d, want 3 (not the unknown class)", served)
	}
	if n := leaks.leaked.Load(); n != 0 {
		t.Errorf("%d requests reached the vendor with a Throttle-* header", n)
	}
	resp, err := http.Get(p.addrs[0] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`throttle_events_total{class="interactive",event="decided",limit="",provider="vendor"} 1`,
		`throttle_events_total{class="batch",event="decided",limit="",provider="vendor"} 2`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
