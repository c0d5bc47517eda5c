package providers

import (
	"testing"
	"time"
)

const aheadYAML = `
providers:
  fast:
    hosts: [fast.example]
    ahead: {period: 200ms}
    limits:
      - {name: peak, limit: 1000/s}
      - {name: minute, limit: 60000/minute, ahead: {period: 100ms}}
      - {name: per-biz, limit: 100/s, scope: business, missing: skip, ahead: false}
    routes:
      - path: /daily/**
        limits: [{name: daily, limit: 100000/day}]
      - path: /extra/**
        limits: [{name: extra, limit: 500/s}]
  plain:
    hosts: [plain.example]
    limits: [{name: peak, limit: 1000/s}]
`

// TestAhead: a GCRA limit takes the provider's period unless it gives its
// own (or false); a request takes quota ahead only when every limit of
// its stack does, at the shortest period among them.
func TestAhead(t *testing.T) {
	t.Parallel()
	cfg, err := Load("ahead.yaml", []byte(aheadYAML), WithLookupEnv(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := cfg.Provider("fast")
	if fast.Ahead != 200*time.Millisecond {
		t.Errorf("provider Ahead = %v, want 200ms", fast.Ahead)
	}
	for i, want := range []time.Duration{200 * time.Millisecond, 100 * time.Millisecond, 0} {
		if got := fast.Limits[i].Ahead; got != want {
			t.Errorf("limit %s: Ahead = %v, want %v", fast.Limits[i].Quota.Name, got, want)
		}
	}
	if got := fast.Routes[1].Limits[0].Ahead; got != 200*time.Millisecond {
		t.Errorf("a route's GCRA limit: Ahead = %v, want the provider's 200ms", got)
	}
	if got := fast.Routes[0].Limits[0].Ahead; got != 0 {
		t.Errorf("a daily window: Ahead = %v, want 0", got)
	}
	reg := NewRegistry(cfg)
	for _, c := range []struct {
		url, biz string
		want     time.Duration
	}{
		{"https://fast.example/x", "", 100 * time.Millisecond},       // peak and minute: the shorter
		{"https://fast.example/x", "acme", 0},                        // per-biz says false
		{"https://fast.example/daily/x", "", 0},                      // a daily window in the stack
		{"https://fast.example/extra/x", "", 100 * time.Millisecond}, // a route's limit with the provider's
		{"https://plain.example/x", "", 0},                           // no ahead at all
		{"https://fast.example/dailyx", "", 100 * time.Millisecond},  // not the route
		{"https://fast.example/daily", "", 0},                        // the route with nothing after
	} {
		res, ok, err := reg.Resolve(newRequest(t, "GET", c.url), Input{Business: c.biz})
		if !ok || err != nil {
			t.Fatalf("%s: Resolve = %v, %v", c.url, ok, err)
		}
		if got := res.Ahead(); got != c.want {
			t.Errorf("%s (business %q): Ahead = %v, want %v", c.url, c.biz, got, c.want)
		}
	}
}
