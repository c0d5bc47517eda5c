package backoff

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// checkReadings fails t unless every reading keeps the promises of
// Reading and ReadCounters, and every error wraps a sentinel.
func checkReadings(t *testing.T, f Format, rs []Reading, errs []error) {
	t.Helper()
	for _, rd := range rs {
		switch {
		case !validName(rd.Counter):
			t.Fatalf("%v: counter name %q", f, rd.Counter)
		case !rd.HasLimit && !rd.HasRemaining && !rd.HasReset:
			t.Fatalf("%v: empty reading %+v", f, rd)
		case rd.Limit < 0 || rd.Limit > maxCount || (!rd.HasLimit && rd.Limit != 0):
			t.Fatalf("%v: limit in %+v", f, rd)
		case rd.Remaining < 0 || rd.Remaining > maxCount || (!rd.HasRemaining && rd.Remaining != 0):
			t.Fatalf("%v: remaining in %+v", f, rd)
		case rd.HasLimit && rd.HasRemaining && rd.Remaining > rd.Limit:
			t.Fatalf("%v: remaining above limit in %+v", f, rd)
		case rd.Reset < 0 || rd.Reset > maxReset || (!rd.HasReset && rd.Reset != 0):
			t.Fatalf("%v: reset in %+v", f, rd)
		case rd.Window < 0 || rd.Window > maxReset:
			t.Fatalf("%v: window in %+v", f, rd)
		}
	}
	for _, err := range errs {
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInconsistent) {
			t.Fatalf("%v: error %v wraps no sentinel", f, err)
		}
		if len(err.Error()) > 400 {
			t.Fatalf("%v: error of %d bytes: %.100q...", f, len(err.Error()), err)
		}
	}
}

// FuzzReadCounters feeds every reader the same hostile response: two
// headers (each sent twice, the second time with another value) and a
// body. Its seeds are the tables' vendor examples and their edge cases;
// they run in every go test.
func FuzzReadCounters(f *testing.F) {
	shopify := shopifyBody("252", "12", "1000.0", "988.0", "50.0")
	for _, s := range [][7]string{
		{"429", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epochIn(time.Hour), "", ""},
		{"200", "X-RateLimit-Resource", "core", "X-RateLimit-Used", "4.2", "X-RateLimit-Limit", ""},
		{"200", "X-HubSpot-RateLimit-Interval-Milliseconds", "10000", "X-HubSpot-RateLimit-Max", "100", "", ""},
		{"200", "Zendesk-RateLimit-Tickets-Index", "total=100; remaining=99; resets=41", "Ratelimit-Reset", "41", "", ""},
		{"200", "RateLimit", `"burst";r=50;t=30`, "RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`, "", ""},
		{"200", "RateLimit", "limit=100, remaining=50, reset=30", "RateLimit-Policy", "100;w=60", "", ""},
		{"200", "RateLimit-Limit", "10, 10;w=1", "RateLimit-Reset", "1795240800000", "", ""},
		{"200", "X-Ratelimit-Reset-Tokens", "6m0s", "X-Ratelimit-Remaining-Tokens", "-1", "", ""},
		{"200", "Anthropic-Ratelimit-Tokens-Reset", "2026-11-21T06:00:30Z", "Anthropic-Ratelimit-Tokens-Limit", "1e3", "", ""},
		{"200", "X-Shopify-Shop-Api-Call-Limit", "32/40", "X-Shopify-Shop-Api-Call-Limit", "41/40", "", ""},
		{"429", "X-RateLimit-Reset-After", "64.57", "X-RateLimit-Global", "true", `{"retry_after": 64.57, "global": true}`, ""},
		{"200", "Sforce-Limit-Info", "api-usage=18/5000; per-app-api-usage=17/250(appName=x)", "X-RateLimit-Bucket", "a b", "", ""},
		{"429", "X-Should-Retry", "false", "Stripe-Should-Retry", "true",
			`{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}`, ""},
		{"200", "", "", "", "", shopify, ""},
		{"429", "", "", "", "", shopify[:len(shopify)/2], ""},
		{"200", "", "", "", "", shopifyBody("1e308", "-0", "1e-320", "1e308", "1e-308"), ""},
		{"200", "X-RateLimit-Remaining", "99999999999999999999", "x-ratelimit-limit", "\xff\x00", "{\xff}", "\x00"},
		{"200", "RateLimit-Policy", strings.Repeat("p;q=1;w=9, ", 2000), "RateLimit", strings.Repeat("p;r=0;t=1, ", 2000), "", ""},
		{"200", "Sforce-Limit-Info", strings.Repeat("a=1/2; ", 100), "Zendesk-RateLimit-X", strings.Repeat("total=1;", 100), "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6])
	}
	f.Fuzz(func(t *testing.T, status, name1, value1, name2, value2, body, value3 string) {
		h := http.Header{}
		for _, kv := range [][2]string{{name1, value1}, {name2, value2}, {name1, value3}} {
			if validHeaderName(kv[0]) {
				h.Add(kv[0], kv[1])
			}
		}
		code := 200
		if status == "429" {
			code = 429
		}
		resp := &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader(body))}
		// The same headers blown up past the readers' bounds: many
		// values on one line, and many lines.
		big := resp
		if validHeaderName(name1) {
			big = &http.Response{StatusCode: code, Header: h.Clone(), Body: http.NoBody}
			big.Header.Set(name1, strings.Repeat(value1+", ", maxSFBytes/(len(value1)+2)+1))
			for range maxValues + 1 {
				big.Header.Add(name2, value2)
			}
		}
		for fm := range formatReaders {
			rs, errs := ReadCounters(resp, fm, now)
			checkReadings(t, fm, rs, errs)
			rs, errs = ReadCounters(big, fm, now)
			checkReadings(t, fm, rs, errs)
		}
		d, ok, err := readDiscordRateLimit(resp)
		if d.RetryAfter < 0 || d.RetryAfter > maxReset || (ok && err != nil) || (err != nil && !errors.Is(err, ErrMalformed)) {
			t.Fatalf("readDiscordRateLimit = %+v, %v, %v", d, ok, err)
		}
		openAIBillingStop(resp)
		if retry, ok := shouldRetry(h); retry && !ok {
			t.Fatal("shouldRetry: retry without a say")
		}
		if got, err := io.ReadAll(resp.Body); err != nil || string(got) != body {
			t.Fatalf("body after the readers = %q, %v; want %q", got, err, body)
		}
	})
}
