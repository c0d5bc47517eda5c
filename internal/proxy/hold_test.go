package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// throttled answers every request with a 429 and the header.
func throttled(name, value string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(name, value)
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, "slow down")
	})
}

// A retry is made only when it starts within the request's hold (its max
// wait from when the proxy has it): a vendor's delay past it sends the
// vendor's 429 back at once, however many retries are allowed. The
// attempts are counted; nothing here depends on how fast the machine is.
func TestRetriesStayWithinTheHold(t *testing.T) {
	t.Parallel()
	retries := Options{Retries: 3, retryWaitMin: time.Millisecond, retryWaitMax: time.Millisecond}
	for _, tc := range []struct {
		name     string
		provider string
		vendor   http.Handler
		header   []string
		want     int // vendor attempts
	}{
		{"a delay past max_wait", "    max_wait: 1s\n" + wide, throttled("Retry-After", "4"), nil, 1},
		{"a delay past Throttle-Max-Wait 0", "    max_wait: 1m\n" + wide, throttled("Retry-After-Ms", "1"), []string{headerMaxWait, "0"}, 1},
		{"a delay past on_limit: fail", "    on_limit: fail\n" + wide, throttled("Retry-After-Ms", "1"), nil, 1},
		{"delays within max_wait", "    max_wait: 1m\n" + wide, throttled("Retry-After-Ms", "1"), nil, 4},
	} {
		s := start(t, tc.provider, tc.vendor, retries)
		resp, body := s.do("GET", s.url("/x"), nil, tc.header...)
		if resp.StatusCode != 429 || string(body) != "slow down" || resp.Header.Get(HeaderError) != "" {
			t.Errorf("%s: got %d %q (%s %q), want the vendor's 429", tc.name, resp.StatusCode, body,
				HeaderError, resp.Header.Get(HeaderError))
		}
		if n := len(s.vendorSaw()); n != tc.want {
			t.Errorf("%s: vendor saw %d attempts, want %d", tc.name, n, tc.want)
		}
	}
}

// The bodies held in memory while their requests wait are bounded: past
// the bound a request gets a 503 with Retry-After, and the bytes come back
// when a held request is done.
func TestHeldBodiesAreBounded(t *testing.T) {
	t.Parallel()
	clock := quotatest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	store := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
	s := start(t, "    limits: [{name: peak, limit: 1/s}]\n", nil, Options{MaxRetryBody: 80, MaxHeldBodies: 100,
		Throttle: []throttle.Option{throttle.WithStore(store), throttle.WithClock(clock)}})
	if resp, body := s.do("GET", s.url("/first"), nil); resp.StatusCode != 200 {
		t.Fatalf("first: %d %s", resp.StatusCode, body)
	}
	body := strings.Repeat("b", 80)
	// waiting posts body (chunked: no length) and waits for its slot.
	waiting := func(chunked bool) <-chan int {
		status := make(chan int, 1)
		var r io.Reader = strings.NewReader(body)
		if chunked {
			r = io.MultiReader(r)
		}
		go func() {
			resp, err := s.srv.Client().Post(s.url("/upload"), "text/plain", r)
			if err != nil {
				t.Error(err)
				status <- 0
				return
			}
			resp.Body.Close()
			status <- resp.StatusCode
		}()
		for clock.Timers() == 0 {
			time.Sleep(time.Millisecond)
		}
		return status
	}
	for _, chunked := range []bool{false, true} {
		status := waiting(chunked)
		// Max wait 0: without the bound it would be refused, not wait.
		resp, got := s.do("POST", s.url("/upload"), strings.NewReader(body), headerMaxWait, "0")
		clock.Advance(time.Second)
		if got := <-status; got != 200 {
			t.Errorf("the waiting request got %d, want 200", got)
		}
		own(t, resp, got, 503, codeOverloaded)
		if resp.Header.Get("Retry-After") == "" {
			t.Error("503 overloaded without Retry-After")
		}
	}
	if n := len(s.vendor.Arrivals()); n != 3 {
		t.Errorf("vendor saw %d requests, want 3 (the refused ones are not sent)", n)
	}
}
