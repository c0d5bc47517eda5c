package providers

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/quota"
)

// TestCatalogSyncExamples reads each vendor's documented header example
// (config/yaml cites where each is documented) through the
// catalog's sync mapping, as the transport does on a response, and checks
// which limit each counter drains and to what. A window vendor modelled
// as a GCRA with a burst below its limit (GitHub, Zendesk, HubSpot,
// Intercom, OpenAI) keeps its burst while the vendor has more left
// (min(remaining, capacity)); a limit that is the vendor's bucket
// (Shopify REST, Anthropic at the configured tier, Zendesk configured at
// its plan's figure) maps on the vendor's used count. Every limit a
// catalog sync maps is covered.
func TestCatalogSyncExamples(t *testing.T) {
	t.Parallel()
	biz := Input{Business: "acme", Labels: map[string]string{"model": "m"}}
	anthropicTier2 := map[string]string{
		"ANTHROPIC_RPM": "1000/min", "ANTHROPIC_ITPM": "80000/min", "ANTHROPIC_OTPM": "16000/min",
	}
	anthropicHeaders := []string{
		"anthropic-ratelimit-input-tokens-limit", "80000",
		"anthropic-ratelimit-input-tokens-remaining", "80000",
		"anthropic-ratelimit-input-tokens-reset", "2025-08-21T12:40:59Z",
		"anthropic-ratelimit-output-tokens-limit", "16000",
		"anthropic-ratelimit-output-tokens-remaining", "16000",
		"anthropic-ratelimit-output-tokens-reset", "2025-08-21T12:41:00Z",
		"anthropic-ratelimit-requests-limit", "1000",
		"anthropic-ratelimit-requests-remaining", "999",
		"anthropic-ratelimit-requests-reset", "2025-08-21T12:40:59Z",
		"anthropic-ratelimit-tokens-limit", "96000",
		"anthropic-ratelimit-tokens-remaining", "96000",
		"anthropic-ratelimit-tokens-reset", "2025-08-21T12:40:59Z",
	}
	zendeskHeaders := []string{
		"x-rate-limit", "700", "ratelimit-limit", "700",
		"x-rate-limit-remaining", "699", "ratelimit-remaining", "699",
		"ratelimit-reset", "41",
		"zendesk-ratelimit-tickets-index", "total=100; remaining=99; resets=41",
	}
	for _, tc := range []struct {
		name, method, url string
		in                Input
		env               map[string]string
		now               time.Time
		headers           []string
		want              map[string]int64 // limit -> what it may still admit at once
	}{
		{
			// The REST API's example; GitHub's core counter is a window of
			// 5,000/h, the limit a burst of 500 (475 at 95%).
			name: "github core", method: "GET", url: "https://api.github.com/repos/o/r", in: biz,
			now: time.Unix(1372700873, 0).Add(-30 * time.Minute),
			headers: []string{
				"x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4966", "x-ratelimit-used", "34",
				"x-ratelimit-reset", "1372700873", "x-ratelimit-resource", "core",
			},
			want: map[string]int64{"core": 475},
		},
		{
			// Late in GitHub's hour: 300 left drains the burst to 300
			// (mapped on used, 475 - 4700, it was drained to nothing).
			name: "github core late", method: "GET", url: "https://api.github.com/repos/o/r", in: biz,
			now: time.Unix(1372700873, 0).Add(-5 * time.Minute),
			headers: []string{
				"x-ratelimit-limit", "5000", "x-ratelimit-remaining", "300", "x-ratelimit-used", "4700",
				"x-ratelimit-reset", "1372700873", "x-ratelimit-resource", "core",
			},
			want: map[string]int64{"core": 300},
		},
		{
			// GET /rate_limit's example of the search counter.
			name: "github search", method: "GET", url: "https://api.github.com/search/issues?q=x", in: biz,
			now: time.Unix(1691591091, 0).Add(-30 * time.Second),
			headers: []string{
				"x-ratelimit-limit", "30", "x-ratelimit-remaining", "18", "x-ratelimit-used", "12",
				"x-ratelimit-reset", "1691591091", "x-ratelimit-resource", "search",
			},
			want: map[string]int64{"search": 2}, // burst 3 at 95%
		},
		{
			// Code search's documented 10 per minute.
			name: "github code search", method: "GET", url: "https://api.github.com/search/code?q=x", in: biz,
			now: time.Unix(1691591091, 0).Add(-30 * time.Second),
			headers: []string{
				"x-ratelimit-limit", "10", "x-ratelimit-remaining", "0", "x-ratelimit-used", "10",
				"x-ratelimit-reset", "1691591091", "x-ratelimit-resource", "code_search",
			},
			want: map[string]int64{"code-search": 0},
		},
		{
			name: "zendesk", method: "GET", url: "https://acme.zendesk.com/api/v2/tickets.json",
			now: time.Unix(1700000000, 0), headers: zendeskHeaders,
			want: map[string]int64{"account": 19}, // burst 20 at 95%
		},
		{
			// Configured at the Enterprise plan's figure, the limit is
			// Zendesk's minute: 665 (700 at 95%) less the 1 used.
			name: "zendesk at its plan's figure", method: "GET", url: "https://acme.zendesk.com/api/v2/tickets.json",
			env: map[string]string{"ZENDESK_PER_MINUTE": "700/min"},
			now: time.Unix(1700000000, 0), headers: zendeskHeaders,
			want: map[string]int64{"account": 664},
		},
		{
			name: "hubspot", method: "GET", url: "https://api.hubapi.com/crm/v3/objects/contacts", in: biz,
			now: time.Unix(1700000000, 0),
			headers: []string{
				"X-HubSpot-RateLimit-Daily", "250000", "X-HubSpot-RateLimit-Daily-Remaining", "249999",
				"X-HubSpot-RateLimit-Interval-Milliseconds", "10000",
				"X-HubSpot-RateLimit-Max", "100", "X-HubSpot-RateLimit-Remaining", "99",
			},
			want: map[string]int64{"ten-secondly": 9, "daily": 23750}, // bursts 10 and 25,000 at 95%
		},
		{
			name: "intercom", method: "GET", url: "https://api.intercom.io/contacts", in: biz,
			now: time.Unix(1487332505, 0),
			headers: []string{
				"X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "99", "X-RateLimit-Reset", "1487332510",
			},
			want: map[string]int64{"app": 99},
		},
		{
			name: "openai", method: "POST", url: "https://api.openai.com/v1/chat/completions", in: biz,
			now: time.Unix(1700000000, 0),
			headers: []string{
				"x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
				"x-ratelimit-remaining-requests", "59", "x-ratelimit-remaining-tokens", "149984",
				"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s",
			},
			want: map[string]int64{"rpm": 45, "tpm": 9000}, // bursts 50 and 10,000 at 90%
		},
		{
			// A tier-2 account's response against the catalog's tier-1
			// defaults: not the limits' buckets.
			name: "anthropic", method: "POST", url: "https://api.anthropic.com/v1/messages", in: biz,
			now: time.Date(2025, 8, 21, 12, 40, 30, 0, time.UTC), headers: anthropicHeaders,
			want: map[string]int64{"rpm": 45, "itpm": 27000, "otpm": 7200},
		},
		{
			// The same configured at the account's tier: each limit is
			// Anthropic's bucket at 90%, less what Anthropic counts used.
			name: "anthropic at its tier", method: "POST", url: "https://api.anthropic.com/v1/messages", in: biz,
			env: anthropicTier2,
			now: time.Date(2025, 8, 21, 12, 40, 30, 0, time.UTC), headers: anthropicHeaders,
			want: map[string]int64{"rpm": 899, "itpm": 72000, "otpm": 14400},
		},
		{
			// A bucket of 40 (38 at 95%) with 32 used.
			name: "shopify rest", method: "GET", url: "https://shop.myshopify.com/admin/api/2025-01/products.json",
			now: time.Unix(1700000000, 0), headers: []string{"X-Shopify-Shop-Api-Call-Limit", "32/40"},
			want: map[string]int64{"rest": 6},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := LoadCatalog(WithLookupEnv(func(k string) (string, bool) {
				v, ok := tc.env[k]
				return v, ok
			}))
			if err != nil {
				t.Fatal(err)
			}
			req, err := http.NewRequest(tc.method, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, ok, err := cfg.Resolve(req, tc.in)
			if !ok || err != nil || res.Sync == nil {
				t.Fatalf("Resolve = %v, %v; sync %v: want a provider with sync", ok, err, res.Sync)
			}
			resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}"))}
			for i := 0; i+1 < len(tc.headers); i += 2 {
				resp.Header.Add(tc.headers[i], tc.headers[i+1])
			}
			got, errs := mapCountersByName(resp, &res, tc.now)
			if len(errs) > 0 {
				t.Errorf("the documented example reads with errors: %v", errs)
			}
			if len(got) != len(tc.want) {
				t.Errorf("mapped %v, want %v", got, tc.want)
			}
			for name, w := range tc.want {
				if g, ok := got[name]; !ok || g != w {
					t.Errorf("limit %s: drained to %d (mapped: %v), want %d", name, g, ok, w)
				}
			}
		})
	}

	// Every limit the catalog's sync maps is covered above.
	cfg, err := LoadCatalog(WithLookupEnv(func(string) (string, bool) { return "", false }))
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{
		"github/core": true, "github/search": true, "github/code-search": true,
		"zendesk/account": true, "hubspot/ten-secondly": true, "hubspot/daily": true,
		"intercom/app": true, "openai/rpm": true, "openai/tpm": true,
		"anthropic/rpm": true, "anthropic/itpm": true, "anthropic/otpm": true,
		"shopify/rest": true,
	}
	mapped := 0
	for _, p := range cfg.Providers() {
		syncs := []*Sync{p.Sync}
		for i := range p.Routes {
			syncs = append(syncs, p.Routes[i].Sync)
		}
		for _, sc := range syncs {
			if sc == nil {
				continue
			}
			for _, limit := range sc.Counters {
				mapped++
				if !covered[p.Name+"/"+limit] {
					t.Errorf("%s: the catalog maps a counter to %s, which no example covers", p.Name, limit)
				}
			}
		}
	}
	if mapped != len(covered) {
		t.Errorf("the catalog maps %d counters, the examples cover %d", mapped, len(covered))
	}
}

// TestSyncSameBucketNeedsSamePeriod: a counter is the limit's bucket only
// when the window it states is the limit's period. HubSpot's interval of
// 10 s, 100 a window, 40 used, against a limit of 100 per 10 s at 90% is
// the limit's bucket (90 - 40 = 50 left); against 100 per minute it is
// not, and the limit keeps the vendor's 60 left.
func TestSyncSameBucketNeedsSamePeriod(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit string
		want  int64
	}{
		{"100/10s", 50},
		{"100/min", 60},
	} {
		cfg, err := Load("hub.yaml", []byte(`
providers:
  hub:
    hosts: [api.hub.test]
    headroom: 90%
    limits: [{name: interval, limit: `+tc.limit+`}]
    sync: {format: hubspot, counters: {interval: interval}}
`))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("GET", "https://api.hub.test/x", nil)
		res, _, err := cfg.Resolve(req, Input{})
		if err != nil {
			t.Fatal(err)
		}
		resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}
		resp.Header.Set("X-HubSpot-RateLimit-Max", "100")
		resp.Header.Set("X-HubSpot-RateLimit-Remaining", "60")
		resp.Header.Set("X-HubSpot-RateLimit-Interval-Milliseconds", "10000")
		got, _ := mapCountersByName(resp, &res, time.Now())
		if got["interval"] != tc.want {
			t.Errorf("limit %s: drained to %v, want %d", tc.limit, got, tc.want)
		}
	}
}

// TestSyncNeverAboveVendorOrCapacity: whatever the vendor's limit and
// remaining, the configured limit and the headroom, a counter leaves the
// limit at most what the vendor has left and at most its capacity, never
// less than 0; on the same bucket at most what the other mapping leaves.
func TestSyncNeverAboveVendorOrCapacity(t *testing.T) {
	t.Parallel()
	for _, headroom := range []float64{1, 0.95, 0.9, 0.5} {
		p := &Provider{Headroom: headroom}
		for _, burst := range []int64{1, 19, 20, 45, 50, 95, 100} {
			lim := &quota.Limit{Name: "l", Kind: quota.GCRA, Rate: 50, Period: time.Minute, Burst: burst}
			for vl := int64(1); vl <= 120; vl++ {
				for _, vr := range []int64{0, 1, vl / 2, vl - 1, vl} {
					rd := backoff.Reading{Counter: "c", Limit: vl, HasLimit: true, Remaining: max(vr, 0), HasRemaining: true}
					r, ok := ourRemaining(rd, lim, p)
					if !ok || r < 0 || r > rd.Remaining || r > lim.Capacity() {
						t.Fatalf("headroom %v, burst %d, vendor %d/%d: drained to %d (%v), want 0 to min(remaining, capacity)",
							headroom, burst, rd.Remaining, vl, r, ok)
					}
				}
			}
		}
	}
}

// mapCountersByName reads resp's counters at now as the transport does
// for res, and returns what each mapped limit (by name) would be drained
// to: the catalog's sync mappings are tested against the vendors'
// documented examples through it.
func mapCountersByName(resp *http.Response, res *Resolution, now time.Time) (map[string]int64, []error) {
	readings, errs := backoff.ReadCounters(resp, res.Sync.Format, now)
	out := map[string]int64{}
	for _, o := range res.mapCounters(readings, nil) {
		out[res.Request.Items[o.Item].Limit.Name] = o.Remaining
	}
	return out, errs
}
