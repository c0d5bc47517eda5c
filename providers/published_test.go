package providers

import (
	"testing"
	"time"
)

// TestPublished: a vendor's figure gets the provider's headroom as Load
// gives it to a burst, so that the two compare equal.
func TestPublished(t *testing.T) {
	t.Parallel()
	cfg, err := Load("p.yaml", []byte(`
providers:
  p:
    hosts: [p.test]
    headroom: 95%
    limits: [{name: l, limit: 2/s burst 40}]
`))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := cfg.Provider("p")
	if got, burst := p.published(40), p.Limits[0].Quota.Capacity(); got != burst {
		t.Errorf("published(40) = %d, want the burst of 40 at 95%%, %d", got, burst)
	}
	for _, tc := range []struct {
		headroom float64
		n, want  int64
	}{
		{0.95, 1, 1}, {0.95, 0, 0}, {0.95, 5000, 4750}, {0, 7, 7}, {1, 7, 7},
	} {
		if got := (&Provider{Headroom: tc.headroom}).published(tc.n); got != tc.want {
			t.Errorf("headroom %v: published(%d) = %d, want %d", tc.headroom, tc.n, got, tc.want)
		}
	}
}

// TestPublishedLimit: each limit keeps the figure the configuration
// states, before headroom, next to the one the store enforces.
func TestPublishedLimit(t *testing.T) {
	t.Parallel()
	cfg, err := Load("p.yaml", []byte(`
providers:
  p:
    hosts: [p.test]
    headroom: 95%
    limits:
      - {name: fast, limit: 810/min burst 90}
      - {name: daily, limit: 250000/day}
      - {name: open, limit: 4 concurrent}
`))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := cfg.Provider("p")
	for i, want := range []struct {
		pub, burst int64
		period     time.Duration
		rate       int64 // enforced
	}{
		{810, 90, time.Minute, 810}, // 769.5/min does not scale to a whole count: the period stretches
		{250000, 0, 0, 237500},
		{4, 0, DefaultLease, 3},
	} {
		l := p.Limits[i]
		if pub := l.Published; pub.Rate != want.pub || pub.Burst != want.burst || pub.Period != want.period || pub.Kind != l.Quota.Kind {
			t.Errorf("%s: published %+v, want %d per %v burst %d", l.Quota.Name, *pub, want.pub, want.period, want.burst)
		}
		if l.Quota.Rate != want.rate {
			t.Errorf("%s: enforced rate %d, want %d", l.Quota.Name, l.Quota.Rate, want.rate)
		}
	}
	if fast := p.Limits[0].Quota; fast.Period <= time.Minute || fast.Burst != 85 {
		t.Errorf("fast: enforced %+v, want the period stretched past a minute and the burst 85", *fast)
	}
}
