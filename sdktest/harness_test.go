package sdktest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
)

// A reply answers one request to a fake vendor.
type reply func(w http.ResponseWriter, r *http.Request)

// vendor is a fake vendor API on loopback. It answers its n-th request
// (from 1) with the n-th reply, and every later one with the last.
type vendor struct {
	srv  *httptest.Server
	seen atomic.Int64
}

// startVendor starts a vendor that answers with replies; it is closed when
// the test ends.
func startVendor(t *testing.T, replies ...reply) *vendor {
	t.Helper()
	v := &vendor{}
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(v.seen.Add(1))
		_, _ = io.Copy(io.Discard, r.Body)
		replies[min(n, len(replies))-1](w, r)
	}))
	t.Cleanup(v.srv.Close)
	return v
}

// events counts what the throttle did.
type events struct{ admitted, refused, throttled atomic.Int64 }

func (e *events) Observe(_ context.Context, ev throttle.Event) {
	switch ev.Kind {
	case throttle.Decided:
		e.admitted.Add(1)
	case throttle.Refused:
		e.refused.Add(1)
	case throttle.UpstreamThrottled:
		e.throttled.Add(1)
	}
}

// toVendor is the transport under the throttle: it sends every request
// to the fake vendor, whatever host the SDK named, and counts them.
type toVendor struct {
	addr string
	base *http.Transport
	sent atomic.Int64
}

func (tv *toVendor) RoundTrip(req *http.Request) (*http.Response, error) {
	tv.sent.Add(1)
	out := req.Clone(req.Context())
	out.URL.Scheme, out.URL.Host = "http", tv.addr
	resp, err := tv.base.RoundTrip(out)
	if resp != nil {
		// The retry policy finds the provider, and its signals, by the
		// host of the response's request: keep the vendor's.
		resp.Request = req
	}
	return resp, err
}

// rig is one test's throttle: the shipped catalog, the in-process store,
// and counters on both sides of the transport.
type rig struct {
	client *http.Client
	events events
	wire   *toVendor
	vendor *vendor
}

// tinyLimits sets every SDK vendor's main limit of the catalog to one
// request an hour, so that the second request is refused.
var tinyLimits = map[string]string{
	"STRIPE_GLOBAL": "1/h burst 1",
	"GITHUB_CORE":   "1/h burst 1",
	"OPENAI_RPM":    "1/h burst 1",
	"ANTHROPIC_RPM": "1/h burst 1",
}

// fastRetries is the throttle's retry setting in these tests: one retry,
// soon, where the vendor names no delay.
var fastRetries = throttle.WithRetries(1, 10*time.Millisecond, 50*time.Millisecond)

// newRig returns a throttled client for the shipped catalog, whose
// ${VAR} values are read from env (the catalog's defaults for the rest),
// sending to v.
func newRig(t *testing.T, v *vendor, env map[string]string, opts ...throttle.Option) *rig {
	t.Helper()
	cfg, err := providers.LoadCatalog(providers.WithLookupEnv(func(name string) (string, bool) {
		s, ok := env[name]
		return s, ok
	}))
	if err != nil {
		t.Fatalf("LoadCatalog: %v", err)
	}
	r := &rig{vendor: v, wire: &toVendor{addr: v.srv.Listener.Addr().String(), base: &http.Transport{}}}
	t.Cleanup(r.wire.base.CloseIdleConnections)
	opts = append([]throttle.Option{
		throttle.WithRegistry(providers.NewRegistry(cfg)),
		throttle.WithBase(r.wire),
		throttle.WithObserver(&r.events),
	}, opts...)
	if r.client, err = throttle.NewClient(opts...); err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return r
}

// counts is what a test saw: requests the throttle admitted and refused,
// responses it found throttled, requests it sent, and requests the vendor
// received.
type counts struct{ Admitted, Refused, Throttled, Sent, Seen int64 }

func (r *rig) counts() counts {
	return counts{
		Admitted:  r.events.admitted.Load(),
		Refused:   r.events.refused.Load(),
		Throttled: r.events.throttled.Load(),
		Sent:      r.wire.sent.Load(),
		Seen:      r.vendor.seen.Load(),
	}
}

// want fails the test unless the counts are w.
func (r *rig) want(t *testing.T, w counts) {
	t.Helper()
	if got := r.counts(); got != w {
		t.Errorf("counts: got %+v, want %+v", got, w)
	}
}

// refusal fails the test unless err is the throttle's refusal, reachable
// with errors.As and errors.Is through whatever the SDK wrapped it in.
func refusal(t *testing.T, err error) *throttle.LimitError {
	t.Helper()
	var le *throttle.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("got %v (%T), want a *throttle.LimitError under it", err, err)
	}
	if !errors.Is(err, throttle.ErrLimited) {
		t.Errorf("errors.Is(%v, ErrLimited) = false", err)
	}
	if le.RetryAfter <= 0 {
		t.Errorf("LimitError.RetryAfter = %v, want > 0", le.RetryAfter)
	}
	return le
}

// failFast is the context of a request that must not wait for its slot:
// the throttle refuses it at once when the limit is spent.
func failFast() context.Context { return throttle.WithMaxWait(context.Background(), 0) }
