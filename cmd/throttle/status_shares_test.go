package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota/redisstore"
)

// sharesYAML has a limit of each kind that keeps class reserves, and a
// fair limit.
const sharesYAML = `
providers:
  vendor:
    hosts: [api.vendor.test]
    on_limit: fail
    priority: {classes: [interactive, batch], reserve: {interactive: 20%}, active_for: 10m}
    limits:
      - {name: hourly, limit: 1000/h burst 100}
      - {name: daily, quota: 1000, per: day}
  shared:
    hosts: [api.shared.test]
    on_limit: fail
    limits: [{name: account, limit: 700/min burst 70, fair: tenant}]
`

// TestStatusClassHeadroom reads, from a real Redis, what each class has
// left of a classed GCRA limit (its lanes: interactive 200/h burst 20,
// batch 800/h burst 80) and of a classed window (interactive holds 200 of
// 1,000 while active), in the JSON, the table and the page's JSON.
func TestStatusClassHeadroom(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cfgPath := writeConfig(t, sharesYAML)
	cfg, err := providers.LoadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("cli%d:", prefixes.Add(1))
	st, err := redisstore.New(srv.Client(t), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	reserve := func(class string) {
		t.Helper()
		res, _, err := cfg.Resolve(httptest.NewRequest("GET", "https://api.vendor.test/x", nil), providers.Input{Priority: class})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := st.Reserve(context.Background(), &res.Request); err != nil || !r.Allowed {
			t.Fatalf("%s: %v %+v", class, err, r)
		}
	}
	reserve("interactive")
	for i := 0; i < 9; i++ {
		reserve("batch")
	}
	args := []string{"status", "vendor", "--redis", "redis://" + srv.Addr, "--config", cfgPath, "--prefix", prefix}
	var v view
	if err := json.Unmarshal([]byte(mustCLI(t, append(args, "--json")...)), &v); err != nil {
		t.Fatal(err)
	}
	// The GCRA limit: the interactive lane spent 1 of 20, the batch lane
	// 9 of 80. Interactive may use its own lane and the one below;
	// batch its own, and one of the interactive lane only while it is
	// full (it is not).
	hourly := findRow(t, v, "vendor", "hourly", "")
	if got := fmt.Sprint(hourly.Classes); got != "[{interactive 90 0 0} {batch 71 0 0}]" {
		t.Errorf("hourly classes = %s, want interactive 90 left, batch 71", got)
	}
	// The window: 990 left; interactive, active, holds 200 from batch.
	daily := findRow(t, v, "vendor", "daily", "")
	if len(daily.Classes) != 2 || daily.Classes[0].Left != 990 || daily.Classes[1].Left != 790 ||
		daily.Classes[0].Holds != 200 || daily.Classes[0].HeldMS <= 9*60*1000 || daily.Classes[1].HeldMS != 0 {
		t.Errorf("daily classes = %+v, want interactive 990 left holding 200 for about 10m, batch 790", daily.Classes)
	}
	table := mustCLI(t, append(args, "--width", "200")...)
	for _, want := range []string{"interactive 90 left, batch 71 left", "interactive 990 left, batch 790 left, interactive holds 200 ("} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	f := &fixture{url: "redis://" + srv.Addr, prefix: prefix}
	sf := storeFlags{redis: f.url, config: cfgPath, prefix: prefix, timeout: 5 * time.Second}
	e, err := sf.open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	w, err := newWatcher(e, []string{"vendor"}, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	body, code := newStatusPage(w, time.Second).state(context.Background())
	if code != 200 || !strings.Contains(string(body), `"classes":[{"class":"interactive","left":90},{"class":"batch","left":71}]`) {
		t.Errorf("the page's JSON (%d) lacks the hourly classes:\n%s", code, body)
	}
}

// TestStatusFairLimit: a fair limit's row says who shares it, in the
// JSON, the table and with --tenant (where the business's lane will show
// once the Redis store reports it).
func TestStatusFairLimit(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cfgPath := writeConfig(t, sharesYAML)
	args := []string{"--redis", "redis://" + srv.Addr, "--config", cfgPath, "--all"}
	var v view
	if err := json.Unmarshal([]byte(mustCLI(t, append([]string{"status", "shared", "--json"}, args...)...)), &v); err != nil {
		t.Fatal(err)
	}
	r := findRow(t, v, "shared", "account", "")
	if r.Fair == nil || r.Fair.By != "tenant" || r.Classes != nil {
		t.Errorf("the fair row: fair %+v, classes %+v", r.Fair, r.Classes)
	}
	table := mustCLI(t, append([]string{"status", "shared", "--width", "200"}, args...)...)
	if !strings.Contains(table, "fair by tenant") {
		t.Errorf("the table lacks the fair note:\n%s", table)
	}
	tenant := mustCLI(t, append([]string{"status", "--tenant", "acme", "--width", "200"}, args...)...)
	if !strings.Contains(tenant, "acme on shared: no plans") || !strings.Contains(tenant, "fair by tenant") {
		t.Errorf("status --tenant acme on a provider whose one limit is fair by tenant:\n%s", tenant)
	}
}

// TestFairNotes: what the table says of a fair limit once the store
// reports its tenants and a tenant's lane.
func TestFairNotes(t *testing.T) {
	t.Parallel()
	three, seven := int64(3), int64(7)
	for _, c := range []struct {
		fair *fairView
		want string
	}{
		{&fairView{By: "label:team"}, "fair by label:team"},
		{&fairView{By: "tenant", Active: &three, Weight: &seven}, "fair by tenant: 3 active, weight 7"},
		{&fairView{By: "tenant", Active: &three, Weight: &seven, Tenant: &laneView{Tenant: "acme", Weight: 4, NextMS: 1200}},
			"fair by tenant: 3 active, weight 7, acme (weight 4) next appointment in 1.2s"},
		{&fairView{By: "tenant", Active: &three, Weight: &seven, Tenant: &laneView{Tenant: "acme", Weight: 4}},
			"fair by tenant: 3 active, weight 7, acme (weight 4) within its share"},
	} {
		if got := rowNotes(row{Fair: c.fair}); got != c.want {
			t.Errorf("notes %q, want %q", got, c.want)
		}
	}
}
