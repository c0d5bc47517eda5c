package backoff

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// hostileHeaders builds responses whose counter headers hold about size
// bytes each, in the shapes that made a reader's cost grow with the
// header: many items on one line, many lines, one huge item, many
// parameters or pairs, many headers.
func hostileHeaders(size int) map[string]struct {
	f Format
	h http.Header
} {
	list := func(item func(i int) string, sep string) string {
		var b strings.Builder
		for i := 0; b.Len() < size; i++ {
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(item(i))
		}
		return b.String()
	}
	lines := func(item func(i int) string) []string {
		var out []string
		for n, i := 0, 0; n < size; i++ {
			out = append(out, item(i))
			n += len(out[i])
		}
		return out
	}
	policy := func(i int) string { return fmt.Sprintf("p%d;q=%d;w=60", i, 1000+i) }
	item := func(i int) string { return fmt.Sprintf("p%d;r=%d;t=30", i, i) }
	zendesk := http.Header{}
	for i := 0; i*40 < size; i++ {
		zendesk[fmt.Sprintf("Zendesk-Ratelimit-E%07d", i)] = []string{"total=100; remaining=99; resets=41"}
	}
	return map[string]struct {
		f Format
		h http.Header
	}{
		"ietf list": {IETF, http.Header{
			"Ratelimit-Policy": {list(policy, ", ")},
			"Ratelimit":        {list(item, ", ")},
		}},
		"ietf lines": {IETF, http.Header{
			"Ratelimit-Policy": lines(policy),
			"Ratelimit":        lines(item),
		}},
		"ietf huge string": {IETF, http.Header{
			"Ratelimit-Policy": {`"` + strings.Repeat("a", size) + `";q=1`},
		}},
		"ietf many params": {IETF, http.Header{
			"Ratelimit-Policy": {"p" + list(func(i int) string { return fmt.Sprintf(";k%d=%d", i, i) }, "")},
		}},
		"ietf dictionary": {IETF, http.Header{
			"Ratelimit": {list(func(i int) string { return fmt.Sprintf("limit=%d", i+1) }, ", ")},
		}},
		"ietf separate": {IETF, http.Header{
			"Ratelimit-Limit":     {list(func(i int) string { return fmt.Sprintf("%d;w=%d", i, i+1) }, ", ")},
			"Ratelimit-Remaining": {list(func(i int) string { return fmt.Sprint(i) }, ", ")},
		}},
		"x-ratelimit list": {XRateLimit, http.Header{
			"X-Ratelimit-Limit":     {list(func(i int) string { return fmt.Sprint(i + 1) }, ", ")},
			"X-Ratelimit-Remaining": lines(func(i int) string { return fmt.Sprint(i) }),
			"X-Ratelimit-Reset":     {strings.Repeat("9", size)},
		}},
		"openai garbage": {OpenAI, http.Header{
			"X-Ratelimit-Reset-Requests": {strings.Repeat("1x", size/2)},
			"X-Ratelimit-Reset-Tokens":   {list(func(int) string { return "6m0s" }, ", ")},
			"X-Ratelimit-Limit-Tokens":   {list(func(i int) string { return fmt.Sprint(i) }, ",")},
		}},
		"anthropic garbage": {Anthropic, http.Header{
			"Anthropic-Ratelimit-Tokens-Reset": {strings.Repeat("2", size)},
		}},
		"zendesk headers": {Zendesk, zendesk},
		"zendesk pairs": {Zendesk, http.Header{
			"Zendesk-Ratelimit-Tickets": {list(func(i int) string { return fmt.Sprintf("total=%d", i) }, "; ")},
		}},
		"salesforce pairs": {Salesforce, http.Header{
			"Sforce-Limit-Info": {list(func(i int) string { return fmt.Sprintf("c%d=%d/5000", i, i) }, "; ")},
		}},
		"shopify list": {Shopify, http.Header{
			"X-Shopify-Shop-Api-Call-Limit": {list(func(i int) string { return fmt.Sprintf("%d/40", i%40) }, ", ")},
		}},
		"discord names": {Discord, http.Header{
			"X-Ratelimit-Bucket": {list(func(int) string { return "abc" }, ", ")},
			"X-Ratelimit-Global": lines(func(int) string { return "true" }),
		}},
	}
}

// allocated returns the bytes f allocates per call, over a few calls.
// Tests that use it must not run in parallel: the count is the process's.
func allocated(f func()) uint64 {
	const runs = 3
	f() // warm up lazily built tables
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / runs
}

// TestReadCountersCostBounded: what reading a response's counters
// allocates is bounded by a constant, whatever the size of its headers
// (2 MB here; the Go client accepts 10 MB). Not parallel: it counts the
// process's allocations.
func TestReadCountersCostBounded(t *testing.T) {
	const bound = 256 << 10
	for _, size := range []int{64 << 10, 2 << 20} {
		for name, tc := range hostileHeaders(size) {
			resp := &http.Response{StatusCode: 429, Header: tc.h}
			got := allocated(func() {
				rs, errs := ReadCounters(resp, tc.f, now)
				checkReadings(t, tc.f, rs, errs)
				if len(rs) > maxReadings || len(errs) > maxErrors+1 {
					t.Fatalf("%s: %d readings, %d errors", name, len(rs), len(errs))
				}
			})
			if got > bound {
				t.Errorf("%s, %d KiB of headers: ReadCounters allocates %d KiB, want at most %d KiB", name, size>>10, got>>10, bound>>10)
			}
			if got := allocated(func() { Classify(resp, nil, now) }); got > bound {
				t.Errorf("%s, %d KiB of headers: Classify allocates %d KiB, want at most %d KiB", name, size>>10, got>>10, bound>>10)
			}
		}
	}
}
