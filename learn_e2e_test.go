package throttle_test

// End-to-end tests of learning (docs/decisions.md, "Learning the vendor's
// limit"): a fleet of two processes, each with its own transport and
// store on one Redis, against a fake vendor whose GCRA limit is not the
// configured one and which states it on every response
// (X-RateLimit-Limit). Every clock is one stepped clock and requests go
// one at a time, so the outcome does not depend on the machine's speed.
// Last, what the transport sends the store for stated limits (httpmock).

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

// learnYAML configures 100 per minute, the floor, learning what the
// vendor states up to 1,000.
const learnYAML = `
providers:
  vendor:
    hosts: ["HOST"]
    on_limit: fail
    signals:
      max_delay: 5m
    limits:
      - {name: core, limit: 100/min, learn: {ceiling: 1000}}
    sync: {format: x-ratelimit, counters: {core: core}}
`

// learnFleet is two processes of a fleet on one Redis, and a vendor
// behind a front that a plan change points at another vendor.
type learnFleet struct {
	clock  *quotatest.Clock
	vendor atomic.Pointer[throttletest.Vendor]
	url    string
	procs  [2]http.RoundTripper
}

func newLearnFleet(t *testing.T) *learnFleet {
	f := &learnFleet{clock: quotatest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))}
	front := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		u, _ := url.Parse(f.vendor.Load().URL)
		r.SetURL(u)
	}})
	t.Cleanup(front.Close)
	f.url = front.URL + "/fleet"
	rc := redistest.Start(t).Client(t)
	for i := range f.procs {
		store, err := redisstore.New(rc, redisstore.Options{Clock: f.clock, Timeout: fleetStoreTimeout})
		if err != nil {
			t.Fatal(err)
		}
		f.procs[i], _ = e2eTransport(t, learnYAML, front.Listener.Addr().String(), throttle.WithClock(f.clock), throttle.WithStore(store))
	}
	return f
}

// plan points the front at a new vendor: a GCRA of rate per minute with
// a burst of rate, stating rate as its limit on every response.
func (f *learnFleet) plan(t *testing.T, rate int) *throttletest.Vendor {
	v := e2eVendor(t, throttletest.Options{
		Enforcer: throttletest.GCRA(rate, time.Minute, rate),
		Signal:   throttletest.RetryAfterSeconds,
		Counters: true,
		Clock:    f.clock.Now,
	})
	f.vendor.Store(v)
	return v
}

// run offers 10 requests a second for d, the processes taking turns, and
// returns how many the fleet sent.
func (f *learnFleet) run(t *testing.T, d time.Duration) (sent int) {
	for i := 0; i < int(d/(100*time.Millisecond)); i++ {
		if !syncSend(t, f.procs[i%2], f.url) {
			sent++
		}
		f.clock.Advance(100 * time.Millisecond)
	}
	return sent
}

// burst sends n requests at once, the processes taking turns, and
// returns how many the fleet sent: what it believes the vendor allows at
// once, before any response can drain it.
func (f *learnFleet) burst(t *testing.T, n int) int {
	var sent atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(rt http.RoundTripper) {
			defer wg.Done()
			req, err := http.NewRequest("GET", f.url, nil)
			if err != nil {
				errs <- err
				return
			}
			resp, err := rt.RoundTrip(req)
			var lerr *throttle.LimitError
			if errors.As(err, &lerr) {
				return
			}
			if err != nil {
				errs <- err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			sent.Add(1)
		}(f.procs[i%2])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return int(sent.Load())
}

// TestE2ELearnsVendorLimit: the vendor allows 300 a minute, three times
// the configured 100. The first responses state it; the fleet, both
// processes alike, then runs at 300 a minute, sends up to 300 at once
// from idle, and the vendor throttles nothing. Without learning the fleet stays at its floor, 100 a minute
// (and a process that learned alone would be starved by the other's).
func TestE2ELearnsVendorLimit(t *testing.T) {
	t.Parallel()
	f := newLearnFleet(t)
	v := f.plan(t, 300)
	f.run(t, time.Minute) // learns, and spends the vendor's burst
	if sent := f.run(t, 2*time.Minute); sent < 550 || sent > 600 {
		t.Errorf("the fleet sent %d in two minutes against a vendor allowing 300 a minute, want 550 to 600 (at the floor: 200)", sent)
	}
	f.clock.Advance(time.Minute) // idle: every bucket full again
	// Responses of the burst that overtake each other drain a few more
	// (a sync counts a later reservation the vendor counted twice).
	if sent := f.burst(t, 400); sent < 250 || sent > 300 {
		t.Errorf("a burst of 400 from idle: the fleet sent %d, want up to the vendor's 300 (at the floor: 100)", sent)
	}
	if _, throttled := v.Counts(); throttled != 0 {
		t.Errorf("the vendor throttled %d requests, want 0: the fleet learned its limit, not more", throttled)
	}
}

// TestE2ELearnsPlanDowngrade: the vendor allowed 300 a minute, then the
// plan goes down to 150: the responses of the new plan state it, and the
// fleet follows it down instead of running at the 300 it learned: a
// burst from idle is the new plan's 150, which the vendor admits whole.
func TestE2ELearnsPlanDowngrade(t *testing.T) {
	t.Parallel()
	f := newLearnFleet(t)
	f.plan(t, 300)
	f.run(t, 2*time.Minute)
	v := f.plan(t, 150)
	f.run(t, time.Minute) // the new plan's burst
	if sent := f.run(t, 2*time.Minute); sent < 270 || sent > 300 {
		t.Errorf("the fleet sent %d in two minutes after a downgrade to 150 a minute, want 270 to 300", sent)
	}
	f.clock.Advance(time.Minute)
	if sent := f.burst(t, 400); sent < 120 || sent > 150 {
		t.Errorf("a burst of 400 from idle after a downgrade to 150: the fleet sent %d, want up to 150", sent)
	}
	if _, throttled := v.Counts(); throttled != 0 {
		t.Errorf("the vendor throttled %d requests after the downgrade, want 0", throttled)
	}
}

// TestLearnIgnoresGarbageAndCostsNoRoundTripWhenSteady: a limit that no
// valid header states (negative, non-numeric, zero, overflowing) is not
// recorded and costs no store call; a valid one is recorded with one
// call, and the same figure again costs none.
func TestLearnIgnoresGarbageAndCostsNoRoundTripWhenSteady(t *testing.T) {
	t.Parallel()
	store := &syncCounting{}
	f := newFixture(t, `
providers:
  vendor:
    hosts: [api.vendor.test]
    on_limit: fail
    limits:
      - {name: core, limit: 10/h, learn: true}
    sync: {format: x-ratelimit, counters: {default: core}}
`, throttle.WithStore(store))
	store.Store = quota.NewMemoryStore(quota.MemoryOptions{Clock: f.clock})
	ctx := context.Background()
	respond := func(limit string) {
		t.Helper()
		f.mock.RegisterResponder("GET", "https://api.vendor.test/x", func(*http.Request) (*http.Response, error) {
			resp := httpmock.NewStringResponse(200, "{}")
			resp.Header.Set("X-RateLimit-Limit", limit)
			return resp, nil
		})
		if _, err := f.do(ctx, "GET", "https://api.vendor.test/x"); err != nil {
			t.Fatalf("X-RateLimit-Limit %q: %v", limit, err)
		}
	}
	for _, garbage := range []string{"-5", "abc", "0", "99999999999999999999", "3.5"} {
		respond(garbage)
	}
	if n := store.syncs.Load(); n != 0 {
		t.Errorf("%d store calls for garbage limits, want 0", n)
	}
	respond("30")
	respond("30")
	if n := store.syncs.Load(); n != 1 {
		t.Errorf("%d store calls for a limit of 30 stated twice, want 1: the second decision ran at 30 already", n)
	}
}

// TestE2ELearnFallsBack: the vendor stated 1,000 a minute and the fleet
// sent 150 at once at that figure; then its responses state 100 (a plan
// downgrade, or the real limit after a bogus figure). The 150 count at
// 100 a minute from then on: 100 a minute with a burst of 100 allows 200
// in the minute from the burst, so about 50 more go in that minute, not
// the 185 the fleet sent when the 150 counted at the emission interval of
// 1,000 a minute. Requests go one at a time on a stepped clock.
func TestE2ELearnFallsBack(t *testing.T) {
	t.Parallel()
	f := newLearnFleet(t)
	var stated atomic.Int64
	stated.Store(1000)
	f.vendor.Store(e2eVendor(t, throttletest.Options{
		Clock: f.clock.Now,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-RateLimit-Limit", strconv.FormatInt(stated.Load(), 10))
			w.Header().Set("X-RateLimit-Resource", "core")
		}),
	}))
	f.run(t, 100*time.Millisecond) // learns 1,000
	f.clock.Advance(time.Minute)
	for i := 0; i < 150; i++ {
		if syncSend(t, f.procs[i%2], f.url) {
			t.Fatalf("request %d of 150 at once at a learned 1,000 a minute (burst 1,000) was refused", i)
		}
	}
	stated.Store(100)
	if sent := f.run(t, time.Minute); sent < 45 || sent > 55 {
		t.Errorf("150 sent at once at a learned 1,000 a minute, then 100 stated: the fleet sent %d in the next minute, want about 50", sent)
	}
}
