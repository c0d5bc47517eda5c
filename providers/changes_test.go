package providers

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

const changesBase = `
providers:
  gh:
    hosts: [api.gh.test]
    keys: per_tenant
    limits:
      - {name: core, limit: 5000/h, scope: business}
      - {name: daily, limit: 100/day, scope: business}
    routes:
      - {name: search, path: /search, limits: [{name: search, limit: 30/min, scope: business}]}
  wide:
    hosts: [api.wide.test]
    limits:
      - {name: peak, limit: 100/s}
      - {name: per, limit: 10/s, scope: business}
`

// TestChanges lists, per kind of edit, what Changes reports.
func TestChanges(t *testing.T) {
	t.Parallel()
	old := mustLoad(t, changesBase)
	tests := []struct {
		name string
		from string // replaced in changesBase (all occurrences)
		to   string
		want []string // "provider/limit kind" or "provider kind", in order
	}{
		{"nothing", "", "", nil},
		{"rates, headroom, behaviour", "    keys: per_tenant\n    limits:\n      - {name: core, limit: 5000/h",
			"    keys: per_tenant\n    headroom: 90%\n    on_limit: fail\n    limits:\n      - {name: core, limit: 4000/h burst 10", nil},
		{"route path", "path: /search,", "path: /find,", nil},
		{"keys per tenant to per provider", "    keys: per_tenant\n", "",
			[]string{"gh keys_moved", "gh pauses_moved"}},
		{"keys per provider to per tenant", "      - {name: peak, limit: 100/s}\n", "",
			[]string{"wide/peak limit_removed"}},
		{"tenant scope", "scope: business}", "scope: \"header:X-Account\"}",
			[]string{"gh keys_moved", "gh pauses_moved", "gh/core scope_changed", "gh/daily scope_changed", "gh/search scope_changed", "wide/per scope_changed"}},
		{"limit renamed", "name: daily,", "name: per-day,", []string{"gh/daily limit_renamed"}},
		{"limit removed and another added", "{name: daily, limit: 100/day", "{name: monthly, limit: 1000/month",
			[]string{"gh/daily limit_removed", "gh/monthly limit_added"}},
		{"kind", "100/day", "100/h", []string{"gh/daily kind_changed"}},
		{"window reset", "100/day", "100/day resets 09:00", []string{"gh/daily window_changed"}},
		{"window zone", "100/day", "100/day resets 00:00 Europe/Berlin", []string{"gh/daily window_changed"}},
		{"window unit", "100/day", "100/month", []string{"gh/daily window_changed"}},
		{"window quota", "100/day", "200/day", nil},
		{"window to rolling", "100/day", "100/day rolling", []string{"gh/daily kind_changed"}},
		{"provider removed", "  wide:\n    hosts: [api.wide.test]\n    limits:\n      - {name: peak, limit: 100/s}\n      - {name: per, limit: 10/s, scope: business}\n", "",
			[]string{"wide provider_removed"}},
		{"provider renamed", "  wide:", "  broad:", []string{"wide provider_renamed", "broad provider_added"}},
		{"provider added", "  wide:", "  other:\n    hosts: [api.other.test]\n    limits: [{name: x, limit: 1/s}]\n  wide:",
			[]string{"other provider_added"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			y := changesBase
			if tc.from != "" {
				if !strings.Contains(y, tc.from) {
					t.Fatalf("%q not in the base configuration", tc.from)
				}
				y = strings.ReplaceAll(y, tc.from, tc.to)
			}
			if tc.name == "keys per provider to per tenant" {
				y = strings.Replace(y, "  wide:\n    hosts: [api.wide.test]\n", "  wide:\n    hosts: [api.wide.test]\n    keys: per_tenant\n", 1)
				tc.want = append([]string{"wide keys_moved", "wide pauses_moved"}, tc.want...)
			}
			var got []string
			for _, c := range Changes(old, mustLoad(t, y)) {
				s := c.Provider
				if c.Limit != "" {
					s += "/" + c.Limit
				}
				got = append(got, s+" "+c.Kind.String())
				if c.Detail == "" || !strings.HasPrefix(c.String(), strings.TrimSuffix(s, " ")+": ") {
					t.Errorf("change %q: String %q", s, c.String())
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("Changes:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestChangesRolling: a rolling window's period change forgets its count
// when its buckets change width, and only then.
func TestChangesRolling(t *testing.T) {
	t.Parallel()
	conf := func(limit string) *Config {
		return mustLoad(t, "providers:\n  sf:\n    hosts: [x.sf.test]\n    limits: [{name: daily, limit: "+limit+"}]\n")
	}
	old := conf("15000/24h rolling")
	for limit, want := range map[string]string{
		"15000/day rolling":  "[]",
		"9000/24h rolling":   "[]",
		"15000/12h rolling":  "[sf/daily window_changed]",
		"15000/day":          "[sf/daily kind_changed]",
		"15000/24h burst 10": "[sf/daily kind_changed]",
	} {
		var got []string
		for _, c := range Changes(old, conf(limit)) {
			got = append(got, c.Provider+"/"+c.Limit+" "+c.Kind.String())
		}
		if fmt.Sprint(got) != want {
			t.Errorf("15000/24h rolling -> %s: %v, want %s", limit, got, want)
		}
	}
}

// TestReloadRefusesMovedKeys: Reload refuses a configuration that moves
// a provider's keys to other tags unless AllowMovedKeys, keeps the old one,
// and accepts any other change.
func TestReloadRefusesMovedKeys(t *testing.T) {
	t.Parallel()
	old := mustLoad(t, changesBase)
	reg := NewRegistry(old)
	moved := mustLoad(t, strings.Replace(changesBase, "    keys: per_tenant\n", "", 1))
	err := reg.Reload(moved)
	if !errors.Is(err, ErrKeysMoved) || !strings.Contains(err.Error(), "gh: keys per_tenant (business) -> per_provider") {
		t.Fatalf("Reload = %v, want ErrKeysMoved naming gh", err)
	}
	if reg.config() != old {
		t.Fatal("the refused configuration is in use")
	}
	other := mustLoad(t, strings.Replace(changesBase, "name: daily,", "name: per-day,", 1))
	if err := reg.Reload(other); err != nil {
		t.Fatalf("Reload of a renamed limit: %v", err)
	}
	if err := reg.Reload(moved, AllowMovedKeys()); err != nil || reg.config() != moved {
		t.Fatalf("Reload with AllowMovedKeys: %v", err)
	}
	// ReloadFile takes the option too.
	path := t.TempDir() + "/p.yaml"
	writeFile(t, path, changesBase)
	if err := reg.ReloadFile(path); !errors.Is(err, ErrKeysMoved) {
		t.Errorf("ReloadFile = %v, want ErrKeysMoved", err)
	}
	if err := reg.ReloadFile(path, AllowMovedKeys()); err != nil {
		t.Errorf("ReloadFile with AllowMovedKeys: %v", err)
	}
	// A registry that had no configuration takes any.
	if err := NewRegistry(nil).Reload(moved); err != nil {
		t.Errorf("first Reload: %v", err)
	}
}
