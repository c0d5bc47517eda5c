package hotpath

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/backoff"
)

// BenchmarkClassify times backoff.Classify, which the transport runs on
// every response of a throttled provider: the common case (a 200 with
// X-RateLimit-* headers), a 429 with Retry-After in seconds, a 429 with an
// HTTP-date, and a 429 whose delay is in the IETF RateLimit fields.
func BenchmarkClassify(b *testing.B) {
	now := time.Date(2026, 11, 21, 6, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		status int
		header map[string]string
	}{
		{"ok-with-x-ratelimit", 200, map[string]string{
			"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "4999", "X-RateLimit-Reset": "1795000000"}},
		{"429-retry-after-seconds", 429, map[string]string{"Retry-After": "2"}},
		{"429-retry-after-date", 429, map[string]string{"Retry-After": now.Add(3 * time.Second).Format(http.TimeFormat)}},
		{"429-ratelimit-fields", 429, map[string]string{
			"RateLimit-Policy": `"default";q=100;w=60`, "RateLimit": `"default";r=0;t=7`}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			h := http.Header{}
			for k, v := range c.header {
				h.Set(k, v)
			}
			resp := &http.Response{StatusCode: c.status, Header: h, Body: io.NopCloser(strings.NewReader(""))}
			var s backoff.Signals
			b.ReportAllocs()
			for b.Loop() {
				v := backoff.Classify(resp, &s, now)
				if (c.status == 429) != v.Throttled {
					b.Fatalf("Classify = %+v", v)
				}
			}
		})
	}
}
