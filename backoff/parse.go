package backoff

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// The delay parsers below read one header value each. They take the
// current time as a parameter, never read the clock, never panic, and
// report ok only for a positive delay: a value that is empty, malformed,
// negative, zero or in the past gives (0, false). A value too large for a
// time.Duration saturates at maxDuration rather than wrapping negative;
// callers cap it with capDelay.

// maxDuration is the largest time.Duration.
const maxDuration = time.Duration(math.MaxInt64)

// epochThreshold tells an epoch from a delay in headers that carry either
// (X-RateLimit-Reset): a number of seconds larger than this (2001-09-09) is
// a Unix time, anything smaller is seconds from now. No vendor asks a
// client to wait 31 years.
const epochThreshold = 1_000_000_000

// maxWhole bounds the integer part parseDecimal returns. It is far beyond
// any useful delay or epoch (about 31 million years in seconds) yet small
// enough that time.Unix and Duration arithmetic on it cannot overflow.
const maxWhole = 1_000_000_000_000_000

// parseDecimal parses 1*DIGIT [ "." 1*DIGIT ], the form of delay-seconds
// plus the decimals vendors send (Shopify's "2.0", Discord's "64.57").
// It returns the integer part, saturated at maxWhole, and the fraction in
// billionths (digits past the ninth are dropped). Signs, exponents,
// "Inf", "NaN", hex and surrounding garbage are rejected; the caller trims
// white space.
func parseDecimal(s string) (whole uint64, frac int64, ok bool) {
	i := 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		if whole < maxWhole {
			whole = whole*10 + uint64(s[i]-'0')
		}
	}
	if i == 0 {
		return 0, 0, false
	}
	if whole > maxWhole {
		whole = maxWhole
	}
	if i == len(s) {
		return whole, 0, true
	}
	if s[i] != '.' || i+1 == len(s) {
		return 0, 0, false
	}
	scale := int64(100_000_000)
	for i++; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, 0, false
		}
		frac += int64(s[i]-'0') * scale
		scale /= 10
	}
	return whole, frac, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scale returns (whole + frac/1e9) * unit, saturating at maxDuration.
func scale(whole uint64, frac int64, unit time.Duration) time.Duration {
	if unit <= 0 {
		return 0
	}
	if whole > uint64(maxDuration/unit) {
		return maxDuration
	}
	d := time.Duration(whole) * unit
	f := time.Duration(float64(frac) / 1e9 * float64(unit))
	if f < 0 || d > maxDuration-f {
		return maxDuration
	}
	return d + f
}

// positive turns a parsed duration into the parsers' (delay, ok) result.
func positive(d time.Duration) (time.Duration, bool) {
	if d <= 0 {
		return 0, false
	}
	return d, true
}

// until returns the delay from now until t, saturating rather than
// overflowing (time.Time.Sub saturates).
func until(t, now time.Time) (time.Duration, bool) {
	return positive(t.Sub(now))
}

// parseSeconds reads a non-negative number of seconds, integer or decimal.
func parseSeconds(v string) (time.Duration, bool) {
	whole, frac, ok := parseDecimal(strings.TrimSpace(v))
	if !ok {
		return 0, false
	}
	return positive(scale(whole, frac, time.Second))
}

// parseRetryAfter reads a Retry-After value (RFC 9110 section 10.2.3):
// delay-seconds, or an HTTP-date in any of its three forms (IMF-fixdate,
// RFC 850, asctime). Decimal seconds ("2.0", Shopify) are accepted too.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigit(v[0]) {
		return parseSeconds(v)
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return until(t, now)
}

// isZero reports whether v is a number of (milli)seconds equal to zero:
// "0", "000", "0.0". The parsers above skip it as no delay; in
// Retry-After and retry-after-ms it is the vendor's "retry now".
func isZero(v string) bool {
	whole, frac, ok := parseDecimal(strings.TrimSpace(v))
	return ok && whole == 0 && frac == 0
}

// parseMillis reads a non-negative number of milliseconds, integer or
// decimal, as OpenAI's retry-after-ms carries.
func parseMillis(v string) (time.Duration, bool) {
	whole, frac, ok := parseDecimal(strings.TrimSpace(v))
	if !ok {
		return 0, false
	}
	return positive(scale(whole, frac, time.Millisecond))
}

// parseReset reads an X-RateLimit-Reset value, which vendors disagree on:
// Unix epoch seconds (GitHub, SendGrid, Intercom; Discord with decimals)
// or seconds from now (Zendesk). A value above epochThreshold is an
// epoch.
func parseReset(v string, now time.Time) (time.Duration, bool) {
	whole, frac, ok := parseDecimal(strings.TrimSpace(v))
	if !ok {
		return 0, false
	}
	if whole > epochThreshold || (whole == epochThreshold && frac > 0) {
		return until(time.Unix(int64(whole), frac), now)
	}
	return positive(scale(whole, frac, time.Second))
}

// durationUnits are the units of Go's duration syntax, longest first where
// one is a prefix of another.
var durationUnits = []struct {
	name string
	unit time.Duration
}{
	{"ns", time.Nanosecond},
	{"us", time.Microsecond},
	{"µs", time.Microsecond}, // U+00B5
	{"μs", time.Microsecond}, // U+03BC
	{"ms", time.Millisecond},
	{"s", time.Second},
	{"m", time.Minute},
	{"h", time.Hour},
}

// parseGoDuration reads a duration in Go's syntax without a sign, as
// OpenAI's x-ratelimit-reset-requests carries ("1s", "6m0s", "12ms",
// "1h2m3.5s"). Unlike time.ParseDuration it saturates instead of failing
// on overflow, and it rejects negative values.
func parseGoDuration(v string) (time.Duration, bool) {
	s := strings.TrimSpace(v)
	if s == "0" {
		return 0, false
	}
	if s == "" {
		return 0, false
	}
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && (isDigit(s[i]) || s[i] == '.') {
			i++
		}
		num := s[:i]
		if num == "." {
			return 0, false
		}
		if strings.HasPrefix(num, ".") {
			num = "0" + num
		}
		whole, frac, ok := parseDecimal(strings.TrimSuffix(num, "."))
		if !ok {
			return 0, false
		}
		s = s[i:]
		var unit time.Duration
		for _, u := range durationUnits {
			if strings.HasPrefix(s, u.name) {
				unit, s = u.unit, s[len(u.name):]
				break
			}
		}
		if unit == 0 {
			return 0, false
		}
		d := scale(whole, frac, unit)
		if total > maxDuration-d {
			total = maxDuration
		} else {
			total += d
		}
	}
	return positive(total)
}

// parseRFC3339 reads an RFC 3339 timestamp, as Anthropic's
// anthropic-ratelimit-*-reset headers carry, as a delay from now.
func parseRFC3339(v string, now time.Time) (time.Duration, bool) {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	if err != nil {
		return 0, false
	}
	return until(t, now)
}

// parseAny reads a vendor-specific delay header named in
// Signals.DelayHeaders, whose format is not known in advance. It tries, in
// order: a number (seconds, or an epoch above epochThreshold), a Go
// duration, an RFC 3339 timestamp, an HTTP-date.
func parseAny(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if _, _, ok := parseDecimal(v); ok {
		return parseReset(v, now)
	}
	if d, ok := parseGoDuration(v); ok {
		return d, true
	}
	if d, ok := parseRFC3339(v, now); ok {
		return d, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return until(t, now)
	}
	return 0, false
}

// capDelay bounds d to [0, max].
func capDelay(d, max time.Duration) time.Duration {
	if d <= 0 || max <= 0 {
		return 0
	}
	if d > max {
		return max
	}
	return d
}
