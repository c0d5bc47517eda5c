package backoff

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"
)

// inRange fails t unless 0 <= d <= max.
func inRange(t *testing.T, what string, d, max time.Duration) {
	t.Helper()
	if d < 0 || d > max {
		t.Fatalf("%s = %v, want within [0, %v]", what, d, max)
	}
}

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{
		"120", "2.0", "0", "-1", "99999999999999999999", "9223372037", "1e3", "+5", "",
		"Sat, 21 Nov 2026 06:00:30 GMT", "Saturday, 21-Nov-26 06:01:00 GMT", "Sat Nov 21 06:02:00 2026",
		"Fri, 31 Dec 9999 23:59:59 GMT", "6m0s", "1500", "2026-11-21T06:00:30Z", "1.", ".5", "\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for name, parse := range map[string]func(string, time.Time) (time.Duration, bool){
			"parseRetryAfter": parseRetryAfter,
			"parseReset":      parseReset,
			"parseAny":        parseAny,
			"parseRFC3339":    parseRFC3339,
			"parseMillis":     noNow(parseMillis),
			"parseSeconds":    noNow(parseSeconds),
			"parseGoDuration": noNow(parseGoDuration),
		} {
			d, ok := parse(v, now)
			if ok != (d > 0) {
				t.Fatalf("%s(%q) = %v, %v: ok must mean a positive delay", name, v, d, ok)
			}
			inRange(t, name, d, maxDuration)
		}
		resp := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {v}}}
		v2 := Classify(resp, nil, now)
		inRange(t, "Classify delay", v2.Delay, DefaultMaxDelay)
	})
}

func FuzzRateLimitHeader(f *testing.F) {
	for _, s := range [][2]string{
		{`"default";r=0;t=30`, ""},
		{`"burst";r=0;t=5, "daily";r=100;t=3000`, `"burst";q=100;w=60,"daily";q=1000;w=86400`},
		{`"burst";r=0`, `"burst";q=100;w=60`},
		{`limit=100, remaining=0, reset=30`, ""},
		{`"a\"b";r=0;t=1`, ""},
		{`x;r=0;t=999999999999999`, ""},
		{`:abc=:;r=?0`, `("a" "b")`},
		{`,,,`, `;;;`},
	} {
		f.Add(s[0], s[1])
	}
	f.Add(strings.Repeat(`"p";r=0;t=1, `, 2000), strings.Repeat("p;q=1;w=9, ", 2000))
	f.Fuzz(func(t *testing.T, field, policy string) {
		checkSFPrefix(t, field)
		d, ok := rateLimitDelay(field, policy, now)
		if ok != (d > 0) {
			t.Fatalf("rateLimitDelay(%q, %q) = %v, %v", field, policy, d, ok)
		}
		inRange(t, "rateLimitDelay", d, maxDuration)
		resp := &http.Response{StatusCode: 429, Header: http.Header{
			"Ratelimit":        {field},
			"Ratelimit-Policy": {policy},
			"Ratelimit-Reset":  {policy},
		}}
		capD := 90 * time.Second
		v := Classify(resp, &Signals{MaxDelay: capD}, now)
		inRange(t, "Classify delay", v.Delay, capD)
		if (v.Delay == 0) != (v.Source == "") {
			t.Fatalf("Classify = %+v: Source must be set exactly when Delay is", v)
		}
	})
}

func FuzzClassify(f *testing.F) {
	f.Add(429, "Retry-After", "2.0", "", "x-ratelimit-remaining", "0", "")
	f.Add(403, "x-ratelimit-reset", "1795000000", `[{"errorCode":"REQUEST_LIMIT_EXCEEDED"}]`, "x-ratelimit-remaining", "0", "REQUEST_LIMIT_EXCEEDED")
	f.Add(429, "retry-after-ms", "1500", `{"error":{"type":"insufficient_quota"}}`, "", "", "insufficient_quota")
	f.Add(429, "x-ratelimit-reset-requests", "6m0s", "", "", "", "")
	f.Add(503, "RateLimit", `"default";r=0;t=30`, "", "", "", "")
	f.Add(0, "", "", "", "", "", "")
	f.Add(-1, "X-RateLimit-Reset", "99999999999999999999", "\x00\xff", "\x00", "\x00", "\x00")
	f.Add(429, "X-RateLimit-Global", "true", `{"retry_after":64.57,"global":true}`, "", "", "")
	f.Add(429, "X-Should-Retry", "false", `{"retry_after":-1e308,"global":"yes"}`, "", "", "")
	f.Add(409, "Stripe-Should-Retry", "true", `{"error":{"code":"insufficient_quota","type":7}}`, "", "", "")
	f.Fuzz(func(t *testing.T, status int, name, value, body, ruleHeader, ruleValue, contains string) {
		h := http.Header{}
		if name != "" {
			h[name] = []string{value}
			h.Add(name, value)
		}
		resp := &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
		capD := time.Minute
		s := &Signals{
			Rules:        []Rule{{Status: status, Header: ruleHeader, HeaderValue: ruleValue, BodyContains: contains}},
			Ignore:       []Rule{{Status: status, BodyContains: contains + "!"}},
			DelayHeaders: []string{name, ruleHeader},
			MaxDelay:     capD,
		}
		withBody := func(b string) *Signals { c := *s; c.Body = b; return &c }
		for _, sig := range []*Signals{nil, s, withBody(BodyDiscord), withBody(BodyOpenAI)} {
			v := Classify(resp, sig, now)
			if (!v.retrySaid && v.retryable != v.Throttled) || (v.Ignored && (v.Throttled || v.retryable || v.Delay != 0)) ||
				(v.QuotaExhausted && !v.Ignored) {
				t.Fatalf("Classify = %+v: inconsistent verdict", v)
			}
			limit := DefaultMaxDelay
			if sig != nil {
				limit = capD
			}
			inRange(t, "Classify delay", v.Delay, limit)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(got, []byte(body)) {
			t.Fatalf("body after Classify = %q, %v; want %q", got, err, body)
		}
		p := fixedPolicy(s)
		resp.Request = request("GET", "")
		if _, err := p.CheckRetry(resp.Request.Context(), resp, nil); err != nil {
			t.Fatalf("CheckRetry: %v", err)
		}
		inRange(t, "Backoff", p.Backoff(time.Second, 30*time.Second, status, resp), max(30*time.Second, capD))
	})
}

// checkSFPrefix fails t unless a short field that parses, followed by
// enough items to pass parseSF's bounds, parses as the same items (up to
// maxSFItems) and more: an item cut at the bound is left out, never read
// short.
func checkSFPrefix(t *testing.T, field string) {
	t.Helper()
	short, more, ok := parseSF(field, false)
	if !ok || more || len(field) > maxSFBytes/2 || len(short) == 0 {
		return
	}
	long := field + strings.Repeat(", q;r=1234567", maxSFBytes/8)
	items, more, ok := parseSF(long, false)
	if !ok || !more || len(items) < min(len(short), maxSFItems) || len(items) > maxSFItems {
		t.Fatalf("parseSF(%.40q + %d bytes) = %d items, more %v, ok %v; the field alone gives %d", field, len(long)-len(field), len(items), more, ok, len(short))
	}
	for i, it := range items {
		want := sfItem{value: "q", params: map[string]string{"r": "1234567"}}
		if i < len(short) {
			want = short[i]
		}
		if it.value != want.value || !maps.Equal(it.params, want.params) {
			t.Fatalf("item %d = %+v, want %+v", i, it, want)
		}
	}
}
