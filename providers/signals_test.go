package providers_test

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/providers"
)

func TestSignalsDefaultDelay(t *testing.T) {
	t.Parallel()
	cfg, err := providers.LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	gh, ok := cfg.Provider("github")
	if !ok {
		t.Fatal("the catalog has no github provider")
	}
	if gh.Signals.DefaultDelay != time.Minute {
		t.Errorf("github's default_delay = %v, want 1m (GitHub: wait at least a minute)", gh.Signals.DefaultDelay)
	}
	_, err = providers.Load("bad.yaml", []byte(`
providers:
  v:
    hosts: [v.test]
    signals: {default_delay: soon}
`))
	if !errors.Is(err, providers.ErrConfig) || !strings.Contains(err.Error(), "bad.yaml:5:") ||
		!strings.Contains(err.Error(), "providers.v.signals.default_delay") {
		t.Errorf("a bad default_delay: got %v, want an ErrConfig naming bad.yaml:5 and the field", err)
	}
}

// GitHub sends x-ratelimit-reset, the end of the hour-long primary window,
// on every response. A secondary limit's 403 names its own delay in
// retry-after: that is the delay, not the primary window's reset; the
// reset is the delay when the primary limit is spent.
func TestSignalsGitHubDelays(t *testing.T) {
	t.Parallel()
	cfg, err := providers.LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	gh, ok := cfg.Provider("github")
	if !ok {
		t.Fatal("the catalog has no github provider")
	}
	now := time.Unix(1_800_000_000, 0)
	reset := strconv.FormatInt(now.Add(40*time.Minute).Unix(), 10)
	for _, c := range []struct {
		name      string
		remaining string
		header    http.Header
		body      string
		want      time.Duration
	}{
		{"secondary with retry-after", "4990", http.Header{"Retry-After": {"60"}}, "You have exceeded a secondary rate limit.", time.Minute},
		{"primary spent", "0", nil, "API rate limit exceeded for user ID 1.", 40 * time.Minute},
	} {
		h := http.Header{"X-Ratelimit-Remaining": {c.remaining}, "X-Ratelimit-Reset": {reset}}
		for k, v := range c.header {
			h[k] = v
		}
		resp := &http.Response{StatusCode: http.StatusForbidden, Header: h, Body: io.NopCloser(strings.NewReader(c.body))}
		v := backoff.Classify(resp, &gh.Signals, now)
		if !v.Throttled || v.Delay != c.want {
			t.Errorf("%s: got throttled %v, delay %v (from %s); want throttled, %v", c.name, v.Throttled, v.Delay, v.Source, c.want)
		}
	}
}
