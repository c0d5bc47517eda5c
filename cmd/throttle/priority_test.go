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

// TestProxyRefusesBatchFirst runs the proxy against a real Redis: once
// the interactive class is active, batch requests are refused (429,
// Throttle-Error: limited) where interactive ones still go, since the
// interactive class holds half of the hourly window from batch; status
// then shows each class's headroom read from the same Redis.
func TestProxyRefusesBatchFirst(t *testing.T) {
	t.Parallel()
	v := throttletest.NewVendor(throttletest.Options{})
	defer v.Close()
	cfg := writeConfig(t, fmt.Sprintf(`
providers:
  vendor:
    hosts: [%q]
    on_limit: fail
    priority: {classes: [interactive, batch], reserve: {interactive: 50%%}, active_for: 10m}
    limits: [{name: hourly, quota: 6, per: hour}]
`, v.Host()))
	redisSrv := redistest.Start(t)
	p := startProxy(t, 1, "--redis", "redis://"+redisSrv.Addr, "--config", cfg, "--insecure-upstream-http")
	send := func(class string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", p.addrs[0]+"/"+v.Host()+"/x", nil)
		req.Header.Set("Throttle-Priority", class)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Throttle-Error")
	}
	// Interactive first: it is active from then on, holding 3 of 6.
	if status, _ := send("interactive"); status != 200 {
		t.Fatalf("interactive: %d", status)
	}
	var batch []int
	for i := 0; i < 4; i++ {
		status, code := send("batch")
		if status != 200 && (status != 429 || code != "limited") {
			t.Fatalf("batch %d: %d %q, want 200 or 429 limited", i, status, code)
		}
		batch = append(batch, status)
	}
	if fmt.Sprint(batch) != "[200 200 429 429]" {
		t.Errorf("batch requests: %v, want two admitted (6 less the interactive one and its hold of 3), then refused", batch)
	}
	// status, from the same Redis: 3 left, all of them held for
	// interactive.
	out := mustCLI(t, "status", "vendor", "--json", "--redis", "redis://"+redisSrv.Addr, "--config", cfg)
	var view view
	if err := json.Unmarshal([]byte(out), &view); err != nil {
		t.Fatal(err)
	}
	r := findRow(t, view, "vendor", "hourly", "")
	if r.Remaining != 3 || len(r.Classes) != 2 || r.Classes[0].Left != 3 || r.Classes[1].Left != 0 || r.Classes[0].Holds != 3 || r.Classes[0].HeldMS == 0 {
		t.Errorf("status: %d left, classes %+v, want interactive 3 left holding 3, batch none", r.Remaining, r.Classes)
	}
	for i := 0; i < 3; i++ {
		if status, code := send("interactive"); status != 200 {
			t.Errorf("interactive %d after batch was refused: %d %q, want it to still go", i, status, code)
		}
	}
	if status, _ := send("interactive"); status != 429 {
		t.Errorf("interactive past the window: %d, want 429", status)
	}
	if served, _ := v.Counts(); served != 6 {
		t.Errorf("vendor served %d, want the window's 6", served)
	}
}
