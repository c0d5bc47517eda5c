package providers_test

import (
	"errors"
	"strings"
	"testing"
	"time"

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
