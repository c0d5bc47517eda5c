package throttle_test

import (
	"net/http"
	"testing"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
)

// nopTransport answers every request with one shared response, so that
// the benchmarks measure the throttle, not a network.
type nopTransport struct{ resp *http.Response }

func (n nopTransport) RoundTrip(*http.Request) (*http.Response, error) { return n.resp, nil }

func benchTransport(b *testing.B, url string) {
	cfg, err := providers.Load("bench.yaml", []byte(`
providers:
  vendor:
    hosts: [api.vendor.test]
    limits:
      - {name: peak, limit: 1000000/s, burst: 1000000000000}
      - {name: per-business, limit: 1000000/s, burst: 1000000000000, scope: business, missing: shared}
      - {name: daily, limit: "1000000000000/day resets 00:00 America/Los_Angeles"}
`))
	if err != nil {
		b.Fatal(err)
	}
	base := nopTransport{&http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}}
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
