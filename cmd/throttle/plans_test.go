package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota/redisstore"
)

const plansFile = "testdata/plans.yaml"

func TestValidatePlans(t *testing.T) {
	t.Parallel()
	out := mustCLI(t, "validate", plansFile)
	for _, want := range []string{
		"tenants: 1 business mapped to plans (enterprise 1)",
		"plan enterprise (weight 3): core 15000/h, daily 15000/day",
		"plan standard (weight 1, default): the limits as written",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate does not say %q:\n%s", want, out)
		}
	}
	// Each problem at its line and column.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	data, err := os.ReadFile(plansFile)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(data), "acme: enterprise", "acme: gold", 1)
	broken = strings.Replace(broken, "limits: {core: 15000/h, daily: 15000/day}", "limits: {core: 15000/h, daily: 15000/h, global: 2000/h}", 1)
	if err := os.WriteFile(bad, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := cli(context.Background(), "validate", bad)
	if code != exitConfig {
		t.Errorf("exit %d, want %d", code, exitConfig)
	}
	for _, want := range []string{
		bad + `:3:9: tenants.acme: business "acme" is mapped to plan "gold", which no provider defines`,
		bad + `:15:40: providers.gh.plans.enterprise.limits.daily: limit daily is a calendar window per day`,
		bad + `:15:49: providers.gh.plans.enterprise.limits.global: limit global is provider-wide`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("validate does not say %q:\n%s", want, errOut)
		}
	}
}

// TestStatusTenant shows a business's plan and what it has left, at its
// plan's figures, on every provider scoped per business.
func TestStatusTenant(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cfg, err := providers.LoadFile(plansFile)
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("cli%d:", prefixes.Add(1))
	store, err := redisstore.New(srv.Client(t), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	reserve := func(business string, cost int64) {
		t.Helper()
		res, _, err := cfg.Resolve(httptest.NewRequest("GET", "https://api.gh.test/x", nil), providers.Input{Business: business, Cost: cost})
		if err != nil {
			t.Fatal(err)
		}
		if rv, err := store.Reserve(context.Background(), &res.Request); err != nil || !rv.Allowed {
			t.Fatalf("Reserve(%s, %d): %v", business, cost, err)
		}
	}
	reserve("acme", 900)  // 900 of enterprise's 15,000
	reserve("globex", 10) // 10 of standard's 5,000
	args := func(a ...string) []string {
		return append(a, "--redis", "redis://"+srv.Addr, "--config", plansFile, "--prefix", prefix)
	}
	status := func(a ...string) view {
		t.Helper()
		var v view
		out := mustCLI(t, args(append([]string{"status", "--json"}, a...)...)...)
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return v
	}
	v := status("--tenant", "acme")
	if len(v.Providers) != 2 || v.Providers[0].Name != "gh" || v.Providers[1].Name != "other" {
		t.Fatalf("--tenant shows %+v, want gh and other (wide has no limit per business)", v.Providers)
	}
	if tv := v.Providers[0].Tenant; tv == nil || *tv != (tenantView{Business: "acme", Plan: "enterprise", From: "tenants"}) {
		t.Errorf("gh tenant = %+v", tv)
	}
	if tv := v.Providers[1].Tenant; tv == nil || *tv != (tenantView{Business: "acme", From: "none"}) {
		t.Errorf("other tenant = %+v", tv)
	}
	for _, c := range []struct {
		limit string
		left  int64
		cap   int64
	}{{"core", 14100, 15000}, {"daily", 14100, 15000}} {
		r := findRow(t, v, "gh", c.limit, "acme")
		if r.Plan != "enterprise" || r.Capacity != c.cap || r.Remaining < c.left-1 || r.Remaining > c.left || r.Published != "15,000/"+map[string]string{"core": "h", "daily": "day"}[c.limit] {
			t.Errorf("acme %s: %+v; want %d of %d on enterprise", c.limit, r, c.left, c.cap)
		}
	}
	// --plan reads it at another plan's figures: 900 of standard's 5,000.
	v = status("gh", "--tenant", "acme", "--plan", "standard")
	if r := findRow(t, v, "gh", "daily", "acme"); r.Plan != "standard" || r.Capacity != 5000 || r.Remaining != 4100 {
		t.Errorf("acme daily at --plan standard: %+v", r)
	}
	// globex is on the default plan, in the scan too.
	v = status("gh")
	if r := findRow(t, v, "gh", "daily", "globex"); r.Plan != "standard" || r.Capacity != 5000 || r.Remaining != 4990 {
		t.Errorf("globex daily: %+v", r)
	}
	if r := findRow(t, v, "gh", "daily", "acme"); r.Plan != "enterprise" || r.Capacity != 15000 {
		t.Errorf("acme daily in the scan: %+v", r)
	}
	table := mustCLI(t, args("status", "--tenant", "acme", "--width", "100")...)
	for _, want := range []string{"acme on gh: plan enterprise (the configuration's tenants)", "acme on other: no plans", "plan enterprise"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table does not say %q:\n%s", want, table)
		}
	}
	for _, bad := range [][]string{
		{"status", "--plan", "standard"},
		{"status", "--tenant", "acme", "--plan", "gold"},
		{"status", "wide", "--tenant", "acme"},
		{"status", "gh/acme", "--tenant", "acme"},
	} {
		if code, _, _ := cli(context.Background(), args(bad...)...); code != exitUsage {
			t.Errorf("throttle %s: exit %d, want %d", strings.Join(bad, " "), code, exitUsage)
		}
	}
}
