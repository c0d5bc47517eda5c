package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writeTemp writes a configuration file into dir.
func writeTemp(t *testing.T, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestValidateKeys: validate prints each provider's keys, and notes a
// provider whose keys an earlier version would have tagged per tenant.
func TestValidateKeys(t *testing.T) {
	t.Parallel()
	out := mustCLI(t, "validate", validFile)
	for _, want := range []string{
		"keys per_provider: every key and the pause live in hash tag acme",
		"keys per_tenant, tagged per business: each value's keys and pause live in hash tag tenants:<value>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "note:") {
		t.Errorf("validate notes an upgrade for a file that needs none:\n%s", out)
	}
	path := writeTemp(t, t.TempDir(), "inferred.yaml", "providers:\n  gh: {hosts: [api.gh.test], limits: [{name: core, limit: 1/s, scope: business}]}\n")
	out = mustCLI(t, "validate", path)
	if !strings.Contains(out, "note: every limit is scoped by business") || !strings.Contains(out, "set keys: per_tenant") {
		t.Errorf("validate does not note the upgrade:\n%s", out)
	}
}

// TestCLIFindsEarlierKeys: status, pause, resume and reset find and write
// the keys in the format of the versions before the keys field (literal
// keys below), for a provider-wide provider (acme) and one with keys per
// tenant (tenants), so operators' tools keep working across the upgrade.
func TestCLIFindsEarlierKeys(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	ctx := context.Background()
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMicro(), 10)
	literal := map[string]string{
		"peak":   f.prefix + "{acme}:peak",
		"tenant": f.prefix + "{tenants:old}:quota:old",
		"pause":  f.prefix + "{tenants:held}:!pause:pause:held",
	}
	for _, k := range literal {
		if err := f.client.Set(ctx, k, future, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	v := f.status(t)
	if r := findRow(t, v, "acme", "peak", ""); !r.Exists || r.Key != literal["peak"] || r.Remaining != 0 {
		t.Errorf("acme peak: %+v, want the state of %s", r, literal["peak"])
	}
	if r := findRow(t, v, "tenants", "quota", "old"); !r.Exists || r.Key != literal["tenant"] || r.Remaining != 0 {
		t.Errorf("tenant old: %+v, want the state of %s", r, literal["tenant"])
	}
	if r := findRow(t, v, "tenants", "quota", "held"); r.PausedUntil == nil {
		t.Errorf("tenant held: %+v, want paused by %s", r, literal["pause"])
	}
	mustCLI(t, f.args("resume", "tenants/held")...)
	mustCLI(t, f.args("reset", "tenants/quota/old")...)
	mustCLI(t, f.args("reset", "acme/peak")...)
	for name, k := range literal {
		if n := f.client.Exists(ctx, k).Val(); n != 0 {
			t.Errorf("%s: %s is still there after resume and reset", name, k)
		}
	}
	mustCLI(t, f.args("pause", "tenants/next", "--for", "1m")...)
	mustCLI(t, f.args("pause", "acme", "--for", "1m")...)
	for _, k := range []string{f.prefix + "{tenants:next}:!pause:pause:next", f.prefix + "{acme}:!pause:pause"} {
		if n := f.client.Exists(ctx, k).Val(); n != 1 {
			t.Errorf("pause did not write %s", k)
		}
	}
}
