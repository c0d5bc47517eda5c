package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
)

// ringSpec is --redis for --ring: the shards NAME=ADDR, as r's Client
// names them.
func ringSpec(r *redistest.Ring) string {
	var parts []string
	for name, addr := range r.Addrs {
		parts = append(parts, name+"="+addr)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// TestPauseEveryTenantOnRing: on a go-redis Ring (--ring), "pause
// PROVIDER" holds the tenants whose keys live on each of the three
// shards, through the pause's copy on every shard, records why, and
// "resume PROVIDER" releases them; status finds the tenants on every
// shard and shows the pause with its reason.
func TestPauseEveryTenantOnRing(t *testing.T) {
	t.Parallel()
	r := redistest.StartRing(t, 3)
	ring := r.Client(t, nil)
	f := newFixture(t, ringSpec(r), ring)
	p, _ := f.cfg.Provider("tenants")
	byTag := map[string]string{}
	var tenants []string
	for _, tag := range r.TagPerShard(t, ring, func(i int) string {
		name := fmt.Sprintf("t%d", i)
		byTag[p.Tag(name)] = name
		return p.Tag(name)
	}) {
		tenants = append(tenants, byTag[tag])
	}
	for _, tenant := range tenants {
		f.reserve(t, "https://api.tenants.test/x", tenant) // state, so status lists it
	}
	out := mustCLI(t, f.args("pause", "tenants", "--for", "10m", "--reason", "vendor incident 42", "--ring")...)
	if !strings.HasPrefix(out, "paused tenants until ") || !strings.Contains(out, "(10m0s from now): throttle pause") ||
		!strings.HasSuffix(out, ": vendor incident 42\n") {
		t.Errorf("pause said %q", out)
	}
	for _, tenant := range append([]string{""}, tenants...) {
		if res := f.reserve(t, "https://api.tenants.test/x", tenant); res.Allowed || res.Decider != quota.PausedDecider {
			t.Errorf("tenant %q after pause tenants on a Ring: %+v, want denied by the pause", tenant, res.Result)
		}
	}
	v := f.status(t, "tenants", "--ring", "--top", "0", "--scan-steps", "1000")
	if !v.ScanComplete || v.Providers[0].ScopesKnown != len(tenants) {
		t.Errorf("status: scan complete %v, %d tenants known, want %d", v.ScanComplete, v.Providers[0].ScopesKnown, len(tenants))
	}
	for _, tenant := range tenants {
		if row := findRow(t, v, "tenants", "quota", tenant); row.PausedUntil == nil || row.PausedUntil.Sub(v.Now) < 9*time.Minute {
			t.Errorf("status of %s under the provider's pause: %+v", tenant, row)
		}
	}
	if len(v.Pauses) != 1 || v.Pauses[0].Holds != holdsAllTenants || !strings.HasSuffix(v.Pauses[0].Reason, ": vendor incident 42") {
		t.Errorf("status's pauses: %+v, want the pause of every tenant with its reason", v.Pauses)
	}
	if out := mustCLI(t, f.args("resume", "tenants", "--ring")...); !strings.Contains(out, "resumed tenants") {
		t.Errorf("resume said %q", out)
	}
	for _, tenant := range append([]string{""}, tenants...) {
		if res := f.reserve(t, "https://api.tenants.test/x", tenant); !res.Allowed {
			t.Errorf("tenant %q after resume tenants on a Ring: %+v, want admitted", tenant, res.Result)
		}
	}
	for i, s := range r.Servers {
		if n := s.Client(t).Exists(context.Background(), f.prefix+"{tenants}:!copy:{tenants}:!pause:pause:all").Val(); n != 0 {
			t.Errorf("shard %d still holds the pause's copy after resume", i)
		}
	}
}

// TestPauseKeepsLongerReason: a pause shorter than the one in force
// changes nothing, and says so with the reason of the one kept.
func TestPauseKeepsLongerReason(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	mustCLI(t, f.args("pause", "acme", "--for", "1h", "--reason", "the long one")...)
	out := mustCLI(t, f.args("pause", "acme", "--for", "1m", "--reason", "a short one")...)
	if !strings.Contains(out, "(a longer pause in force, kept): throttle pause") || !strings.HasSuffix(out, ": the long one\n") {
		t.Errorf("a shorter pause said %q, want the longer one's reason", out)
	}
}

// TestRingFlags: --ring wants NAME=ADDR shards, and a Ring or a cluster,
// not both; a shard that does not answer is named.
func TestRingFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--redis", "127.0.0.1:1"}, exitUsage, "want NAME=ADDR for each shard"},
		{[]string{"--redis", "a=127.0.0.1:1,a=127.0.0.1:2"}, exitUsage, `shard "a" is named twice`},
		{[]string{"--redis", "=127.0.0.1:1"}, exitUsage, "want NAME=ADDR"},
		{[]string{"--redis", "a=127.0.0.1:1", "--cluster"}, exitUsage, "--ring and --cluster"},
		{[]string{"--redis", "a=127.0.0.1:1", "--timeout", "1s"}, exitFailure, "shard a of the Redis Ring (127.0.0.1:1)"},
	} {
		args := append([]string{"status", "--ring", "--config", validFile}, tc.args...)
		code, _, errOut := cli(context.Background(), args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %s; want %d and %q", args, code, errOut, tc.code, tc.want)
		}
	}
}
