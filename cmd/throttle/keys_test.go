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

const againstOld = `
providers:
  gh:
    hosts: [api.gh.test]
    keys: per_tenant
    limits:
      - {name: core, limit: 5000/h, scope: business}
      - {name: daily, limit: 100/day, scope: business}
  wide:
    hosts: [api.wide.test]
    limits: [{name: peak, limit: 100/s}, {name: monthly, limit: 1000/month}]
  gone:
    hosts: [api.gone.test]
    limits: [{name: peak, limit: 1/s}]
`

// TestValidateAgainst lists what a switch of configuration moves, per
// provider, and exits 4 when anything moves.
func TestValidateAgainst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := writeTemp(t, dir, "old.yaml", againstOld)
	tests := []struct {
		name, new string
		code      int
		want      []string // lines of stdout, in order
	}{
		{"same", againstOld, exitOK, []string{"0 changes that move or forget state"}},
		{"rates only", strings.ReplaceAll(againstOld, "100/s", "50/s burst 10"), exitOK, nil},
		{"added only", againstOld + "  fresh:\n    hosts: [api.fresh.test]\n    limits: [{name: x, limit: 1/s}]\n", exitOK,
			[]string{"0 changes", "fresh", "  provider_added: new provider"}},
		{"every kind", strings.NewReplacer(
			"    keys: per_tenant\n", "",
			"{name: daily, limit: 100/day", "{name: daily, limit: 100/day resets 09:00",
			"{name: core, limit: 5000/h, scope: business}", "{name: core, limit: 5000/h, scope: business}\n      - {name: extra, limit: 1/s, scope: business}",
			"{name: peak, limit: 100/s}", "{name: burst, limit: 100/s}",
			"{name: monthly, limit: 1000/month}", "{name: monthly, limit: 1000/h, scope: business}",
			"  gone:\n    hosts: [api.gone.test]\n    limits: [{name: peak, limit: 1/s}]\n", "",
		).Replace(againstOld), exitMoves, []string{
			"old.yaml -> ", ": 7 changes that move or forget state",
			"gh",
			"  keys_moved: keys per_tenant (business) -> per_provider: every tenant's keys move from tag gh:<business value> to tag gh",
			"  pauses_moved: ",
			"  window_changed daily: window per day resets 00:00 UTC -> per day resets 09:00 UTC",
			"  limit_added extra: ",
			"wide",
			"  scope_changed monthly: scope provider -> business: its keys change (monthly:<business value>)",
			"  kind_changed monthly: window -> gcra",
			"  limit_renamed peak: renamed to burst",
			"gone",
			"  provider_removed: removed",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeTemp(t, t.TempDir(), "new.yaml", tc.new)
			code, out, errOut := cli(context.Background(), "validate", "--against", old, path)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			rest := out
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("stdout lacks %q after what came before:\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			if (code == exitMoves) != strings.Contains(errOut, "moves or forgets state") {
				t.Errorf("stderr: %q", errOut)
			}
		})
	}
	// Either file invalid: exit 3, the problems on stderr.
	bad := writeTemp(t, dir, "bad.yaml", "providers: {x: {hosts: [a.test], keys: nope, limits: [{name: a, limit: 1/s}]}}\n")
	for _, args := range [][]string{{"--against", bad, old}, {"--against", old, bad}} {
		code, _, errOut := cli(context.Background(), append([]string{"validate"}, args...)...)
		if code != exitConfig || !strings.Contains(errOut, "bad.yaml:1:") {
			t.Errorf("validate %q: exit %d, %s", args, code, errOut)
		}
	}
	if code, _, _ := cli(context.Background(), "validate", "--against", "", old); code != exitUsage {
		t.Errorf("empty --against: exit %d", code)
	}
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
