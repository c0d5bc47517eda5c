//go:build browser

package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota/redisstore"
)

// TestStatusPageSharesInBrowser loads the status page of sharesYAML in a
// headless Chromium: each class's headroom of a classed limit, what an
// active class holds, and who shares a fair limit, read from a real
// Redis (make browsertest).
func TestStatusPageSharesInBrowser(t *testing.T) {
	browser := findBrowser(t)
	srv := redistest.Start(t)
	cfgPath := writeConfig(t, sharesYAML)
	cfg, err := providers.LoadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("cli%d:", prefixes.Add(1))
	st, err := redisstore.New(srv.Client(t), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, class := range []string{"interactive", "batch", "batch"} {
		res, _, err := cfg.Resolve(httptest.NewRequest("GET", "https://api.vendor.test/x", nil), providers.Input{Priority: class})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Reserve(context.Background(), &res.Request); err != nil {
			t.Fatal(err)
		}
	}
	// 60 of the fair limit's 70: state for 5 seconds.
	res, _, err := cfg.Resolve(httptest.NewRequest("GET", "https://api.shared.test/x", nil), providers.Input{Business: "acme", Cost: 60})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(context.Background(), &res.Request); err != nil {
		t.Fatal(err)
	}
	sf := storeFlags{redis: "redis://" + srv.Addr, config: cfgPath, prefix: prefix, timeout: 5 * time.Second}
	e, err := sf.open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	w, err := newWatcher(e, nil, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	page := httptest.NewServer(newStatusPage(w, time.Second))
	defer page.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--disable-gpu", "--no-sandbox",
		"--no-first-run", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", page.URL+"/")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, stderr.String())
	}
	for _, want := range []string{
		// hourly's lanes: interactive 1 of 20 spent, batch 2 of 80.
		`interactive 97 left · batch 78 left`,
		`data-classes="interactive=97 batch=78"`,
		// daily: interactive, active, holds 200 of 1,000 from batch.
		`interactive 997 left, holds 200 (`,
		`batch 797 left`,
		`fair by tenant`,
	} {
		if !bytes.Contains(dom, []byte(want)) {
			t.Errorf("the rendered page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("rendered DOM:\n%s", dom)
	}
}
