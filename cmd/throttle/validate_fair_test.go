package main

import (
	"context"
	"strings"
	"testing"
)

// TestValidateFair: validate says who shares each fair limit and with
// what weights, warns of a fair limit whose burst is too small, and
// refuses a fair limit the store cannot share (with its line and column).
func TestValidateFair(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
tenants: {acme: enterprise}
providers:
  openai:
    hosts: [api.openai.com]
    limits:
      - {name: rpm, limit: 500/min, fair: tenant}
      - {name: tiny, limit: 5/s burst 2, fair: tenant}
    plans:
      enterprise: {weight: 4}
  zd:
    hosts: ["*.zendesk.com"]
    limits: [{name: account, limit: 700/min burst 70, fair: "label:team"}]
`)
	code, out, errOut := cli(context.Background(), "validate", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	for _, want := range []string{
		"limit rpm is shared fairly by tenant: each business (WithBusiness, Throttle-Business) is a tenant, of its plan's weight",
		"limit account is shared fairly by label:team: each value of the label team (WithLabel, Throttle-Label) is a tenant, of weight 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "warning: openai: limit tiny: fair with a burst of 2") || strings.Contains(errOut, "limit rpm") {
		t.Errorf("warnings:\n%s\nwant one for tiny alone", errOut)
	}
	bad := writeConfig(t, `
providers:
  v:
    hosts: [api.v.test]
    limits: [{name: daily, limit: 1000/day, fair: tenant}]
`)
	code, _, errOut = cli(context.Background(), "validate", bad)
	if code == exitOK || !strings.Contains(errOut, "providers.yaml:5:51: providers.v.limits[0].fair: only a GCRA limit") {
		t.Errorf("validate of a fair window: exit %d\n%s", code, errOut)
	}
}
