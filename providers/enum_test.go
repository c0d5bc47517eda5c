package providers

import (
	"fmt"
	"testing"
)

// TestEnumsReadAsWritten: every enum of the package prints each of its
// values as the YAML spells it, so that a value read back from a loaded
// configuration prints as the user wrote it, and a value it does not know
// as Type(n).
func TestEnumsReadAsWritten(t *testing.T) {
	t.Parallel()
	const head = "providers:\n  p:\n    hosts: [p.example]\n"
	load := func(t *testing.T, fields, limit string) *Provider {
		t.Helper()
		src := head + fields + "    limits:\n      - {name: x, limit: 1/s" + limit + "}\n"
		cfg, err := Load("enum.yaml", []byte(src), WithLookupEnv(noEnv))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		p, _ := cfg.Provider("p")
		return p
	}
	for _, v := range []OnLimit{Wait, Fail} {
		if got := load(t, "    on_limit: "+v.String()+"\n", "").OnLimit; got != v {
			t.Errorf("on_limit: %s read as %v", v, got)
		}
	}
	for _, v := range []Mode{Enforce, Shadow} {
		if got := load(t, "    mode: "+v.String()+"\n", "").Mode; got != v {
			t.Errorf("mode: %s read as %v", v, got)
		}
	}
	for _, v := range []StoreErrorPolicy{FailClosed, FailOpen, Local} {
		extra := ""
		if v == Local {
			extra = "    local_share: 10%\n"
		}
		if got := load(t, "    on_store_error: "+v.String()+"\n"+extra, "").OnStoreError; got != v {
			t.Errorf("on_store_error: %s read as %v", v, got)
		}
	}
	for _, v := range []Missing{Shared, Skip, Refuse} {
		if got := load(t, "", ", scope: business, missing: "+v.String()).Limits[0].Missing; got != v {
			t.Errorf("missing: %s read as %v", v, got)
		}
	}
	for _, v := range []KeyMode{PerProvider, PerTenant} {
		if got := load(t, "    keys: "+v.String()+"\n", ", scope: business").Keys; got != v {
			t.Errorf("keys: %s read as %v", v, got)
		}
	}
	for _, v := range []ScopeKind{ScopeProvider, ScopeBusiness, ScopeHeader, ScopeLabel, ScopeHost} {
		written := v.String()
		if v == ScopeHeader || v == ScopeLabel {
			written += ":X-Name"
		}
		sc := load(t, "", ", scope: \""+written+"\"").Limits[0].Scope
		if sc.Kind != v || sc.String() != written {
			t.Errorf("scope: %s read as %v (%s)", written, sc.Kind, sc)
		}
	}
	for _, s := range []fmt.Stringer{OnLimit(9), Mode(9), StoreErrorPolicy(9), Missing(9), KeyMode(9), ScopeKind(9), ChangeKind(0), ChangeKind(99)} {
		if got, want := s.String(), fmt.Sprintf("%T(%d)", s, s); got != want[len("providers."):] {
			t.Errorf("unknown value prints %q, want %q", got, want[len("providers."):])
		}
	}
	if got := KeysMoved.String(); got != "keys_moved" {
		t.Errorf("KeysMoved = %q, want keys_moved, in snake case as every enum", got)
	}
}
