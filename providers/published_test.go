package providers

import "testing"

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
	if got, burst := p.Published(40), p.Limits[0].Quota.Capacity(); got != burst {
		t.Errorf("Published(40) = %d, want the burst of 40 at 95%%, %d", got, burst)
	}
	for _, tc := range []struct {
		headroom float64
		n, want  int64
	}{
		{0.95, 1, 1}, {0.95, 0, 0}, {0.95, 5000, 4750}, {0, 7, 7}, {1, 7, 7},
	} {
		if got := (&Provider{Headroom: tc.headroom}).Published(tc.n); got != tc.want {
			t.Errorf("headroom %v: Published(%d) = %d, want %d", tc.headroom, tc.n, got, tc.want)
		}
	}
}
