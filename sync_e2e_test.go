package throttle_test

// End-to-end tests of the vendor's counters: a fake vendor that keeps its
// own count of a fixed window per minute, sends its X-RateLimit counters on
// every response and asks for a retry after one second when it throttles,
// and shares the account with a second client the fleet cannot see. Every
// clock is one stepped clock (the vendor's, the transport's, the store's)
// and requests go one at a time, so the outcome does not depend on the
// machine's speed.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota/quotatest"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

// sharedYAML models the vendor's 100 per minute as a GCRA of the same
// figure at headroom 95% (95/min burst 95) and maps the vendor's counter
// onto it.
const sharedYAML = `
providers:
  vendor:
    hosts: ["HOST"]
    on_limit: fail
    headroom: 95%
    signals:
      max_delay: 5m
    limits:
      - {name: core, limit: 100/min burst 100}
    sync: {format: x-ratelimit, counters: {core: core}}
`

// sharedVendor starts the fake vendor on clock: 100 per minute window,
// Retry-After: 1 on a 429, counters on every response.
func sharedVendor(t *testing.T, clock *quotatest.Clock) *throttletest.Vendor {
	return e2eVendor(t, throttletest.Options{
		Enforcer:   throttletest.Window(100, time.Minute),
		Signal:     throttletest.RetryAfterSeconds,
		RetryAfter: time.Second,
		Counters:   true,
		Clock:      clock.Now,
	})
}

// syncSend makes one request through rt (no retries): it reports whether the
// transport refused it before sending.
func syncSend(t *testing.T, rt http.RoundTripper, url string) (refused bool) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	var lerr *throttle.LimitError
	if errors.As(err, &lerr) {
		return true
	}
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return false
}

// TestE2ESharedAccountOneThrottlePerWindow: another client spends 30% of
// the vendor's 100 per minute (one request every 2 s); the fleet tries a
// request every 500 ms for five minutes. The fleet draws at most one 429
// per vendor window: its store follows the vendor's count, and the
// response that says the window is spent (a success, or the one 429 when
// the other client took the last request) holds the scope until the
// window ends. Without the counters, every 429 paused the scope for the
// second it asked, and the fleet drew one per retry until the window
// ended.
func TestE2ESharedAccountOneThrottlePerWindow(t *testing.T) {
	t.Parallel()
	clock := quotatest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	v := sharedVendor(t, clock)
	tr, _ := e2eTransport(t, sharedYAML, v.Host(), throttle.WithClock(clock))
	other := v.Client()
	const ticks = 5 * 120 // 500 ms each
	for i := 0; i < ticks; i++ {
		if i%4 == 0 {
			resp, err := other.Get(v.URL + "/other")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		syncSend(t, tr, v.URL+"/fleet")
		clock.Advance(500 * time.Millisecond)
	}
	perWindow := map[time.Time]int{}
	served := 0
	for _, a := range v.Arrivals() {
		if a.Path != "/fleet" {
			continue
		}
		if a.Throttled {
			perWindow[a.At.Truncate(time.Minute)]++
		} else {
			served++
		}
	}
	for w, n := range perWindow {
		if n > 1 {
			t.Errorf("window %s: the fleet drew %d 429s, want at most 1", w.Format("15:04"), n)
		}
	}
	// The fleet still uses the account: the vendor's 100 a minute minus
	// the other client's 30, less the 5% headroom and a window's end.
	if served < 5*60 {
		t.Errorf("the fleet was served %d requests in 5 windows, want at least 300 of the 350 the other client left", served)
	}
}

// TestE2ERedisRestartResyncs: the fleet spent 60 of the vendor's window
// when Redis lost everything (FLUSHALL, as an empty restart). The first
// response after it re-syncs the store, so the fleet is held to the 35 the
// vendor has left within its headroom instead of a fresh quota of 95: the
// vendor throttles nothing.
func TestE2ERedisRestartResyncs(t *testing.T) {
	t.Parallel()
	clock := quotatest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	v := sharedVendor(t, clock)
	srv := redistest.Start(t)
	rc := srv.Client(t)
	store, err := redisstore.New(rc, redisstore.Options{Clock: clock, Timeout: fleetStoreTimeout})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := e2eTransport(t, sharedYAML, v.Host(), throttle.WithClock(clock), throttle.WithStore(store))
	url := v.URL + "/fleet"
	for i := 0; i < 60; i++ {
		if syncSend(t, tr, url) {
			t.Fatalf("request %d refused before the restart", i)
		}
		clock.Advance(100 * time.Millisecond)
	}
	if err := rc.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	sent := 0
	for i := 0; i < 100; i++ {
		if !syncSend(t, tr, url) {
			sent++
		}
	}
	if _, throttled := v.Counts(); throttled != 0 {
		t.Errorf("the vendor throttled %d requests after the restart, want 0: the store re-synced", throttled)
	}
	if sent != 35 {
		t.Errorf("after the restart the fleet sent %d more, want 35 (95 less the vendor's 60 used)", sent)
	}
}

// windowYAML models a vendor's window of 100 per minute as GitHub's entry
// in the catalog models its 5,000 per hour: a GCRA whose rate plus burst
// is the window's quota (80/min burst 20), so that no window of the
// vendor's sees more than 100 from the fleet alone, with the counters the
// vendor publishes mapped onto it and GitHub's throttled signals.
const windowYAML = `
providers:
  vendor:
    hosts: ["HOST"]
    on_limit: fail
    signals:
      throttled:
        - {status: 429}
        - {status: 403, header: X-RateLimit-Remaining, header_value: "0"}
      max_delay: 5m
    limits:
      - {name: core, limit: 80/min burst 20}
    sync: {format: x-ratelimit, counters: {core: core}}
`

// TestE2EWindowVendorKeepsBurst: a GitHub-style vendor (a fixed window of
// 100 per minute, X-RateLimit-* with -Resource on every response, 403 with
// remaining 0 when it throttles) whose account another client spends 30%
// of, one request every 2 s; the fleet sends a burst of 20 every 10 s. The
// vendor's window is not the limit's bucket (100 against a burst of 20),
// so its counters drain the burst only once the vendor has less than the
// burst left: 10, 20 and 30 s into every window, with the vendor well
// short of its 100, the fleet sends what its GCRA refilled in 10 s (13 or
// 14), where mapping the vendor's used count onto the burst drained it to
// nothing as soon as the vendor had counted 20 in the window, and the
// fleet sent one request per burst. The window's end still holds: the
// fleet draws at most one throttled response per window.
func TestE2EWindowVendorKeepsBurst(t *testing.T) {
	t.Parallel()
	clock := quotatest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	v := e2eVendor(t, throttletest.Options{
		Enforcer: throttletest.Window(100, time.Minute),
		Signal:   throttletest.GitHub403,
		Clock:    clock.Now,
	})
	tr, _ := e2eTransport(t, windowYAML, v.Host(), throttle.WithClock(clock))
	other := v.Client()
	const (
		seconds = 5 * 60
		burst   = 20
	)
	sentAt := map[int]int{} // second -> requests of the burst the fleet sent
	for s := 0; s < seconds; s++ {
		if s%2 == 0 {
			resp, err := other.Get(v.URL + "/other")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if s%10 == 0 {
			for i := 0; i < burst; i++ {
				if !syncSend(t, tr, v.URL+"/fleet") {
					sentAt[s]++
				}
			}
		}
		clock.Advance(time.Second)
	}
	for s := 0; s < seconds; s += 60 {
		for _, into := range []int{10, 20, 30} {
			if n := sentAt[s+into]; n < 13 {
				t.Errorf("%ds into the window at %ds: the fleet sent %d of its burst, want at least the 13 its limit refilled in 10 s", into, s, n)
			}
		}
	}
	perWindow := map[time.Time]int{}
	for _, a := range v.Arrivals() {
		if a.Path == "/fleet" && a.Throttled {
			perWindow[a.At.Truncate(time.Minute)]++
		}
	}
	for w, n := range perWindow {
		if n > 1 {
			t.Errorf("window %s: the fleet drew %d throttled responses, want at most 1", w.Format("15:04"), n)
		}
	}
}
