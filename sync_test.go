package throttle_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/quota"
)

// syncCounting is a store that counts the Syncs of its reservations: the
// round trips the vendor's counters cost.
type syncCounting struct {
	quota.Store
	syncs atomic.Int64
}

func (s *syncCounting) Reserve(ctx context.Context, req *quota.Request) (*quota.Reservation, error) {
	r, err := s.Store.Reserve(ctx, req)
	if err != nil {
		return nil, err
	}
	return quota.NewReservation(r.Result, quota.ReservationOps{
		Cancel: r.Cancel,
		Sync: func(ctx context.Context, obs []quota.Observed) error {
			s.syncs.Add(1)
			return r.Sync(ctx, obs)
		},
	}), nil
}

// countingVendor answers like GitHub: X-RateLimit-* on every response
// for one window of limit, counting every request it serves, and a 429
// once none remain.
type countingVendor struct {
	mu     sync.Mutex
	limit  int
	used   int
	reset  time.Time
	thrott int
}

func (v *countingVendor) respond(*http.Request) (*http.Response, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	status := 200
	if v.used >= v.limit {
		status = 429
		v.thrott++
	} else {
		v.used++
	}
	resp := httpmock.NewStringResponse(status, "{}")
	resp.Header.Set("X-RateLimit-Limit", strconv.Itoa(v.limit))
	resp.Header.Set("X-RateLimit-Remaining", strconv.Itoa(v.limit-v.used))
	resp.Header.Set("X-RateLimit-Reset", strconv.FormatInt(v.reset.Unix(), 10))
	return resp, nil
}

// spend is the traffic of another client of the same account.
func (v *countingVendor) spend(n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.used += n
}

const syncYAML = `
providers:
  vendor:
    hosts: [api.vendor.test]
    on_limit: fail
    signals:
      max_delay: 1h
    limits:
      - {name: core, limit: 100/h burst 100}
    sync: {format: x-ratelimit, counters: {default: core}}
`

func newSyncFixture(t *testing.T) (*fixture, *syncCounting, *countingVendor) {
	t.Helper()
	store := &syncCounting{}
	f := newFixture(t, syncYAML, throttle.WithStore(store))
	store.Store = quota.NewMemoryStore(quota.MemoryOptions{Clock: f.clock})
	v := &countingVendor{limit: 100, reset: f.clock.Now().Add(30 * time.Minute)}
	f.mock.RegisterResponder("GET", "https://api.vendor.test/x", v.respond)
	return f, store, v
}

// TestSyncSteadyStateCostsNoRoundTrip: while the vendor counts what the
// store counts, reading its counters costs no store call; when another
// client of the account spends 30, the next response drains the store
// with one call, and the fleet then sends exactly what the vendor has
// left: no 429, and the response that spends the last one holds the
// scope until the vendor's reset.
func TestSyncSteadyStateCostsNoRoundTrip(t *testing.T) {
	t.Parallel()
	f, store, v := newSyncFixture(t)
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		if _, err := f.do(ctx, "GET", "https://api.vendor.test/x"); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if n := store.syncs.Load(); n != 0 {
		t.Fatalf("%d store syncs while the vendor agreed with the store, want 0", n)
	}
	v.spend(30)
	sent := 0
	var lerr *throttle.LimitError
	for i := 0; i < 100; i++ {
		_, err := f.do(ctx, "GET", "https://api.vendor.test/x")
		if errors.As(err, &lerr) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sent++
	}
	if n := store.syncs.Load(); n != 1 {
		t.Errorf("%d store syncs after another client spent 30, want 1", n)
	}
	if sent != 50 || v.thrott != 0 {
		t.Errorf("after the other client spent 30 of 100 and the fleet 20: sent %d more, %d throttled; want the 50 left, none throttled", sent, v.thrott)
	}
	if lerr == nil || lerr.Limit != "pause" || lerr.RetryAfter != 30*time.Minute {
		t.Errorf("the request after the vendor's last: %v, want refused by the pause until the vendor's reset in 30m", lerr)
	}
}

// TestSyncPauseIsCappedAndMalformedIgnored: a counter spent until a
// reset beyond max_delay holds the scope for max_delay only; malformed
// counters change nothing and never panic.
func TestSyncPauseIsCappedAndMalformedIgnored(t *testing.T) {
	t.Parallel()
	f, store, _ := newSyncFixture(t)
	ctx := context.Background()
	headers := []map[string]string{
		{"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "-1"},
		{"X-RateLimit-Limit": "0", "X-RateLimit-Remaining": "x"},
		{"X-RateLimit-Remaining": "99999999999999999999"},
		// A reset in the past: the counter is full again, whatever it says.
		{"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "5", "X-RateLimit-Reset": strconv.FormatInt(f.clock.Now().Add(-time.Hour).Unix(), 10)},
		{"X-RateLimit-Reset": "not a time", "X-RateLimit-Remaining": "0"},
	}
	for i, h := range headers {
		f.mock.RegisterResponder("GET", "https://api.vendor.test/odd"+strconv.Itoa(i), func(*http.Request) (*http.Response, error) {
			resp := httpmock.NewStringResponse(200, "{}")
			for k, v := range h {
				resp.Header.Set(k, v)
			}
			return resp, nil
		})
		if _, err := f.do(ctx, "GET", "https://api.vendor.test/odd"+strconv.Itoa(i)); err != nil {
			t.Fatalf("headers %v: %v", h, err)
		}
	}
	// The last one says 0 remain with no reset: drained, not paused.
	if n := store.syncs.Load(); n != 1 {
		t.Errorf("%d syncs for the malformed and past counters, want 1 (remaining 0, no reset)", n)
	}
	reset := f.clock.Now().Add(3 * time.Hour).Unix()
	f.mock.RegisterResponder("GET", "https://api.vendor.test/spent", func(*http.Request) (*http.Response, error) {
		resp := httpmock.NewStringResponse(200, "{}")
		resp.Header.Set("X-RateLimit-Remaining", "0")
		resp.Header.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
		return resp, nil
	})
	f.clock.Advance(time.Minute) // an event of 100/h is back after 36s
	if _, err := f.do(ctx, "GET", "https://api.vendor.test/spent"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Minute)
	_, err := f.do(ctx, "GET", "https://api.vendor.test/x")
	var lerr *throttle.LimitError
	if !errors.As(err, &lerr) || lerr.Limit != "pause" || lerr.RetryAfter != 59*time.Minute {
		t.Fatalf("a minute after a response spent until 3h later: %v, want held by the pause for the 59m left of max_delay 1h", err)
	}
}
