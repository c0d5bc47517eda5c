package backoff

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// epochIn returns the Unix time d after now, as X-RateLimit-Reset sends it.
func epochIn(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }

// counterCase is one response read in one format: the readings and the
// errors wanted. Each wanted error is a substring of the error's text,
// starting with "malformed" or "inconsistent", which also says which
// sentinel it must wrap.
type counterCase struct {
	name   string
	format Format
	at     time.Time // zero: now
	status int       // zero: 200
	body   string
	kv     []string // header name/value pairs
	want   []Reading
	errs   []string
}

func runCounters(t *testing.T, cases []counterCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			at, status := tc.at, tc.status
			if at.IsZero() {
				at = now
			}
			if status == 0 {
				status = 200
			}
			resp := response(status, tc.body, tc.kv...)
			got, errs := ReadCounters(resp, tc.format, at)
			if !slices.Equal(got, tc.want) {
				t.Errorf("readings:\n got %+v\nwant %+v", got, tc.want)
			}
			checkErrs(t, errs, tc.errs)
			if b, err := io.ReadAll(resp.Body); err != nil || string(b) != tc.body {
				t.Errorf("body after reading = %q, %v; want it whole", b, err)
			}
		})
	}
}

// checkErrs checks errs against wanted substrings, in order.
func checkErrs(t *testing.T, errs []error, want []string) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("errors = %q, want %d matching %q", errs, len(want), want)
	}
	for i, err := range errs {
		if !strings.Contains(err.Error(), want[i]) {
			t.Errorf("error %d = %q, want it to contain %q", i, err, want[i])
		}
		sentinel := ErrMalformed
		if strings.HasPrefix(want[i], "inconsistent") {
			sentinel = ErrInconsistent
		}
		if !errors.Is(err, sentinel) {
			t.Errorf("error %d = %q does not wrap %v", i, err, sentinel)
		}
	}
}

func TestReadCountersXRateLimit(t *testing.T) {
	t.Parallel()
	runCounters(t, []counterCase{{
		// docs.github.com rate-limits-for-the-rest-api: an authenticated
		// core request ("x-ratelimit-limit: 5000 ... x-ratelimit-used: 34"),
		// with the reset an hour ahead of the test clock.
		name: "github core", format: XRateLimit,
		kv: []string{"x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4966", "x-ratelimit-used", "34",
			"x-ratelimit-reset", epochIn(time.Hour), "x-ratelimit-resource", "core"},
		want: []Reading{{Counter: "core", Limit: 5000, HasLimit: true, Remaining: 4966, HasRemaining: true, Reset: time.Hour, HasReset: true}},
	}, {
		// The search counter: "x-ratelimit-limit: 30 ... x-ratelimit-resource: search".
		name: "github search", format: XRateLimit,
		kv: []string{"x-ratelimit-limit", "30", "x-ratelimit-remaining", "18", "x-ratelimit-reset", epochIn(42 * time.Second),
			"x-ratelimit-resource", "search"},
		want: []Reading{{Counter: "search", Limit: 30, HasLimit: true, Remaining: 18, HasRemaining: true, Reset: 42 * time.Second, HasReset: true}},
	}, {
		// The docs' own example reset (1372700873, in 2013) is long past:
		// the counter is due to be full, Reset 0.
		name: "github docs example, reset past", format: XRateLimit,
		kv:   []string{"x-ratelimit-limit", "60", "x-ratelimit-remaining", "56", "x-ratelimit-used", "4", "x-ratelimit-reset", "1372700873"},
		want: []Reading{{Counter: "default", Limit: 60, HasLimit: true, Remaining: 56, HasRemaining: true, HasReset: true}},
	}, {
		name: "used stands in for a missing remaining", format: XRateLimit,
		kv:   []string{"X-RateLimit-Limit", "60", "X-RateLimit-Used", "4"},
		want: []Reading{{Counter: "default", Limit: 60, HasLimit: true, Remaining: 56, HasRemaining: true}},
	}, {
		name: "used beyond the limit is nothing left", format: XRateLimit,
		kv:   []string{"X-RateLimit-Limit", "60", "X-RateLimit-Used", "61"},
		want: []Reading{{Counter: "default", Limit: 60, HasLimit: true, HasRemaining: true}},
	}, {
		// developers.intercom.com rate-limiting: 1000/min is 167 per
		// 10-second window, X-RateLimit-Reset a Unix timestamp.
		name: "intercom", format: XRateLimit,
		kv:   []string{"X-RateLimit-Limit", "167", "X-RateLimit-Remaining", "166", "X-RateLimit-Reset", epochIn(10 * time.Second)},
		want: []Reading{{Counter: "default", Limit: 167, HasLimit: true, Remaining: 166, HasRemaining: true, Reset: 10 * time.Second, HasReset: true}},
	}, {
		name: "reset in seconds from now", format: XRateLimit,
		kv:   []string{"X-RateLimit-Reset", "41"},
		want: []Reading{{Counter: "default", Reset: 41 * time.Second, HasReset: true}},
	}, {
		name: "nothing", format: XRateLimit, kv: []string{"Content-Type", "application/json"},
	}})
}

func TestReadCountersHubSpot(t *testing.T) {
	t.Parallel()
	runCounters(t, []counterCase{{
		// developers.hubspot.com usage details: 100 per 10 s (Free/Starter),
		// 250,000 a day, rolling interval given in milliseconds.
		name: "api key", format: HubSpot,
		kv: []string{"X-HubSpot-RateLimit-Max", "100", "X-HubSpot-RateLimit-Remaining", "97",
			"X-HubSpot-RateLimit-Interval-Milliseconds", "10000",
			"X-HubSpot-RateLimit-Daily", "250000", "X-HubSpot-RateLimit-Daily-Remaining", "249900"},
		want: []Reading{
			{Counter: "interval", Limit: 100, HasLimit: true, Remaining: 97, HasRemaining: true, Window: 10 * time.Second},
			{Counter: "daily", Limit: 250000, HasLimit: true, Remaining: 249900, HasRemaining: true, Window: 24 * time.Hour},
		},
	}, {
		// HubSpot changelog: OAuth calls have no daily headers.
		name: "oauth", format: HubSpot,
		kv: []string{"X-HubSpot-RateLimit-Max", "190", "X-HubSpot-RateLimit-Remaining", "0",
			"X-HubSpot-RateLimit-Interval-Milliseconds", "10000"},
		want: []Reading{{Counter: "interval", Limit: 190, HasLimit: true, HasRemaining: true, Window: 10 * time.Second}},
	}})
}

func TestReadCountersZendesk(t *testing.T) {
	t.Parallel()
	runCounters(t, []counterCase{{
		// developer.zendesk.com rate-limits: "X-Rate-Limit: 700
		// X-Rate-Limit-Remaining: 699".
		name: "account", format: Zendesk,
		kv:   []string{"X-Rate-Limit", "700", "X-Rate-Limit-Remaining", "699"},
		want: []Reading{{Counter: "account", Limit: 700, HasLimit: true, Remaining: 699, HasRemaining: true}},
	}, {
		// best-practices-for-avoiding-rate-limiting: a List Tickets
		// response.
		name: "list tickets", format: Zendesk,
		kv: []string{"x-rate-limit", "700", "ratelimit-limit", "700", "x-rate-limit-remaining", "699",
			"ratelimit-remaining", "699", "ratelimit-reset", "41",
			"zendesk-ratelimit-tickets-index", "total=100; remaining=99; resets=41"},
		want: []Reading{
			{Counter: "account", Limit: 700, HasLimit: true, Remaining: 699, HasRemaining: true, Reset: 41 * time.Second, HasReset: true},
			{Counter: "tickets-index", Limit: 100, HasLimit: true, Remaining: 99, HasRemaining: true, Reset: 41 * time.Second, HasReset: true},
		},
	}, {
		name: "ietf-style names only", format: Zendesk,
		kv:   []string{"ratelimit-limit", "400", "ratelimit-remaining", "12"},
		want: []Reading{{Counter: "account", Limit: 400, HasLimit: true, Remaining: 12, HasRemaining: true}},
	}, {
		name: "endpoint counters in name order", format: Zendesk,
		kv: []string{"Zendesk-RateLimit-Users-Index", "total=50", "Zendesk-RateLimit-Tickets-Index", "total=100; remaining=99; resets=1"},
		want: []Reading{
			{Counter: "tickets-index", Limit: 100, HasLimit: true, Remaining: 99, HasRemaining: true, Reset: time.Second, HasReset: true},
			{Counter: "users-index", Limit: 50, HasLimit: true},
		},
	}, {
		name: "endpoint counter repeated", format: Zendesk,
		kv: []string{"Zendesk-RateLimit-Tickets-Index", "total=100; remaining=99; resets=1",
			"Zendesk-RateLimit-Tickets-Index", "total=100; remaining=90; resets=2"},
		want: []Reading{{Counter: "tickets-index", Limit: 100, HasLimit: true, Remaining: 90, HasRemaining: true, Reset: 2 * time.Second, HasReset: true}},
		errs: []string{
			"inconsistent counter field: Zendesk-Ratelimit-Tickets-Index remaining: repeated with different values; took the most restrictive, 90",
			"inconsistent counter field: Zendesk-Ratelimit-Tickets-Index resets: repeated with different values; took the most restrictive, 2s",
		},
	}})
}

// TestReadCountersZendeskErrors: the endpoint counters' errors come in map
// order, so they are compared sorted.
func TestReadCountersZendeskErrors(t *testing.T) {
	t.Parallel()
	resp := response(200, "", "Zendesk-RateLimit-Users-Index", "total=50; remaining=x; resets=-1",
		"Zendesk-RateLimit-Audit", "garbage")
	got, errs := ReadCounters(resp, Zendesk, now)
	if want := []Reading{{Counter: "users-index", Limit: 50, HasLimit: true}}; !slices.Equal(got, want) {
		t.Errorf("readings %+v, want %+v", got, want)
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	checkErrs(t, errs, []string{
		`malformed counter field: Zendesk-Ratelimit-Audit: "garbage": not "key=value"`,
		`malformed counter field: Zendesk-Ratelimit-Users-Index remaining: "x": not a count`,
		`malformed counter field: Zendesk-Ratelimit-Users-Index resets: "-1": negative`,
	})
}

func TestReadCountersIETF(t *testing.T) {
	t.Parallel()
	runCounters(t, []counterCase{{
		// draft-ietf-httpapi-ratelimit-headers-10: two policies, the
		// burst one reported.
		name: "draft 10", format: IETF,
		kv: []string{"RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`,
			"RateLimit", `"burst";r=50;t=30`},
		want: []Reading{
			{Counter: "burst", Limit: 100, HasLimit: true, Remaining: 50, HasRemaining: true, Reset: 30 * time.Second, HasReset: true, Window: time.Minute},
			{Counter: "daily", Limit: 1000, HasLimit: true, Window: 24 * time.Hour},
		},
	}, {
		name: "draft 10, policy on two lines, both reported", format: IETF,
		kv: []string{"RateLimit-Policy", `"burst";q=100;w=60`, "RateLimit-Policy", `"daily";q=1000;w=86400`,
			"RateLimit", `"daily";r=0;t=3600, "burst";r=99;t=1`},
		want: []Reading{
			{Counter: "burst", Limit: 100, HasLimit: true, Remaining: 99, HasRemaining: true, Reset: time.Second, HasReset: true, Window: time.Minute},
			{Counter: "daily", Limit: 1000, HasLimit: true, HasRemaining: true, Reset: time.Hour, HasReset: true, Window: 24 * time.Hour},
		},
	}, {
		name: "draft 10, field without policy", format: IETF,
		kv:   []string{"RateLimit", `"default";r=50;t=30`},
		want: []Reading{{Counter: "default", Remaining: 50, HasRemaining: true, Reset: 30 * time.Second, HasReset: true}},
	}, {
		name: "draft 10, token names", format: IETF,
		kv:   []string{"RateLimit-Policy", `peak;q=10;w=1`, "RateLimit", `peak;r=3`},
		want: []Reading{{Counter: "peak", Limit: 10, HasLimit: true, Remaining: 3, HasRemaining: true, Window: time.Second}},
	}, {
		// Draft 07: a dictionary, with numeric policies.
		name: "draft 07", format: IETF,
		kv:   []string{"RateLimit", "limit=100, remaining=50, reset=30", "RateLimit-Policy", "100;w=60, 1000;w=86400"},
		want: []Reading{{Counter: "default", Limit: 100, HasLimit: true, Remaining: 50, HasRemaining: true, Reset: 30 * time.Second, HasReset: true, Window: time.Minute}},
	}, {
		// Drafts up to 06: separate fields.
		name: "draft 06", format: IETF,
		kv: []string{"RateLimit-Limit", "10", "RateLimit-Remaining", "1", "RateLimit-Reset", "7",
			"RateLimit-Policy", "10;w=1, 50;w=60"},
		want: []Reading{{Counter: "default", Limit: 10, HasLimit: true, Remaining: 1, HasRemaining: true, Reset: 7 * time.Second, HasReset: true, Window: time.Second}},
	}, {
		name: "early draft, windows in RateLimit-Limit", format: IETF,
		kv:   []string{"RateLimit-Limit", "50, 10;w=1, 50;w=60", "RateLimit-Remaining", "49"},
		want: []Reading{{Counter: "default", Limit: 50, HasLimit: true, Remaining: 49, HasRemaining: true, Window: time.Minute}},
	}, {
		// A malformed RateLimit is ignored as a whole (the drafts);
		// the separate fields still count.
		name: "malformed field, separate fields read", format: IETF,
		kv:   []string{"RateLimit", `"burst";r=`, "RateLimit-Remaining", "5"},
		want: []Reading{{Counter: "default", Remaining: 5, HasRemaining: true}},
		errs: []string{"malformed counter field: RateLimit:"},
	}, {
		name: "bad values", format: IETF,
		kv: []string{"RateLimit-Policy", `"a";q=-1;w=x, "b";q=5`,
			"RateLimit", `"a";r=1.5;t=-2, "b";r=9, "b";r=4`},
		want: []Reading{
			{Counter: "a", Remaining: 1, HasRemaining: true},
			{Counter: "b", Limit: 5, HasLimit: true, Remaining: 4, HasRemaining: true},
		},
		errs: []string{
			`malformed counter field: RateLimit-Policy a q: "-1": negative`,
			`malformed counter field: RateLimit-Policy a w: "x"`,
			`malformed counter field: RateLimit a t: "-2": negative`,
			`inconsistent counter field: RateLimit b r: repeated with different values; took the most restrictive, 4`,
		},
	}})
}

func TestReadCountersOpenAI(t *testing.T) {
	t.Parallel()
	runCounters(t, []counterCase{{
		// platform.openai.com/docs/guides/rate-limits: the sample values
		// of "rate limits in headers".
		name: "docs sample", format: OpenAI,
		kv: []string{"x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
			"x-ratelimit-remaining-requests", "59", "x-ratelimit-remaining-tokens", "149984",
			"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"},
		want: []Reading{
			{Counter: "requests", Limit: 60, HasLimit: true, Remaining: 59, HasRemaining: true, Reset: time.Second, HasReset: true},
			{Counter: "tokens", Limit: 150000, HasLimit: true, Remaining: 149984, HasRemaining: true, Reset: 6 * time.Minute, HasReset: true},
		},
	}, {
		// community.openai.com: "12ms" and a daily token reset.
		name: "seen in the wild", format: OpenAI,
		kv: []string{"x-ratelimit-reset-requests", "12ms", "x-ratelimit-reset-tokens", "23h47m36.648s"},
		want: []Reading{
			{Counter: "requests", Reset: 12 * time.Millisecond, HasReset: true},
			{Counter: "tokens", Reset: 23*time.Hour + 47*time.Minute + 36648*time.Millisecond, HasReset: true},
		},
	}, {
		// Azure OpenAI's Responses API (learn.microsoft.com Q&A): -1
		// counts and a reset of "0".
		name: "azure -1", format: OpenAI,
		kv:   []string{"x-ratelimit-limit-tokens", "-1", "x-ratelimit-remaining-tokens", "-1", "x-ratelimit-reset-tokens", "0"},
		want: []Reading{{Counter: "tokens", HasReset: true}},
		errs: []string{
			`malformed counter field: x-ratelimit-limit-tokens: "-1": negative`,
			`malformed counter field: x-ratelimit-remaining-tokens: "-1": negative`,
		},
	}, {
		name: "bad durations", format: OpenAI,
		kv: []string{"x-ratelimit-reset-requests", "-1s", "x-ratelimit-reset-tokens", "soon"},
		errs: []string{
			`malformed counter field: x-ratelimit-reset-requests: "-1s": negative`,
			`malformed counter field: x-ratelimit-reset-tokens: "soon": not a duration`,
		},
	}})
}

func TestReadCountersAnthropic(t *testing.T) {
	t.Parallel()
	// A recorded response (tidyllm's tests), "Date: Thu, 21 Aug 2025
	// 12:41:00 GMT"; read here 30 s earlier so that the resets are ahead.
	at := time.Date(2025, time.August, 21, 12, 40, 30, 0, time.UTC)
	runCounters(t, []counterCase{{
		name: "recorded", format: Anthropic, at: at,
		kv: []string{
			"anthropic-ratelimit-input-tokens-limit", "80000", "anthropic-ratelimit-input-tokens-remaining", "80000",
			"anthropic-ratelimit-input-tokens-reset", "2025-08-21T12:40:59Z",
			"anthropic-ratelimit-output-tokens-limit", "16000", "anthropic-ratelimit-output-tokens-remaining", "16000",
			"anthropic-ratelimit-output-tokens-reset", "2025-08-21T12:41:00Z",
			"anthropic-ratelimit-requests-limit", "1000", "anthropic-ratelimit-requests-remaining", "999",
			"anthropic-ratelimit-requests-reset", "2025-08-21T12:40:59Z",
			"anthropic-ratelimit-tokens-limit", "96000", "anthropic-ratelimit-tokens-remaining", "96000",
			"anthropic-ratelimit-tokens-reset", "2025-08-21T12:40:59Z",
		},
		want: []Reading{
			{Counter: "requests", Limit: 1000, HasLimit: true, Remaining: 999, HasRemaining: true, Reset: 29 * time.Second, HasReset: true},
			{Counter: "tokens", Limit: 96000, HasLimit: true, Remaining: 96000, HasRemaining: true, Reset: 29 * time.Second, HasReset: true},
			{Counter: "input-tokens", Limit: 80000, HasLimit: true, Remaining: 80000, HasRemaining: true, Reset: 29 * time.Second, HasReset: true},
			{Counter: "output-tokens", Limit: 16000, HasLimit: true, Remaining: 16000, HasRemaining: true, Reset: 30 * time.Second, HasReset: true},
		},
	}, {
		name: "not rfc 3339", format: Anthropic,
		kv:   []string{"anthropic-ratelimit-requests-reset", "1s"},
		errs: []string{`malformed counter field: anthropic-ratelimit-requests-reset: "1s": not an RFC 3339 time`},
	}})
}

func TestReadCountersShopify(t *testing.T) {
	t.Parallel()
	runCounters(t, []counterCase{{
		// shopify.dev admin-rest rate-limits: "X-Shopify-Shop-Api-Call-Limit: 32/40".
		name: "rest", format: Shopify,
		kv:   []string{"X-Shopify-Shop-Api-Call-Limit", "32/40"},
		want: []Reading{{Counter: "default", Limit: 40, HasLimit: true, Remaining: 8, HasRemaining: true}},
	}, {
		name: "over full", format: Shopify,
		kv:   []string{"X-Shopify-Shop-Api-Call-Limit", "41/40"},
		want: []Reading{{Counter: "default", Limit: 40, HasLimit: true, HasRemaining: true}},
	}, {
		name: "repeated", format: Shopify,
		kv:   []string{"X-Shopify-Shop-Api-Call-Limit", "30/40", "X-Shopify-Shop-Api-Call-Limit", "35/40, 31/40"},
		want: []Reading{{Counter: "default", Limit: 40, HasLimit: true, Remaining: 5, HasRemaining: true}},
		errs: []string{"inconsistent counter field: X-Shopify-Shop-Api-Call-Limit", "inconsistent counter field: X-Shopify-Shop-Api-Call-Limit"},
	}, {
		name: "malformed", format: Shopify,
		kv:   []string{"X-Shopify-Shop-Api-Call-Limit", "32 of 40", "X-Shopify-Shop-Api-Call-Limit", "-1/40"},
		errs: []string{`"32 of 40": not "used/limit"`, `"-1/40": used: negative`},
	}})
}

// shopifyBody is a GraphQL response with the given throttle status, as
// shopify.dev's graphql-admin rate-limits page shows it.
func shopifyBody(requested, actual, maxAv, cur, rate string) string {
	return `{"data":{"shop":{"name":"x"}},"extensions":{"cost":{"requestedQueryCost":` + requested +
		`,"actualQueryCost":` + actual + `,"throttleStatus":{"maximumAvailable":` + maxAv +
		`,"currentlyAvailable":` + cur + `,"restoreRate":` + rate + `}}}}`
}

func TestReadCountersShopifyGraphQL(t *testing.T) {
	t.Parallel()
	long := `{"data":{"x":"` + strings.Repeat("a", MaxBodyPeek) + `"},` + shopifyBody("1", "1", "1000.0", "999.0", "50.0")[1:]
	runCounters(t, []counterCase{{
		name: "docs example", format: ShopifyGraphQL,
		body: shopifyBody("252", "12", "1000.0", "988.0", "50.0"),
		want: []Reading{{Counter: "default", Limit: 1000, HasLimit: true, Remaining: 988, HasRemaining: true, Reset: 240 * time.Millisecond, HasReset: true}},
	}, {
		// community.shopify.com: a throttled response, actualQueryCost null.
		name: "throttled", format: ShopifyGraphQL, status: 429,
		body: `{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}],"extensions":{"cost":{"requestedQueryCost":202,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":50.0,"restoreRate":50.0}}}}`,
		want: []Reading{{Counter: "default", Limit: 1000, HasLimit: true, Remaining: 50, HasRemaining: true, Reset: 19 * time.Second, HasReset: true}},
	}, {
		name: "fractional", format: ShopifyGraphQL,
		body: shopifyBody("10.2", "3.5", "100.9", "87.5", "100.0"),
		want: []Reading{{Counter: "default", Limit: 100, HasLimit: true, Remaining: 87, HasRemaining: true, Reset: 134 * time.Millisecond, HasReset: true}},
	}, {
		name: "full", format: ShopifyGraphQL,
		body: shopifyBody("1", "1", "1000", "1000", "50"),
		want: []Reading{{Counter: "default", Limit: 1000, HasLimit: true, Remaining: 1000, HasRemaining: true, HasReset: true}},
	}, {
		name: "more than the maximum", format: ShopifyGraphQL,
		body: shopifyBody("1", "1", "100", "150", "50"),
		want: []Reading{{Counter: "default", Limit: 100, HasLimit: true, Remaining: 100, HasRemaining: true, HasReset: true}},
		errs: []string{"inconsistent counter field: default: remaining 150 above limit 100; took 100"},
	}, {
		name: "no extensions", format: ShopifyGraphQL, body: `{"data":{}}`,
	}, {
		name: "no body", format: ShopifyGraphQL,
	}, {
		name: "not json", format: ShopifyGraphQL, status: 502, body: "<html>Bad Gateway</html>",
		errs: []string{"malformed counter field: body extensions.cost: not JSON"},
	}, {
		name: "wrong type", format: ShopifyGraphQL, body: shopifyBody("1", "1", "1000", `"988"`, "50"),
		errs: []string{"malformed counter field: body extensions.cost: not JSON of the expected shape"},
	}, {
		name: "beyond the peek limit", format: ShopifyGraphQL, body: long,
		errs: []string{"malformed counter field: body extensions.cost: longer than the 65536 bytes read"},
	}, {
		name: "invalid utf-8 in a string", format: ShopifyGraphQL,
		body: `{"data":{"name":"` + "\xff\xfe" + `"},` + shopifyBody("1", "1", "10", "5", "5")[1:],
		want: []Reading{{Counter: "default", Limit: 10, HasLimit: true, Remaining: 5, HasRemaining: true, Reset: time.Second, HasReset: true}},
	}, {
		name: "invalid utf-8 outside strings", format: ShopifyGraphQL, body: "{\xff}",
		errs: []string{"malformed counter field: body extensions.cost: not JSON"},
	}, {
		name: "missing and bad values", format: ShopifyGraphQL,
		body: `{"extensions":{"cost":{"throttleStatus":{"maximumAvailable":-5,"currentlyAvailable":3}}}}`,
		want: []Reading{{Counter: "default", Remaining: 3, HasRemaining: true}},
		errs: []string{
			`malformed counter field: body extensions.cost.throttleStatus.maximumAvailable: "-5": negative`,
			"malformed counter field: body extensions.cost.throttleStatus.restoreRate: missing or null",
		},
	}, {
		name: "never restores", format: ShopifyGraphQL, body: shopifyBody("1", "1", "100", "5", "0"),
		want: []Reading{{Counter: "default", Limit: 100, HasLimit: true, Remaining: 5, HasRemaining: true}},
		errs: []string{"restoreRate: \"0\": zero"},
	}, {
		name: "huge", format: ShopifyGraphQL, body: shopifyBody("1", "1", "1e300", "5", "1e-300"),
		want: []Reading{{Counter: "default", Remaining: 5, HasRemaining: true}},
		errs: []string{`maximumAvailable: "1e+300": too large`},
	}})
}

func TestReadCountersDiscord(t *testing.T) {
	t.Parallel()
	runCounters(t, []counterCase{{
		// docs.discord.com rate-limits, header examples: a bucket with
		// nothing left, resetting in one second.
		name: "bucket exhausted", format: Discord,
		kv: []string{"X-RateLimit-Limit", "5", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epochIn(time.Second) + ".123",
			"X-RateLimit-Reset-After", "1", "X-RateLimit-Bucket", "abcd1234"},
		want: []Reading{{Counter: "abcd1234", Limit: 5, HasLimit: true, HasRemaining: true, Reset: time.Second, HasReset: true}},
	}, {
		name: "reset epoch only", format: Discord,
		kv:   []string{"X-RateLimit-Remaining", "3", "X-RateLimit-Reset", epochIn(64*time.Second) + ".570"},
		want: []Reading{{Counter: "default", Remaining: 3, HasRemaining: true, Reset: 64*time.Second + 570*time.Millisecond, HasReset: true}},
	}, {
		name: "global 429", format: Discord, status: 429,
		kv: []string{"X-RateLimit-Global", "true", "X-RateLimit-Scope", "global", "Retry-After", "65",
			"X-RateLimit-Reset-After", "64.57"},
		want: []Reading{{Counter: "default", Reset: 64*time.Second + 570*time.Millisecond, HasReset: true, Scope: "global"}},
	}, {
		name: "global without scope", format: Discord, status: 429,
		kv:   []string{"X-RateLimit-Global", "TRUE", "X-RateLimit-Reset-After", "2"},
		want: []Reading{{Counter: "default", Reset: 2 * time.Second, HasReset: true, Scope: "global"}},
	}, {
		name: "shared", format: Discord, status: 429,
		kv:   []string{"X-RateLimit-Scope", "shared", "X-RateLimit-Bucket", "b1", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset-After", "bad"},
		want: []Reading{{Counter: "b1", HasRemaining: true, Scope: "shared"}},
		errs: []string{`malformed counter field: X-RateLimit-Reset-After: "bad": not a number`},
	}, {
		name: "bad global", format: Discord,
		kv:   []string{"X-RateLimit-Global", "yes", "X-RateLimit-Remaining", "1"},
		want: []Reading{{Counter: "default", Remaining: 1, HasRemaining: true}},
		errs: []string{`X-RateLimit-Global: "yes": not "true" or "false"`},
	}})
}

func TestReadCountersSalesforce(t *testing.T) {
	t.Parallel()
	runCounters(t, []counterCase{{
		// developer.salesforce.com headers_api_usage: "Sforce-Limit-Info: api-usage=18/5000".
		name: "api usage", format: Salesforce,
		kv:   []string{"Sforce-Limit-Info", "api-usage=18/5000"},
		want: []Reading{{Counter: "api-usage", Limit: 5000, HasLimit: true, Remaining: 4982, HasRemaining: true, Window: 24 * time.Hour}},
	}, {
		name: "with bursts", format: Salesforce,
		kv: []string{"Sforce-Limit-Info", "api-usage=10018/100000; api-bursts=1/750"},
		want: []Reading{
			{Counter: "api-usage", Limit: 100000, HasLimit: true, Remaining: 89982, HasRemaining: true, Window: 24 * time.Hour},
			{Counter: "api-bursts", Limit: 750, HasLimit: true, Remaining: 749, HasRemaining: true},
		},
	}, {
		name: "per app", format: Salesforce,
		kv: []string{"Sforce-Limit-Info", "api-usage=25/5000; per-app-api-usage=17/250(appName=sample-connected-app)"},
		want: []Reading{
			{Counter: "api-usage", Limit: 5000, HasLimit: true, Remaining: 4975, HasRemaining: true, Window: 24 * time.Hour},
			{Counter: "per-app-api-usage", Limit: 250, HasLimit: true, Remaining: 233, HasRemaining: true},
		},
	}, {
		// Salesforce lets an org go over its allocation.
		name: "over the allocation", format: Salesforce,
		kv:   []string{"Sforce-Limit-Info", "api-usage=5100/5000"},
		want: []Reading{{Counter: "api-usage", Limit: 5000, HasLimit: true, HasRemaining: true, Window: 24 * time.Hour}},
	}, {
		name: "repeated and malformed", format: Salesforce,
		kv:   []string{"Sforce-Limit-Info", "api-usage=18/5000; junk; api-usage=20/5000; x=1"},
		want: []Reading{{Counter: "api-usage", Limit: 5000, HasLimit: true, Remaining: 4980, HasRemaining: true, Window: 24 * time.Hour}},
		errs: []string{
			`Sforce-Limit-Info: "junk": not "key=value"`,
			"inconsistent counter field: Sforce-Limit-Info api-usage",
			`Sforce-Limit-Info x: "1": not "used/limit"`,
		},
	}})
}

// TestReadCountersRules covers the rules ReadCounters documents for every
// format, on the X-RateLimit headers.
func TestReadCountersRules(t *testing.T) {
	t.Parallel()
	rem := func(n int64) []Reading {
		return []Reading{{Counter: "default", Remaining: n, HasRemaining: true}}
	}
	runCounters(t, []counterCase{{
		name: "negative", format: XRateLimit, kv: []string{"X-RateLimit-Remaining", "-1"},
		errs: []string{`malformed counter field: X-RateLimit-Remaining: "-1": negative`},
	}, {
		name: "largest count", format: XRateLimit, kv: []string{"X-RateLimit-Remaining", "999999999999999"},
		want: rem(999_999_999_999_999),
	}, {
		name: "too large", format: XRateLimit, kv: []string{"X-RateLimit-Remaining", "1000000000000000"},
		errs: []string{`"1000000000000000": too large`},
	}, {
		name: "beyond int64", format: XRateLimit, kv: []string{"X-RateLimit-Remaining", "99999999999999999999999"},
		errs: []string{`too large`},
	}, {
		name: "not numbers", format: XRateLimit,
		kv:   []string{"X-RateLimit-Limit", "1e3", "X-RateLimit-Remaining", "+5", "X-RateLimit-Used", "0x10"},
		errs: []string{`X-RateLimit-Limit: "1e3": not a count`, `X-RateLimit-Remaining: "+5": not a count`},
	}, {
		name: "empty is absent", format: XRateLimit, kv: []string{"X-RateLimit-Remaining", "", "X-RateLimit-Limit", "  "},
	}, {
		name: "white space", format: XRateLimit, kv: []string{"X-RateLimit-Remaining", " \t42 "}, want: rem(42),
	}, {
		name: "repeated, equal", format: XRateLimit,
		kv: []string{"X-RateLimit-Remaining", "7", "X-RateLimit-Remaining", "7, 7"}, want: rem(7),
	}, {
		name: "repeated, different: the smallest remaining", format: XRateLimit,
		kv: []string{"X-RateLimit-Remaining", "10", "X-RateLimit-Remaining", "5"}, want: rem(5),
		errs: []string{"inconsistent counter field: X-RateLimit-Remaining: repeated with different values; took the most restrictive, 5"},
	}, {
		name: "folded by a proxy", format: XRateLimit,
		kv: []string{"X-RateLimit-Remaining", "3, 10"}, want: rem(3),
		errs: []string{"inconsistent counter field: X-RateLimit-Remaining: repeated with different values; took the most restrictive, 3"},
	}, {
		name: "repeated with garbage", format: XRateLimit,
		kv: []string{"X-RateLimit-Remaining", "x, 4, y"}, want: rem(4),
		errs: []string{`X-RateLimit-Remaining: "x": not a count`},
	}, {
		name: "repeated resets: the latest", format: XRateLimit,
		kv:   []string{"X-RateLimit-Reset", "5", "X-RateLimit-Reset", epochIn(time.Minute)},
		want: []Reading{{Counter: "default", Reset: time.Minute, HasReset: true}},
		errs: []string{"inconsistent counter field: X-RateLimit-Reset"},
	}, {
		name: "limit zero", format: XRateLimit,
		kv:   []string{"X-RateLimit-Limit", "0", "X-RateLimit-Remaining", "0"},
		want: []Reading{{Counter: "default", HasLimit: true, HasRemaining: true}},
	}, {
		name: "reset now", format: XRateLimit, kv: []string{"X-RateLimit-Reset", epochIn(0)},
		want: []Reading{{Counter: "default", HasReset: true}},
	}, {
		name: "reset zero seconds", format: XRateLimit, kv: []string{"X-RateLimit-Reset", "0"},
		want: []Reading{{Counter: "default", HasReset: true}},
	}, {
		name: "reset past", format: XRateLimit, kv: []string{"X-RateLimit-Reset", epochIn(-time.Minute)},
		want: []Reading{{Counter: "default", HasReset: true}},
	}, {
		name: "reset in milliseconds, misread", format: XRateLimit,
		kv:   []string{"X-RateLimit-Reset", strconv.FormatInt(now.Add(time.Minute).UnixMilli(), 10)},
		errs: []string{"more than a year ahead"},
	}, {
		name: "reset more than a year in seconds", format: XRateLimit,
		kv:   []string{"X-RateLimit-Reset", "999999999"},
		errs: []string{`"999999999": more than a year ahead`},
	}, {
		name: "remaining above limit", format: XRateLimit,
		kv:   []string{"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "20"},
		want: []Reading{{Counter: "default", Limit: 10, HasLimit: true, Remaining: 10, HasRemaining: true}},
		errs: []string{"inconsistent counter field: default: remaining 20 above limit 10; took 10"},
	}, {
		name: "fractions round to the restrictive side", format: XRateLimit,
		kv:   []string{"X-RateLimit-Limit", "40.9", "X-RateLimit-Used", "4.2"},
		want: []Reading{{Counter: "default", Limit: 40, HasLimit: true, Remaining: 35, HasRemaining: true}},
	}, {
		name: "fractional remaining", format: XRateLimit, kv: []string{"X-RateLimit-Remaining", "7.99"}, want: rem(7),
	}, {
		name: "mixed case names", format: XRateLimit,
		kv:   []string{"x-RATELIMIT-remaining", "3", "X-RATELIMIT-RESOURCE", "core"},
		want: []Reading{{Counter: "core", Remaining: 3, HasRemaining: true}},
	}, {
		name: "invalid utf-8", format: XRateLimit, kv: []string{"X-RateLimit-Remaining", "4\xff"},
		errs: []string{`X-RateLimit-Remaining: "4\xff": not a count`},
	}, {
		name: "long garbage is cut in the error", format: XRateLimit,
		kv:   []string{"X-RateLimit-Remaining", strings.Repeat("z", 5000)},
		errs: []string{`"` + strings.Repeat("z", maxQuoted) + `"...: not a count`},
	}, {
		name: "bad resource drops the reading", format: XRateLimit,
		kv:   []string{"X-RateLimit-Resource", "co re", "X-RateLimit-Remaining", "3"},
		errs: []string{`X-RateLimit-Resource: "co re": not a name`},
	}, {
		name: "resources disagree", format: XRateLimit,
		kv:   []string{"X-RateLimit-Resource", "core", "X-RateLimit-Resource", "search", "X-RateLimit-Remaining", "3"},
		errs: []string{`X-RateLimit-Resource: "search": repeated with different names (first "core")`},
	}, {
		name: "resource too long", format: XRateLimit,
		kv:   []string{"X-RateLimit-Resource", strings.Repeat("r", maxName+1), "X-RateLimit-Remaining", "3"},
		errs: []string{"not a name"},
	}})
}

// TestReadCountersBounds: a response's cost in readings and errors does
// not grow with its size: a field of 1000 policies is read up to the 64th
// (and its 64 errors reported up to the 16th, then counted).
func TestReadCountersBounds(t *testing.T) {
	t.Parallel()
	var policies, bad []string
	for i := range 1000 {
		policies = append(policies, fmt.Sprintf(`"p%d";q=%d`, i, i))
		bad = append(bad, fmt.Sprintf(`"p%d";q=-%d`, i, i+1))
	}
	rs, errs := ReadCounters(response(200, "", "RateLimit-Policy", strings.Join(policies, ", ")), IETF, now)
	if len(rs) != maxReadings || rs[maxReadings-1].Counter != "p63" {
		t.Errorf("%d readings, want the first %d", len(rs), maxReadings)
	}
	checkErrs(t, errs, []string{`malformed counter field: RateLimit-Policy: "\"p0\";q=0, \"p1\";q=1, \"p2\";q=2, \"p3\";q=3, "...: more than 64 items or 16384 bytes; the rest left out`})

	rs, errs = ReadCounters(response(200, "", "RateLimit-Policy", strings.Join(bad, ", ")), IETF, now)
	if len(rs) != 0 || len(errs) != maxErrors+1 {
		t.Fatalf("%d readings, %d errors; want none and %d", len(rs), len(errs), maxErrors+1)
	}
	if last := errs[maxErrors]; !errors.Is(last, ErrMalformed) || !strings.Contains(last.Error(), "49 more errors left out") {
		t.Errorf("last error = %v", last)
	}
}

func TestReadCountersNilAndUnknown(t *testing.T) {
	t.Parallel()
	if got, errs := ReadCounters(nil, XRateLimit, now); got != nil || errs != nil {
		t.Errorf("nil response: %v, %v", got, errs)
	}
	for _, f := range []Format{0, Salesforce + 1, 255} {
		got, errs := ReadCounters(response(200, "", "X-RateLimit-Remaining", "1"), f, now)
		if got != nil || len(errs) != 1 || !errors.Is(errs[0], ErrUnknownFormat) {
			t.Errorf("format %v: %v, %v; want one ErrUnknownFormat", f, got, errs)
		}
	}
}

func TestFormatNames(t *testing.T) {
	t.Parallel()
	names := map[Format]string{
		XRateLimit: "x-ratelimit", HubSpot: "hubspot", Zendesk: "zendesk", IETF: "ietf", OpenAI: "openai",
		Anthropic: "anthropic", Shopify: "shopify", ShopifyGraphQL: "shopify-graphql", Discord: "discord",
		Salesforce: "salesforce",
	}
	if len(names) != len(formatReaders) {
		t.Fatalf("%d names for %d readers", len(names), len(formatReaders))
	}
	for f, name := range names {
		if f.String() != name {
			t.Errorf("%d.String() = %q, want %q", f, f, name)
		}
		if got, err := ParseFormat(name); got != f || err != nil {
			t.Errorf("ParseFormat(%q) = %v, %v", name, got, err)
		}
	}
	for _, bad := range []string{"", "X-RateLimit", "github", " ietf", "Format(1)"} {
		_, err := ParseFormat(bad)
		if !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), "x-ratelimit, hubspot") {
			t.Errorf("ParseFormat(%q) = %v; want ErrUnknownFormat listing the names", bad, err)
		}
	}
	if s := Format(0).String(); s != "Format(0)" {
		t.Errorf("Format(0).String() = %q", s)
	}
}

// TestShopifyBodyReadOnce: two readings of the counters come from one
// read of the body, which the caller still gets whole.
func TestShopifyBodyReadOnce(t *testing.T) {
	t.Parallel()
	body := shopifyBody("252", "12", "1000.0", "988.0", "50.0")
	orig := &closeRecorder{Reader: strings.NewReader(body)}
	resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: orig}
	rs, errs := ReadCounters(resp, ShopifyGraphQL, now)
	wrapped := resp.Body
	again, errs2 := ReadCounters(resp, ShopifyGraphQL, now)
	if len(rs) != 1 || rs[0].Remaining != 988 || errs != nil || len(again) != 1 || again[0] != rs[0] || errs2 != nil {
		t.Fatalf("readings %v %v, again %v %v", rs, errs, again, errs2)
	}
	if resp.Body != wrapped {
		t.Error("second reader wrapped the body again")
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != body {
		t.Errorf("body = %q", b)
	}
	if resp.Body.Close(); !orig.closed {
		t.Error("original body not closed")
	}
}

func TestReadDiscordRateLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		status int
		body   string
		want   discordRateLimit
		ok     bool
		errHas string
	}{
		// docs.discord.com rate-limits, "exceeding a rate limit".
		{"route", 429, `{"message": "You are being rate limited.", "retry_after": 64.57, "global": false}`,
			discordRateLimit{RetryAfter: 64*time.Second + 570*time.Millisecond}, true, ""},
		{"global", 429, `{"message": "You are being rate limited.", "retry_after": 1.5, "global": true}`,
			discordRateLimit{RetryAfter: 1500 * time.Millisecond, Global: true}, true, ""},
		{"no retry_after", 429, `{"message": "nope", "global": true}`, discordRateLimit{Global: true}, false, ""},
		{"not a 429", 200, `{"retry_after": 5}`, discordRateLimit{}, false, ""},
		{"cloudflare html", 429, `<html>error 1015</html>`, discordRateLimit{}, false, "not JSON"},
		{"negative", 429, `{"retry_after": -1}`, discordRateLimit{}, false, "negative"},
		{"huge", 429, `{"retry_after": 1e300}`, discordRateLimit{}, false, "more than a year"},
		{"wrong type", 429, `{"retry_after": "5"}`, discordRateLimit{}, false, "not JSON of the expected shape"},
		{"empty", 429, ``, discordRateLimit{}, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := response(tc.status, tc.body)
			body := resp.Body
			got, ok, err := readDiscordRateLimit(resp)
			if got != tc.want || ok != tc.ok {
				t.Errorf("readDiscordRateLimit = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
			if (err != nil) != (tc.errHas != "") || (err != nil && (!errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.errHas))) {
				t.Errorf("error = %v, want ErrMalformed with %q", err, tc.errHas)
			}
			if tc.status != 429 && resp.Body != body {
				t.Error("body of a non-429 was read")
			}
			if b, _ := io.ReadAll(resp.Body); string(b) != tc.body {
				t.Errorf("body after = %q", b)
			}
		})
	}
	if _, ok, err := readDiscordRateLimit(nil); ok || err != nil {
		t.Error("nil response read")
	}
}

func TestOpenAIBillingStop(t *testing.T) {
	t.Parallel()
	// The body OpenAI sends for an exhausted quota (help.openai.com 6891831).
	quota := `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	cases := []struct {
		name   string
		status int
		body   string
		want   bool
	}{
		{"insufficient quota", 429, quota, true},
		{"type only", 429, `{"error":{"type":"insufficient_quota","code":null}}`, true},
		{"rate limit", 429, `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, false},
		{"not a 429", 400, quota, false},
		{"undocumented hard limit", 400, `{"error":{"code":"billing_hard_limit_reached","message":"Billing hard limit has been reached","param":null,"type":"invalid_request_error"}}`, false},
		{"code of another type", 429, `{"error":{"code":42,"type":{"a":1}}}`, false},
		{"not json", 429, "insufficient_quota", false},
		{"no body", 429, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := response(tc.status, tc.body)
			if got := openAIBillingStop(resp); got != tc.want {
				t.Errorf("openAIBillingStop = %v, want %v", got, tc.want)
			}
			if b, _ := io.ReadAll(resp.Body); string(b) != tc.body {
				t.Errorf("body after = %q", b)
			}
		})
	}
	if openAIBillingStop(nil) {
		t.Error("nil response is a billing stop")
	}
}

func TestShouldRetry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		kv        []string
		retry, ok bool
	}{
		{"absent", nil, false, false},
		{"stripe true", []string{"Stripe-Should-Retry", "true"}, true, true},
		{"stripe false", []string{"stripe-should-retry", "false"}, false, true},
		{"x-should-retry", []string{"x-should-retry", " TRUE "}, true, true},
		{"other value", []string{"X-Should-Retry", "maybe"}, false, false},
		{"empty", []string{"X-Should-Retry", ""}, false, false},
		{"disagree: false wins", []string{"Stripe-Should-Retry", "true", "X-Should-Retry", "false"}, false, true},
		{"repeated: false wins", []string{"X-Should-Retry", "false", "X-Should-Retry", "true"}, false, true},
	}
	for _, tc := range cases {
		h := make(http.Header)
		for i := 0; i+1 < len(tc.kv); i += 2 {
			h.Add(tc.kv[i], tc.kv[i+1])
		}
		if retry, ok := shouldRetry(h); retry != tc.retry || ok != tc.ok {
			t.Errorf("%s: shouldRetry = %v, %v; want %v, %v", tc.name, retry, ok, tc.retry, tc.ok)
		}
	}
	if retry, ok := shouldRetry(nil); retry || ok {
		t.Error("nil header says something")
	}
}
