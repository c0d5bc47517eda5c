package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

// On shutdown the proxy gives back the quota it took ahead and did not
// use: the limit's schedule in Redis comes back by those slots at once,
// instead of keeping them until their places pass.
//
// The limit is slow (60/min: a slot is a second on the schedule) and the
// period long (20 s: the pool goes idle only after 10 s without a
// request), so that nothing the test does depends on how fast a busy
// machine runs it: the schedule's end (the store's now plus ResetAfter)
// is an absolute time that only a charge or a give-back moves.
func TestProxyGivesBackQuotaTakenAhead(t *testing.T) {
	t.Parallel()
	v := throttletest.NewVendor(throttletest.Options{})
	defer v.Close()
	cfg := writeConfig(t, fmt.Sprintf(`
providers:
  vendor:
    hosts: [%q]
    on_limit: fail
    ahead: {period: 20s}
    limits: [{name: peak, limit: 60/min, burst: 60}]
`, v.Host()))
	redisSrv := redistest.Start(t)
	const prefix = "ahead:"
	p := startProxy(t, 1, "--redis", "redis://"+redisSrv.Addr, "--config", cfg, "--prefix", prefix, "--insecure-upstream-http")

	// A few requests at once: the first are decided by the store, then
	// the demand asks for a batch, whose slots serve the rest.
	const sent = 6
	for i := range sent {
		resp, err := http.Get(p.addrs[0] + "/" + v.Host() + "/x")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d, want 200", i, resp.StatusCode)
		}
	}

	pcfg, err := providers.LoadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	store, err := redisstore.New(redisSrv.Client(t), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	req := httpRequest(t, "GET", v.URL+"/x")
	res, ok, err := pcfg.Resolve(req, providers.Input{})
	if !ok || err != nil {
		t.Fatalf("Resolve: %v %v", ok, err)
	}
	// end is where the limit's schedule is taken up to.
	end := func() time.Time {
		t.Helper()
		snap, err := store.Inspect(context.Background(), &res.Request)
		if err != nil {
			t.Fatal(err)
		}
		return snap.Now.Add(snap.Items[0].ResetAfter)
	}
	before := end()
	if code := p.stop(); code != exitOK {
		t.Fatalf("exit %d, want 0:\n%s", code, p.stderr)
	}
	after := end()
	back := before.Sub(after)
	t.Logf("%d requests sent; the schedule's end moved back %v on shutdown", sent, back)
	if served, _ := v.Counts(); served != sent {
		t.Fatalf("vendor served %d, want %d", served, sent)
	}
	// At least one slot (a second) came back: a batch is at least two
	// slots, and the demand of a few requests takes more than it used.
	if back < time.Second {
		t.Errorf("on shutdown the schedule's end moved back %v, want at least a slot (1s): the slots taken ahead were not given back\n%s",
			back, p.stderr)
	}
}

// httpRequest is http.NewRequest that fails the test on an error.
func httpRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// blockedCloser is a Close that waits until released, as a give-back to
// a Redis that does not answer would.
type blockedCloser struct{ release chan struct{} }

func (b blockedCloser) Close() error {
	<-b.release
	return nil
}

// Giving back what was taken ahead does not hold a shutdown past its
// bound when the store does not answer: closeAhead returns, and says so.
func TestProxyGiveBackIsBounded(t *testing.T) {
	t.Parallel()
	c := blockedCloser{release: make(chan struct{})}
	defer close(c.release) // the Close left running ends with the test
	out := newOutput()
	closeAhead(c, 10*time.Millisecond, slog.New(slog.NewTextHandler(out, nil)))
	if !strings.Contains(out.String(), "not given back in time") {
		t.Errorf("closeAhead returned without saying the give-back was cut short: %q", out)
	}
}
