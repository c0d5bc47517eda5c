package backoff

import (
	"strconv"
	"testing"
	"time"
)

// now is the fixed clock of every test in this package.
var now = time.Date(2026, time.November, 21, 6, 0, 0, 0, time.UTC)

// delayCase is one row of a parser table: the input and the delay wanted,
// with ok false meaning "no delay".
type delayCase struct {
	name string
	in   string
	want time.Duration
	ok   bool
}

// runDelay runs a parser table against fixed now.
func runDelay(t *testing.T, parse func(string, time.Time) (time.Duration, bool), cases []delayCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parse(tc.in, now)
			if got != tc.want || ok != tc.ok {
				t.Errorf("parse(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
			}
			if got < 0 {
				t.Errorf("parse(%q) = %v: negative", tc.in, got)
			}
		})
	}
}

// noNow adapts a parser that does not need the clock.
func noNow(f func(string) (time.Duration, bool)) func(string, time.Time) (time.Duration, bool) {
	return func(s string, _ time.Time) (time.Duration, bool) { return f(s) }
}

func TestParseDecimal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in    string
		whole uint64
		frac  int64
		ok    bool
	}{
		{"0", 0, 0, true},
		{"2", 2, 0, true},
		{"2.0", 2, 0, true},
		{"64.57", 64, 570_000_000, true},
		{"0.000000001", 0, 1, true},
		{"1.1234567899", 1, 123_456_789, true}, // tenth digit dropped
		{"007", 7, 0, true},
		{"99999999999999999999", maxWhole, 0, true},
		{"", 0, 0, false},
		{".5", 0, 0, false},
		{"5.", 0, 0, false},
		{"-1", 0, 0, false},
		{"+1", 0, 0, false},
		{"1e3", 0, 0, false},
		{"Inf", 0, 0, false},
		{"NaN", 0, 0, false},
		{"0x10", 0, 0, false},
		{"1.2.3", 0, 0, false},
		{" 1", 0, 0, false},
		{"1 ", 0, 0, false},
		{"1,5", 0, 0, false},
	}
	for _, tc := range cases {
		whole, frac, ok := parseDecimal(tc.in)
		if whole != tc.whole || frac != tc.frac || ok != tc.ok {
			t.Errorf("parseDecimal(%q) = %d, %d, %v; want %d, %d, %v", tc.in, whole, frac, ok, tc.whole, tc.frac, tc.ok)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	runDelay(t, parseRetryAfter, []delayCase{
		{"integer seconds", "120", 120 * time.Second, true},
		{"white space", "  30 ", 30 * time.Second, true},
		{"Notion integer", "1", time.Second, true},
		{"Shopify decimal", "2.0", 2 * time.Second, true},
		{"decimal fraction", "0.5", 500 * time.Millisecond, true},
		{"Discord integer", "65", 65 * time.Second, true},
		{"zero is no delay", "0", 0, false},
		{"IMF-fixdate", "Sat, 21 Nov 2026 06:00:30 GMT", 30 * time.Second, true},
		{"RFC 850", "Saturday, 21-Nov-26 06:01:00 GMT", time.Minute, true},
		{"asctime", "Sat Nov 21 06:02:00 2026", 2 * time.Minute, true},
		{"date now", "Sat, 21 Nov 2026 06:00:00 GMT", 0, false},
		{"date in the past", "Fri, 20 Nov 2026 06:00:00 GMT", 0, false},
		{"date far future saturates", "Fri, 31 Dec 9999 23:59:59 GMT", maxDuration, true},
		{"huge saturates", "99999999999999999999", maxDuration, true},
		{"overflowing int64 seconds", "9223372037", maxDuration, true},
		{"just below overflow", "9223372035", 9223372035 * time.Second, true},
		{"negative", "-5", 0, false},
		{"plus sign", "+5", 0, false},
		{"exponent", "1e3", 0, false},
		{"garbage", "soon", 0, false},
		{"empty", "", 0, false},
		{"two values", "5, 10", 0, false},
		{"unit", "5s", 0, false},
		{"trailing dot", "5.", 0, false},
		{"Go date", "2026-11-21T06:00:30Z", 0, false}, // not a Retry-After form
	})
}

func TestParseMillis(t *testing.T) {
	t.Parallel()
	runDelay(t, noNow(parseMillis), []delayCase{
		{"OpenAI", "1500", 1500 * time.Millisecond, true},
		{"decimal", "20.5", 20500 * time.Microsecond, true},
		{"zero", "0", 0, false},
		{"negative", "-1", 0, false},
		{"huge saturates", "99999999999999999999", maxDuration, true},
		{"garbage", "1500ms", 0, false},
		{"empty", "", 0, false},
	})
}

func TestParseReset(t *testing.T) {
	t.Parallel()
	epoch := now.Unix()
	runDelay(t, parseReset, []delayCase{
		{"GitHub epoch", itoa(epoch + 1800), 30 * time.Minute, true},
		{"SendGrid epoch", itoa(epoch + 60), time.Minute, true},
		{"Discord decimal epoch", itoa(epoch+64) + ".570", 64570 * time.Millisecond, true},
		{"Zendesk seconds until", "45", 45 * time.Second, true},
		{"seconds decimal", "1.25", 1250 * time.Millisecond, true},
		{"threshold is seconds", "1000000000", 1_000_000_000 * time.Second, true},
		{"just past threshold is an epoch (long past)", "1000000001", 0, false},
		{"epoch in the past", itoa(epoch - 5), 0, false},
		{"epoch now", itoa(epoch), 0, false},
		{"epoch far future saturates", "99999999999999999999", maxDuration, true},
		{"zero", "0", 0, false},
		{"negative", "-30", 0, false},
		{"garbage", "tomorrow", 0, false},
		{"empty", "", 0, false},
	})
}

func TestParseSeconds(t *testing.T) {
	t.Parallel()
	runDelay(t, noNow(parseSeconds), []delayCase{
		{"Discord reset-after", "64.57", 64570 * time.Millisecond, true},
		{"integer", "3", 3 * time.Second, true},
		{"zero", "0.000", 0, false},
		{"negative", "-0.5", 0, false},
		{"garbage", "x", 0, false},
	})
}

func TestParseGoDuration(t *testing.T) {
	t.Parallel()
	runDelay(t, noNow(parseGoDuration), []delayCase{
		{"OpenAI seconds", "1s", time.Second, true},
		{"OpenAI minutes", "6m0s", 6 * time.Minute, true},
		{"OpenAI millis", "12ms", 12 * time.Millisecond, true},
		{"decimal", "17.28s", 17280 * time.Millisecond, true},
		{"mixed", "1h2m3.5s", time.Hour + 2*time.Minute + 3500*time.Millisecond, true},
		{"micro sign", "5µs", 5 * time.Microsecond, true},
		{"greek mu", "5μs", 5 * time.Microsecond, true},
		{"us", "5us", 5 * time.Microsecond, true},
		{"ns", "7ns", 7, true},
		{"leading dot", ".5s", 500 * time.Millisecond, true},
		{"overflow saturates", "9999999999999h", maxDuration, true},
		{"sum saturates", "2562047h2562047h", maxDuration, true},
		{"zero", "0", 0, false},
		{"zero with unit", "0s", 0, false},
		{"negative", "-1s", 0, false},
		{"no unit", "5", 0, false},
		{"unknown unit", "5d", 0, false},
		{"dot alone", ".s", 0, false},
		{"empty", "", 0, false},
		{"trailing garbage", "1sx", 0, false},
	})
}

func TestParseRFC3339(t *testing.T) {
	t.Parallel()
	runDelay(t, parseRFC3339, []delayCase{
		{"Anthropic", "2026-11-21T06:00:30Z", 30 * time.Second, true},
		{"fraction", "2026-11-21T06:00:00.250Z", 250 * time.Millisecond, true},
		{"offset", "2026-11-21T07:01:00+01:00", time.Minute, true},
		{"past", "2026-11-21T05:59:59Z", 0, false},
		{"not a date", "2026-13-40T99:00:00Z", 0, false},
		{"garbage", "soon", 0, false},
	})
}

func TestParseAny(t *testing.T) {
	t.Parallel()
	runDelay(t, parseAny, []delayCase{
		{"seconds", "20", 20 * time.Second, true},
		{"epoch", itoa(now.Unix() + 90), 90 * time.Second, true},
		{"Go duration", "6m0s", 6 * time.Minute, true},
		{"RFC 3339", "2026-11-21T06:00:30Z", 30 * time.Second, true},
		{"HTTP-date", "Sat, 21 Nov 2026 06:00:30 GMT", 30 * time.Second, true},
		{"garbage", "later", 0, false},
		{"empty", " ", 0, false},
	})
}

func TestCapDelay(t *testing.T) {
	t.Parallel()
	cases := []struct{ d, max, want time.Duration }{
		{5 * time.Second, time.Minute, 5 * time.Second},
		{time.Hour, time.Minute, time.Minute},
		{maxDuration, DefaultMaxDelay, DefaultMaxDelay},
		{-time.Second, time.Minute, 0},
		{time.Second, 0, 0},
	}
	for _, tc := range cases {
		if got := capDelay(tc.d, tc.max); got != tc.want {
			t.Errorf("capDelay(%v, %v) = %v, want %v", tc.d, tc.max, got, tc.want)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
