package backoff

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// DefaultMaxDelay caps any vendor-supplied delay when [Signals.MaxDelay] is
// zero.
//
// Ten minutes is longer than the windows of the per-second and per-minute
// limits that produce nearly all 429s, so an honest Retry-After is honoured
// in full, yet short enough that a buggy or hostile header (a Retry-After of
// a year, an epoch misread as seconds-until) cannot park a request, or pause
// a provider fleet-wide, for longer than an operator would notice. Vendors
// whose resets are longer (GitHub's hourly window, daily quotas) are better
// served by failing fast and letting the limiter's own calendar windows hold
// requests back; set MaxDelay explicitly to wait longer.
const DefaultMaxDelay = 10 * time.Minute

// Signals says how a vendor tells a client it is throttled. The zero value
// means: 429 is throttled, delays come from the standard headers, capped at
// DefaultMaxDelay. A nil *Signals means the same as the zero value.
type Signals struct {
	// Rules lists the responses that mean "throttled". Empty means the
	// default: any 429. A non-empty list replaces the default, so a vendor
	// that signals with a 403 as well lists {Status: 429} too.
	Rules []Rule

	// Ignore lists responses that look throttled but are not retryable,
	// e.g. OpenAI's 429 with body "insufficient_quota" (a billing problem,
	// not a rate limit). Ignore is checked before Rules.
	Ignore []Rule

	// DelayHeaders names extra headers to read a delay from, in order,
	// before the standard ones (e.g. "x-ratelimit-reset-requests").
	// Each value may be delay-seconds (integer or decimal), an HTTP-date,
	// an RFC 3339 timestamp, a Go-like duration ("6m0s", "12ms") or an
	// epoch in seconds (a number greater than 1e9); retry-after-ms, by
	// name, is a number of milliseconds.
	DelayHeaders []string

	// DefaultDelay is the delay of a throttled response that names none.
	// Zero means none: the transport pauses briefly and the retry policy
	// backs off exponentially. GitHub asks for at least a minute after a
	// secondary rate limit response without Retry-After or reset headers.
	DefaultDelay time.Duration

	// MaxDelay caps any vendor-supplied delay. Zero means DefaultMaxDelay.
	// A negative value means the vendor's delays are not trusted at all:
	// Classify reports none, and Policy falls back to exponential backoff.
	MaxDelay time.Duration

	// Body names how the vendor's 429 bodies say more than the headers:
	// BodyDiscord or BodyOpenAI; empty means they are not read. See
	// Classify.
	Body string
}

// The vendors whose 429 bodies Classify reads (Signals.Body).
const (
	// BodyDiscord: retry_after (decimal seconds) is the delay, before any
	// header, and global: true (or X-RateLimit-Global: true, or
	// X-RateLimit-Scope: global) says the bot's global limit was hit
	// (Verdict.Global).
	BodyDiscord = "discord"
	// BodyOpenAI: a 429 with error code or type "insufficient_quota" is a
	// billing stop, not a throttle (Verdict.QuotaExhausted).
	BodyOpenAI = "openai"
)

// A Rule matches a response: all set fields must match.
type Rule struct {
	// Status is the response status code. It is required: a rule with
	// Status 0 matches nothing.
	Status int

	// Header, when set, names a header that must be present...
	Header string

	// ...with this value, compared trimmed and case-insensitively.
	// Empty means any value. Ignored when Header is empty.
	HeaderValue string

	// BodyContains, when set, is a substring that must occur in the first
	// 64 KiB of the response body (see MaxBodyPeek). The comparison is
	// case-sensitive.
	BodyContains string
}

// MaxBodyPeek is how many bytes of a response body Classify reads to match
// [Rule.BodyContains]. The body is restored afterwards, so the caller still
// reads all of it.
const MaxBodyPeek = 64 << 10

// maxDelay returns the effective cap of s.
func (s *Signals) maxDelay() time.Duration {
	if s == nil || s.MaxDelay == 0 {
		return DefaultMaxDelay
	}
	if s.MaxDelay < 0 {
		return 0
	}
	return s.MaxDelay
}

// ErrInvalidSignals is wrapped by every error Validate returns.
var ErrInvalidSignals = errors.New("backoff: invalid signals")

// Validate reports every problem in s at once, joined (errors.Join), each
// wrapping ErrInvalidSignals and naming the field, e.g.
// "Rules[1].Status: 0 is not an HTTP status (want 100-599)". A nil or zero
// Signals is valid. Classify never fails on invalid Signals: a rule that
// cannot match simply matches nothing.
func (s *Signals) Validate() error {
	if s == nil {
		return nil
	}
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidSignals, field, fmt.Sprintf(format, args...)))
	}
	check := func(list string, rules []Rule) {
		for i, r := range rules {
			f := fmt.Sprintf("%s[%d]", list, i)
			if r.Status < 100 || r.Status > 599 {
				add(f+".Status", "%d is not an HTTP status (want 100-599)", r.Status)
			}
			if r.Header != "" && !validHeaderName(r.Header) {
				add(f+".Header", "%q is not a valid header name", r.Header)
			}
			if r.Header == "" && r.HeaderValue != "" {
				add(f+".HeaderValue", "%q is set but Header is empty (name the header it belongs to)", r.HeaderValue)
			}
			if len(r.BodyContains) > MaxBodyPeek {
				add(f+".BodyContains", "%d bytes long, more than the %d bytes of body read", len(r.BodyContains), MaxBodyPeek)
			}
		}
	}
	check("Rules", s.Rules)
	check("Ignore", s.Ignore)
	switch s.Body {
	case "", BodyDiscord, BodyOpenAI:
	default:
		add("Body", "%q is not a body format (want %q or %q)", s.Body, BodyDiscord, BodyOpenAI)
	}
	if s.DefaultDelay < 0 {
		add("DefaultDelay", "%v is negative", s.DefaultDelay)
	}
	for i, h := range s.DelayHeaders {
		if !validHeaderName(h) {
			add(fmt.Sprintf("DelayHeaders[%d]", i), "%q is not a valid header name", h)
		}
	}
	return errors.Join(errs...)
}

// validHeaderName reports whether name is an RFC 9110 token, the syntax of
// a header field name.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
