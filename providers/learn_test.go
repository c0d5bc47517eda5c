package providers

import (
	"testing"
	"time"
)

// TestLearnLoads: learn: true makes the configured rate the floor of a
// limit that learns; learn: {ceiling: N} caps it at N with the headroom
// applied; a route's limit may learn through the route's sync, and
// learn: false is a limit that does not learn.
func TestLearnLoads(t *testing.T) {
	cfg, err := Load("learn.yaml", []byte(`
providers:
  github:
    hosts: [api.github.com]
    headroom: 90%
    limits:
      - {name: core, limit: 5000/h burst 500, learn: {ceiling: 20000}}
      - {name: fixed, rate: 10, period: 1s, learn: false}
    sync: {format: x-ratelimit, counters: {core: core}}
    routes:
      - name: search
        path: /search/*
        limits: [{name: search, rate: 30, period: 1m, learn: true}]
        sync: {format: x-ratelimit, counters: {search: search}}
`))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := cfg.Provider("github")
	core := p.Limits[0].Quota
	if !core.Learn || core.Rate != 4500 || core.Burst != 450 || core.Period != time.Hour || core.Ceiling != 18000 {
		t.Errorf("core = %+v, want learning 4500/h burst 450, ceiling 18000 (20000 at 90%%)", core)
	}
	if fixed := p.Limits[1].Quota; fixed.Learn || fixed.Ceiling != 0 {
		t.Errorf("fixed = %+v, want a limit that does not learn", fixed)
	}
	if s := p.Routes[0].Limits[0].Quota; !s.Learn || s.Rate != 27 || s.Ceiling != 0 {
		t.Errorf("search = %+v, want learning 27/m, no ceiling", s)
	}
}
