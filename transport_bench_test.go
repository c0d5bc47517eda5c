package throttle_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// nopTransport answers every request with one shared response, so that
// the benchmarks measure the throttle, not a network.
type nopTransport struct{ resp *http.Response }

func (n nopTransport) RoundTrip(*http.Request) (*http.Response, error) { return n.resp, nil }

const benchYAML = `
providers:
  vendor:
    hosts: [api.vendor.test]
    limits:
      - {name: peak, limit: 1000000/s, burst: 1000000000000}
      - {name: per-business, limit: 1000000/s, burst: 1000000000000, scope: business, missing: shared}
      - {name: daily, limit: "1000000000000/day resets 00:00 America/Los_Angeles"}
`

func benchTransport(b *testing.B, url string) {
	benchTransportWith(b, url, benchYAML, http.Header{})
}

func benchTransportWith(b *testing.B, url, yaml string, h http.Header) {
	cfg, err := providers.Load("bench.yaml", []byte(yaml))
	if err != nil {
		b.Fatal(err)
	}
	base := nopTransport{&http.Response{StatusCode: 200, Body: http.NoBody, Header: h}}
	rt, err := throttle.New(throttle.WithRegistry(providers.NewRegistry(cfg)), throttle.WithBase(base))
	if err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequest("GET", url, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := rt.RoundTrip(req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTransportUnmatchedHost is the cost a request to a host no
// provider claims pays: one registry lookup.
func BenchmarkTransportUnmatchedHost(b *testing.B) {
	benchTransport(b, "https://elsewhere.test/v1/items")
}

// BenchmarkTransportMemoryStore is a throttled request with a 3-limit
// stack decided by the in-process store (Redis figures: bench/README.md).
func BenchmarkTransportMemoryStore(b *testing.B) {
	benchTransport(b, "https://api.vendor.test/v1/items")
}

// BenchmarkTransportVendorCounters is BenchmarkTransportMemoryStore with
// the vendor's counters read on every response (sync:), in the steady
// state: the vendor reports more than the store believes, so reading them
// costs one backoff.ReadCounters and no store call.
func BenchmarkTransportVendorCounters(b *testing.B) {
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "1000000000000")
	h.Set("X-RateLimit-Remaining", "999999999999")
	h.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
	benchTransportWith(b, "https://api.vendor.test/v1/items",
		benchYAML+"    sync: {format: x-ratelimit, counters: {core: daily}}\n", h)
}

// BenchmarkTransportAhead is a throttled request of a one-limit stack
// that takes quota ahead, on a shared store (a MemoryStore given with
// WithStore, standing for Redis): nearly every request is served from
// the process's pool of slots, without a store call.
func BenchmarkTransportAhead(b *testing.B) {
	const yaml = `
providers:
  vendor:
    hosts: [api.vendor.test]
    ahead: {period: 100ms}
    limits: [{name: peak, limit: 1000000/s, burst: 1000000000000}]
`
	cfg, err := providers.Load("bench.yaml", []byte(yaml))
	if err != nil {
		b.Fatal(err)
	}
	base := nopTransport{&http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}}
	rt, err := throttle.New(throttle.WithRegistry(providers.NewRegistry(cfg)), throttle.WithBase(base),
		throttle.WithStore(quota.NewMemoryStore(quota.MemoryOptions{})))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	req, _ := http.NewRequest("GET", "https://api.vendor.test/v1/items", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := rt.RoundTrip(req); err != nil {
			b.Fatal(err)
		}
	}
}
