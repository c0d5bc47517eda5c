package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// golden compares got with the file testdata/name, or rewrites the file
// with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test -run %s -update rewrites it):\ngot:\n%s\nwant:\n%s", name, path, t.Name(), got, want)
	}
}

// checkWidth fails when a line of out is wider than width.
func checkWidth(t *testing.T, out string, width int) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > width {
			t.Errorf("line of %d columns, over the width %d: %q", n, width, l)
		}
	}
}

func TestReadable(t *testing.T) {
	t.Parallel()
	day := quota.Calendar{Unit: quota.Day}
	for _, tc := range []struct {
		l    quota.Limit
		want string
	}{
		{quota.Limit{Kind: quota.GCRA, Rate: 100, Period: time.Second}, "100/s"},
		{quota.Limit{Kind: quota.GCRA, Rate: 5000, Period: time.Hour}, "5,000/h"},
		{quota.Limit{Kind: quota.GCRA, Rate: 100, Period: time.Minute, Burst: 50}, "100/min burst 50"},
		{quota.Limit{Kind: quota.GCRA, Rate: 100, Period: 10 * time.Second}, "100/10s"},
		{quota.Limit{Kind: quota.GCRA, Rate: 5, Period: time.Millisecond}, "5/ms"},
		// 810/min burst 90 at 95%: the period stretched to keep the count.
		{quota.Limit{Kind: quota.GCRA, Rate: 810, Period: 63157895 * time.Microsecond, Burst: 85}, "769.5/min burst 85"},
		// 3,750/10s at 95%.
		{quota.Limit{Kind: quota.GCRA, Rate: 3750, Period: 10526316 * time.Microsecond}, "3,562.5/10s"},
		// 2/s at 80%: 2 per 1.25s, not "2/1250ms".
		{quota.Limit{Kind: quota.GCRA, Rate: 2, Period: 1250 * time.Millisecond}, "1.6/s"},
		{quota.Limit{Kind: quota.Window, Rate: 250000, Calendar: day}, "250,000/day"},
		{quota.Limit{Kind: quota.Window, Rate: 5000, Calendar: quota.Calendar{Unit: quota.Hour, Reset: 30 * time.Minute}}, "5,000/h"},
		{quota.Limit{Kind: quota.Window, Rate: 1000000, Calendar: quota.Calendar{Unit: quota.Month}}, "1,000,000/month"},
		{quota.Limit{Kind: quota.Rolling, Rate: 15000, Period: 24 * time.Hour}, "15,000/day rolling"},
		{quota.Limit{Kind: quota.Rolling, Rate: 100, Period: 90 * time.Minute}, "100/90min rolling"},
		{quota.Limit{Kind: quota.Concurrency, Rate: 3, Period: time.Minute}, "3 concurrent"},
	} {
		if got := readable(&tc.l); got != tc.want {
			t.Errorf("readable(%+v) = %q, want %q", tc.l, got, tc.want)
		}
	}
}

func TestHumanDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {360 * time.Millisecond, "0.4s"}, {2500 * time.Millisecond, "2.5s"}, {41 * time.Second, "41s"},
		{4*time.Minute + 5*time.Second, "4m05s"}, {14*time.Hour + 54*time.Minute, "14h54m"},
		{76*time.Hour + 10*time.Minute, "3d04h"},
	} {
		if got := humanDuration(tc.d); got != tc.want {
			t.Errorf("humanDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestCount(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 250000: "250,000", -1234567: "-1,234,567"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}

// sampleView is a view with one row of each kind of state status shows,
// and pauses, for the table's layout.
func sampleView() *view {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	pause := now.Add(4*time.Minute + 5*time.Second)
	refused := now.Add(-4 * time.Second)
	return &view{Now: now, Prefix: "throttle:", ScanComplete: true, Providers: []providerView{
		{Name: "acme", Rows: []row{
			{Limit: "daily", Kind: "window", Scope: "provider", Published: "250,000/day", Effective: "237,500/day",
				Capacity: 237500, Used: 1200, Remaining: 236290, Ahead: 10, ResetAfterMS: 53640000, Exists: true},
			{Limit: "idle", Kind: "gcra", Scope: "provider", Published: "100/s", Effective: "95/s", Capacity: 95, Remaining: 95},
			{Limit: "tokens", Kind: "gcra", Scope: "provider", Published: "100/min burst 50", Effective: "100/min burst 50",
				Capacity: 50, Used: 50, Debt: 10, ResetAfterMS: 36000, Exists: true},
		}},
		{Name: "models", Rows: []row{
			{Limit: "streams", Kind: "concurrent", Scope: "provider", Published: "3 concurrent", Effective: "3 concurrent",
				Capacity: 3, Used: 2, Remaining: 1, NextExpiryMS: 41000, ResetAfterMS: 59000, Exists: true},
		}},
		{Name: "tenants", TenantScope: "business", PausedUntil: &pause, ScopesKnown: 12, ScopesShown: 2, Rows: []row{
			{Limit: "quota", Kind: "gcra", Scope: "business", Value: "", Published: "5/min", Effective: "5/min",
				Capacity: 5, Remaining: 5, PausedUntil: &pause},
			{Limit: "quota", Kind: "gcra", Scope: "business", Value: "a-rather-long-business-name-of-a-tenant",
				Published: "5/min", Effective: "5/min", Capacity: 5, Used: 4, Remaining: 1, ResetAfterMS: 48000, Exists: true, PausedUntil: &pause},
		}},
	}, Pauses: []pauseView{
		{Provider: "tenants", Holds: holdsNoTenant, Until: pause, SetAt: &now, Reason: "429 from api.tenants.test, Retry-After 4m5s"},
		{Provider: "tenants", Tenant: "a-rather-long-business-name-of-a-tenant", Holds: holdsTenant, Until: pause, SetAt: &now,
			Reason: "throttle pause by ops@bastion: the tenant's runaway import, ticket 4242"},
	}, Refusals: []refusalView{
		{Provider: "tenants", Limit: "quota", Last5Min: 37, LastHour: 1204, Last: &refused, RetryAfterMS: 12000},
		{Provider: "acme", Limit: "pause", Last5Min: 0, LastHour: 3},
	}}
}

// TestStatusTableLayout: the table shows only the limits with state
// (all of them with --all), the published figure next to the effective
// one, "full" or when the limit refills, and fits the width: wrapping,
// cutting scope values, or a block per limit on a narrow terminal.
func TestStatusTableLayout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		all   bool
		width int
	}{
		{"status-table-160.golden", false, 160},
		{"status-table-100.golden", false, 100},
		{"status-table-all-100.golden", true, 100},
		{"status-table-50.golden", false, 50},
		{"status-table-20.golden", false, minWidth},
	} {
		var b bytes.Buffer
		if err := renderTable(&b, sampleView(), tc.all, tc.width); err != nil {
			t.Fatal(err)
		}
		checkWidth(t, b.String(), tc.width)
		golden(t, tc.name, b.String())
	}
}

// TestStatusEmptyRedisIsShort: on a Redis without state, status says so
// in a few lines instead of listing every limit of the catalog as full;
// --all lists them all, and both fit the width.
func TestStatusEmptyRedisIsShort(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	args := []string{"status", "--redis", "redis://" + srv.Addr, "--width", "100"}
	out := mustCLI(t, args...)
	checkWidth(t, out, 100)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 ||
		!regexp.MustCompile(`^No limit has state in Redis: all \d+ are full \(--all lists them\)\.$`).MatchString(lines[2]) {
		t.Errorf("status on an empty Redis:\n%s", out)
	}
	all := mustCLI(t, append(args, "--all")...)
	checkWidth(t, all, 100)
	if n := strings.Count(all, " full\n"); n < 20 {
		t.Errorf("status --all on an empty Redis shows %d full limits:\n%s", n, all)
	}
}

// steady makes a view read from Redis independent of when it was read:
// a fixed now, and every duration that depends on it fixed.
func steady(v *view) {
	v.Now = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	later := v.Now.Add(10 * time.Minute)
	for i := range v.Pauses {
		p := &v.Pauses[i]
		p.Until = later
		if p.SetAt != nil {
			p.SetAt = &v.Now
		}
		p.Reason = regexp.MustCompile(`^throttle pause by [^:]*`).ReplaceAllString(p.Reason, "throttle pause by ops@bastion")
	}
	for i := range v.Providers {
		p := &v.Providers[i]
		if p.PausedUntil != nil {
			p.PausedUntil = &later
		}
		for j := range p.Rows {
			r := &p.Rows[j]
			if r.ResetAfterMS > 0 {
				r.ResetAfterMS = 90_000
			}
			if r.NextExpiryMS > 0 {
				r.NextExpiryMS = 45_000
			}
			if r.PausedUntil != nil {
				r.PausedUntil = &later
			}
		}
	}
}

// TestStatusTableFromRedis renders state written by the store into a
// real Redis: a provider-wide window, rolling window and GCRA limit, two
// tenants, one paused, a route's limit under 50% headroom, a lease held.
// Every state lasts seconds at least; only the durations that depend on
// the moment are fixed (steady).
func TestStatusTableFromRedis(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	for i := 0; i < 3; i++ {
		f.reserve(t, "https://api.acme.test/x", "")
	}
	for i := 0; i < 4; i++ {
		f.reserve(t, "https://api.tenants.test/x", "busy")
	}
	f.reserve(t, "https://api.tenants.test/x", "calm")
	f.reserve(t, "https://api.mixed.test/search", "finder")
	// 40 tokens of models' 100/min burst 50 (24s to refill), and a lease.
	res, _, err := f.cfg.Resolve(httptest.NewRequest("GET", "https://api.models.test/v1/chat", nil), providers.Input{})
	if err != nil {
		t.Fatal(err)
	}
	res.Request.Cost = 40
	if r, err := f.store.Reserve(context.Background(), &res.Request); err != nil || !r.Allowed {
		t.Fatalf("models reservation: %v", err)
	}
	mustCLI(t, f.args("pause", "tenants/busy", "--for", "10m", "--reason", "runaway import")...)
	v := f.status(t)
	steady(&v)
	// mixed's global limit (50/s) refills within 20ms of the search: whether
	// its state still exists depends on the moment status read it.
	for i, p := range v.Providers {
		if p.Name == "mixed" {
			v.Providers[i].Rows = slices.DeleteFunc(p.Rows, func(r row) bool { return r.Limit == "global" })
		}
	}
	for _, width := range []int{100, 60} {
		var b bytes.Buffer
		if err := renderTable(&b, &v, false, width); err != nil {
			t.Fatal(err)
		}
		checkWidth(t, strings.ReplaceAll(b.String(), f.prefix, "throttle:"), width)
		golden(t, fmt.Sprintf("status-redis-%d.golden", width), strings.ReplaceAll(b.String(), f.prefix, "cli:"))
	}
}

// TestStatusTopShowsBusiest: --top keeps the busiest tenants, whatever
// their names. (It used to sort by a score not yet computed, and so kept
// the first by name.)
func TestStatusTopShowsBusiest(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	f.reserve(t, "https://api.tenants.test/x", "a-calm")
	for i := 0; i < 4; i++ {
		f.reserve(t, "https://api.tenants.test/x", "z-busy")
	}
	v := f.status(t, "tenants", "--top", "1")
	p := v.Providers[0]
	if last := p.Rows[len(p.Rows)-1]; p.ScopesShown != 1 || last.Value != "z-busy" {
		t.Errorf("--top 1 shows %q (%d shown), want the busiest, z-busy", last.Value, p.ScopesShown)
	}
}
