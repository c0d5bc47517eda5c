//go:build browser

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// browsers are the names a headless Chromium goes by, Debian's first.
var browsers = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// findBrowser returns the path of a headless Chromium on PATH. Without
// one, a test fails under CI and is skipped elsewhere (make browsertest
// installs chromium when missing).
func findBrowser(t *testing.T) string {
	t.Helper()
	for _, b := range browsers {
		if p, err := exec.LookPath(b); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("no headless browser (%v) on PATH: make browsertest installs chromium", browsers)
	}
	t.Skipf("no headless browser (%v) on PATH and $CI unset: skipped (make browsertest installs chromium)", browsers)
	return ""
}

// TestStatusPageInBrowser loads the status page in a headless Chromium
// and checks the DOM its script built from the JSON it fetched: bars of
// what is left, a pause with its reason, a lease, recent refusals, read
// from a real Redis. make browsertest
// runs it (it installs chromium when missing); without a browser it fails
// under CI and is skipped elsewhere.
func TestStatusPageInBrowser(t *testing.T) {
	browser := findBrowser(t)
	f := startFixture(t)
	for i := 0; i < 3; i++ {
		f.reserve(t, "https://api.acme.test/x", "")
	}
	f.reserve(t, "https://api.models.test/v1/chat", "")
	f.reserve(t, "https://api.tenants.test/x", "busy")
	mustCLI(t, f.args("pause", "tenants/busy", "--for", "10m", "--reason", "runaway <b>import</b>")...)
	noteRefusals(t, f, "acme", "daily", 7)
	_, srv := pageServer(t, f)

	// A loaded machine may take its time to start a browser; the page
	// itself runs on virtual time, long enough for its first fetches.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--disable-gpu", "--no-sandbox",
		"--no-first-run", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", srv.URL+"/")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, stderr.String())
	}
	for _, want := range []string{
		// acme daily: 3 of 100 used, a bar 97% full.
		`<div class="limit" data-provider="acme" data-limit="daily" data-value="" data-remaining="97" data-capacity="100">`,
		`<div class="fill" style="width: 97%;"></div>`,
		`>97 of 100 left<`,
		`published 100/day · effective 100/day`,
		// models: one lease of three held.
		`data-provider="models" data-limit="streams" data-value="" data-remaining="2" data-capacity="3"`,
		`1 lease held, soonest expires in`,
		// The tenant's pause (for 10 minutes: its limit's state may be
		// gone by the time a loaded machine has started the browser).
		`<div class="pause" data-paused="tenants/busy">paused: tenants/busy (the tenant's requests) until `,
		// Its reason, as text: the markup in it is escaped, not obeyed.
		`: runaway &lt;b&gt;import&lt;/b&gt; (set `,
		// The fleet's recent refusals.
		`<div class="refusal recent" data-provider="acme" data-limit="daily" data-last5m="7">acme · daily: 7 in the last 5 min, 7 in the last hour; latest `,
		`scan complete`,
	} {
		if !bytes.Contains(dom, []byte(want)) {
			t.Errorf("the rendered page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("rendered DOM:\n%s", dom)
	}
}
