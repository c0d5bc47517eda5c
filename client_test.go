package throttle_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
)

// bodyVendor is a vendor at an httptest server that hands each request to
// handle; it returns the server's URL and the registry that throttles it.
func bodyVendor(t *testing.T, handle http.HandlerFunc) (string, throttle.Option) {
	t.Helper()
	srv := httptest.NewServer(handle)
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	cfg, err := providers.Load("t.yaml", []byte("providers:\n  v:\n    hosts: [\""+host+"\"]\n    limits: [{name: peak, limit: 100/s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL, throttle.WithRegistry(providers.NewRegistry(cfg))
}

// stream is a request body of n bytes that exists nowhere at once: each
// Read says it filled p and leaves p's bytes as they were. It cannot be
// rewound.
type stream struct{ left int64 }

func (s *stream) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), s.left)
	s.left -= n
	return int(n), nil
}

// tracked is a request body that tells when it is closed.
type tracked struct {
	io.Reader
	once   sync.Once
	closed chan struct{}
}

func track(r io.Reader) *tracked { return &tracked{Reader: r, closed: make(chan struct{})} }

func (b *tracked) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// waitClosed fails t unless body is closed within a time no scheduling
// delay reaches: net/http may close a sent body in its write loop, after
// RoundTrip returned.
func waitClosed(t *testing.T, closed <-chan struct{}) {
	t.Helper()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Error("the request's body was never closed")
	}
}

// TestNewClientStreamsALargeBodyUnbuffered: a 1 GiB body of unknown
// length without GetBody goes to the vendor whole and once, through the
// throttle, without the client ever holding it: go-retryablehttp used to
// read every body into memory to replay it. Not parallel, so that the
// process's allocations are this test's.
func TestNewClientStreamsALargeBodyUnbuffered(t *testing.T) {
	const size = 1 << 30
	var mu sync.Mutex
	var calls int
	var got int64
	url, registry := bodyVendor(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		mu.Lock()
		defer mu.Unlock()
		calls++
		got += n
	})
	obs := &recorder{}
	client, err := throttle.NewClient(registry, throttle.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	body := track(&stream{size})
	req, err := http.NewRequest("POST", url+"/upload", body)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	runtime.ReadMemStats(&after)

	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != 200 || calls != 1 || got != size {
		t.Errorf("got %d; the vendor saw %d calls, %d bytes; want 200, 1 call, %d bytes", resp.StatusCode, calls, got, size)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("sending a %d MiB body allocated %d MiB, want under 64 MiB: the body was buffered", size>>20, alloc>>20)
	}
	assertHas(t, obs.kinds(), throttle.Decided)
	waitClosed(t, body.closed)
}

// TestNewClientRetriesASmallRewindableBody: a body the request can copy
// (GetBody) is retried after a 429, each attempt with the whole body and
// its length, and the caller's body is closed. stripe-go sets Body and
// GetBody on a request made with a nil body, so its ContentLength is 0:
// the client measures a copy and retries it all the same.
func TestNewClientRetriesASmallRewindableBody(t *testing.T) {
	t.Parallel()
	const body = "amount=1"
	for name, build := range map[string]func(url string) *http.Request{
		"http.NewRequest": func(url string) *http.Request {
			req, err := http.NewRequest("POST", url, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			return req
		},
		"length unsaid": func(url string) *http.Request {
			req, err := http.NewRequest("POST", url, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Body = io.NopCloser(strings.NewReader(body))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
			return req
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var bodies []string
			var lengths []int64
			url, registry := bodyVendor(t, func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				defer mu.Unlock()
				bodies = append(bodies, string(b))
				lengths = append(lengths, r.ContentLength)
				if len(bodies) == 1 {
					w.Header().Set("Retry-After", "0")
					w.WriteHeader(http.StatusTooManyRequests)
				}
			})
			client, err := throttle.NewClient(registry, throttle.WithRetries(2, time.Millisecond, 10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer client.CloseIdleConnections()
			req := build(url + "/charge")
			given := track(req.Body) // the caller's body; GetBody makes the copies
			req.Body = given
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode != 200 || len(bodies) != 2 || bodies[0] != body || bodies[1] != body || lengths[0] != 8 || lengths[1] != 8 {
				t.Errorf("got %d; the vendor saw bodies %q with lengths %v; want 200 after 2 calls of %s, length 8", resp.StatusCode, bodies, lengths, body)
			}
			waitClosed(t, given.closed)
		})
	}
}

// TestNewClientSendsABodyOverTheLimitOnce: a rewindable body over
// WithRetryBodyLimit is sent once and its 429 is the caller's response;
// one at the limit is retried.
func TestNewClientSendsABodyOverTheLimitOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body  string
		calls int
		code  int
	}{{"12345678", 2, 200}, {"123456789", 1, 429}} {
		var mu sync.Mutex
		calls := 0
		url, registry := bodyVendor(t, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls == 1 {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		})
		client, err := throttle.NewClient(registry, throttle.WithRetryBodyLimit(8),
			throttle.WithRetries(2, time.Millisecond, 10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Post(url+"/upload", "text/plain", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		client.CloseIdleConnections()
		mu.Lock()
		if resp.StatusCode != tc.code || calls != tc.calls {
			t.Errorf("%d-byte body, limit 8: got %d after %d calls, want %d after %d", len(tc.body), resp.StatusCode, calls, tc.code, tc.calls)
		}
		mu.Unlock()
	}
}

// TestNewClientReturnsTheThrottleOfAStream: a body without GetBody that the
// vendor throttles is not retried: the caller gets the 429 with its body,
// the scope is paused as for any throttle, the request's body is closed,
// and nothing is left running. Not parallel, so that the goroutines
// counted are this test's.
func TestNewClientReturnsTheThrottleOfAStream(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	url, registry := bodyVendor(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		defer mu.Unlock()
		calls++
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, "slow down")
	})
	before := e2eGoroutines("github.com/fleetquota/throttle")
	obs := &recorder{}
	client, err := throttle.NewClient(registry, throttle.WithObserver(obs),
		throttle.WithRetries(2, time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	body := track(&stream{1 << 10})
	resp, err := client.Post(url+"/upload", "application/octet-stream", body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 429 || string(got) != "slow down" {
		t.Errorf("got %d %q (%v), want the vendor's 429 and its body", resp.StatusCode, got, err)
	}
	mu.Lock()
	if calls != 1 {
		t.Errorf("the vendor saw %d calls, want 1: a stream cannot be sent again", calls)
	}
	mu.Unlock()
	assertHas(t, obs.kinds(), throttle.UpstreamThrottled)
	assertHas(t, obs.kinds(), throttle.Paused)
	waitClosed(t, body.closed)
	client.CloseIdleConnections()
	if after := e2eGoroutines("github.com/fleetquota/throttle"); after != before {
		t.Errorf("goroutines in throttle's code: %d before the request, %d after", before, after)
	}
}

// TestWithRetryBodyLimitRefusesANegativeLimit: a negative limit is a
// configuration error, not a silent default.
func TestWithRetryBodyLimitRefusesANegativeLimit(t *testing.T) {
	t.Parallel()
	if _, err := throttle.NewClient(throttle.WithRetryBodyLimit(-1)); err == nil {
		t.Error("WithRetryBodyLimit(-1): no error")
	}
}
