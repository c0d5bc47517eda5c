package backoff

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Verdict is what Classify reads from a response.
type Verdict struct {
	// Throttled reports that the response is the vendor's throttling
	// signal: it matched Signals.Rules (by default, any 429) and not
	// Signals.Ignore. A transport pauses the provider on it.
	Throttled bool

	// retryable reports, for Policy, that the request may be retried
	// whatever its method, once Delay has passed: because the vendor
	// refused it for rate without processing it (Throttled), or because
	// the vendor said so (retrySaid). When the vendor said nothing, it is
	// true exactly when Throttled is; whether a 5xx or a failed connection
	// may be retried then depends on the request, which Policy decides.
	retryable bool

	// retrySaid reports that the vendor said whether to retry, with
	// Stripe-Should-Retry or X-Should-Retry (see shouldRetry): then
	// retryable is its word, overriding the rules above. "true" makes an
	// error response (status 400 or more) retryable whatever its status
	// and method, e.g. Stripe's 409 lock_timeout or a 5xx to a POST;
	// "false" makes nothing retryable, a throttled response included
	// (which is still Throttled: the vendor throttled it). A "true" on a
	// success is not a reason to send it again. An Ignored response is
	// never retried, whatever the vendor says.
	retrySaid bool

	// Ignored reports that the response matched Signals.Ignore, or is a
	// billing stop (QuotaExhausted): it looks throttled but is not a rate
	// limit, so it is neither paused on nor retried. Throttled is false
	// and Delay is zero.
	Ignored bool

	// QuotaExhausted reports a billing stop (with Signals.Body
	// BodyOpenAI: OpenAI's 429 "insufficient_quota" with
	// error.code or error.type insufficient_quota): the account's quota or spend limit is used up,
	// and waiting does not help. Ignored is true too. A client should
	// report it as an error of its own, not as a throttle.
	QuotaExhausted bool

	// Global reports, with Signals.Body BodyDiscord, that the vendor said
	// the limit hit is the account's global one, not a route's: every
	// request of the account must wait, not only those like this one.
	Global bool

	// Err says why a throttled response's body, read by Signals.Body,
	// gave no signal (it wraps ErrMalformed): the headers decided
	// instead. Nil when the body was read or not needed.
	Err error

	// Delay is how long the vendor asked the client to wait, capped at
	// Signals.MaxDelay. Zero means either no usable delay (Source empty)
	// or the vendor's explicit "now" (Source set, e.g. Retry-After: 0).
	Delay time.Duration

	// Source names the header Delay came from, e.g. "Retry-After", or
	// "body retry_after" (Discord's body); empty when the vendor gave no
	// usable delay. It tells a zero Delay the
	// vendor asked for, which means "retry at once", from none at all,
	// which leaves the wait to the caller's defaults.
	Source string
}

// Standard delay headers, in the order Classify reads them after
// Signals.DelayHeaders.
const (
	headerRetryAfterMs    = "retry-after-ms"
	headerRetryAfter      = "Retry-After"
	headerResetAfter      = "X-RateLimit-Reset-After"
	headerReset           = "X-RateLimit-Reset"
	headerRemaining       = "X-RateLimit-Remaining"
	headerRateLimit       = "RateLimit"
	headerRateLimitPolicy = "RateLimit-Policy"
	headerRateLimitReset  = "RateLimit-Reset"
)

// Classify reads the throttling signals of resp by the rules of s (nil
// means the zero Signals: a 429 is throttled) at time now.
//
// Signals.Ignore is checked first: a match is Ignored, not Throttled and
// never retried, with no Delay. Then Signals.Rules, or the default 429,
// decide Throttled.
//
// The delay of a throttled response is read from the first of these
// headers that gives a positive delay: Signals.DelayHeaders in order,
// retry-after-ms (OpenAI; the same signal as Retry-After, finer),
// Retry-After, X-RateLimit-Reset-After (Discord), X-RateLimit-Reset
// (epoch or seconds, see below), RateLimit with RateLimit-Policy (IETF
// drafts), RateLimit-Reset (older drafts). X-RateLimit-Reset-After and
// X-RateLimit-Reset are skipped when X-RateLimit-Remaining is a positive
// number: the window they end is not the limit that throttled (GitHub's
// secondary limits), so DefaultDelay applies instead, unless a later
// header names a delay. A response that is not
// throttled only has its retry-after-ms and Retry-After read (a server may
// send them with a 503); the X-RateLimit-* and RateLimit fields describe
// the quota window on every response and only mean "wait" when the
// response is throttled. A number in X-RateLimit-Reset, RateLimit-Reset or
// a DelayHeaders header above 1e9 is a Unix time, any other is seconds
// from now. Malformed, negative, zero and past values are skipped; every
// delay is capped at Signals.MaxDelay. A throttled response with no usable
// delay gets Signals.DefaultDelay, if set (Source "default_delay").
//
// With Signals.Body BodyOpenAI, a billing stop (OpenAI's 429
// insufficient_quota) is
// checked before Signals.Ignore and is Ignored and QuotaExhausted. With
// BodyDiscord, a throttled 429's body is read first: a positive
// retry_after is the delay (Source "body retry_after"), before any header,
// since for a global limit the bucket headers describe the route, not the
// limit hit; global: true, X-RateLimit-Global: true or X-RateLimit-Scope:
// global set Global. A body that is not Discord's JSON, or a retry_after
// that is negative, huge or not a number, is Err, and the headers give the
// delay as without a body.
//
// Last, Stripe-Should-Retry and X-Should-Retry are read on any response
// that is not Ignored: the vendor's word on retrying, which Policy follows
// over its own rules.
//
// One zero is not skipped: a retry-after-ms or Retry-After of zero seconds
// ("0", "0.0") is the vendor saying "retry now" (RFC 9110 allows
// delay-seconds of 0). When no header gives a positive delay, it gives a
// zero Delay with that header as Source, and DefaultDelay does not apply.
// A positive delay in any header still wins over it: waiting longer than
// asked costs less than a retry the vendor refuses again.
//
// To match Rule.BodyContains, Classify reads at most MaxBodyPeek bytes of
// the body and then replaces resp.Body with a reader that yields the
// whole original body (the bytes read, then the rest) and closes the
// original body. It reads the body only when a rule with BodyContains has
// the response's status, or Signals.Body is set and the status is 429,
// and at most once however often it is called on the same response. Because it may replace resp.Body, it must not run
// concurrently with other uses of resp. A nil resp gives the zero
// Verdict. Classify never panics on what a server sends.
func Classify(resp *http.Response, s *Signals, now time.Time) Verdict {
	if resp == nil {
		return Verdict{}
	}
	var sig Signals
	if s != nil {
		sig = *s
	}
	if sig.Body == BodyOpenAI && openAIBillingStop(resp) {
		return Verdict{Ignored: true, QuotaExhausted: true}
	}
	m := matcher{resp: resp}
	for _, r := range sig.Ignore {
		if m.match(r) {
			return Verdict{Ignored: true}
		}
	}
	throttled := false
	if len(sig.Rules) == 0 {
		throttled = resp.StatusCode == http.StatusTooManyRequests
	}
	for _, r := range sig.Rules {
		if m.match(r) {
			throttled = true
			break
		}
	}
	v := Verdict{Throttled: throttled, retryable: throttled}
	if throttled && sig.Body == BodyDiscord {
		v.Delay, v.Source, v.Global, v.Err = discordSignal(resp, sig.maxDelay())
	}
	if v.Source == "" {
		v.Delay, v.Source = vendorDelay(resp.Header, &sig, throttled, now)
	}
	if throttled && v.Source == "" && sig.DefaultDelay > 0 {
		v.Delay, v.Source = sig.DefaultDelay, "default_delay"
		if max := sig.maxDelay(); max > 0 {
			v.Delay = min(v.Delay, max)
		}
	}
	if retry, ok := shouldRetry(resp.Header); ok {
		v.retrySaid = true
		v.retryable = retry && (throttled || resp.StatusCode >= 400)
	}
	return v
}

// Source of a delay read from Discord's body.
const sourceDiscordBody = "body retry_after"

// discordSignal reads a throttled response the Discord way: the delay
// from the body's retry_after (capped at max; none when max is 0 or it is
// not positive), whether the limit is global (the body, or the headers
// Discord sends with it), and why the body could not be read.
func discordSignal(resp *http.Response, max time.Duration) (time.Duration, string, bool, error) {
	dr, ok, err := readDiscordRateLimit(resp)
	global := dr.Global || strings.EqualFold(strings.TrimSpace(first(resp.Header, "X-RateLimit-Global")), "true") ||
		strings.EqualFold(strings.TrimSpace(first(resp.Header, "X-RateLimit-Scope")), "global")
	if !ok || dr.RetryAfter <= 0 || max <= 0 {
		return 0, "", global, err
	}
	return capDelay(dr.RetryAfter, max), sourceDiscordBody, global, nil
}

// vendorDelay returns the first positive delay in h, capped, and the name
// of its header, in the order Classify documents; failing that, a zero
// delay named by retry-after-ms or Retry-After ("retry now"), with that
// header's name.
func vendorDelay(h http.Header, s *Signals, throttled bool, now time.Time) (time.Duration, string) {
	max := s.maxDelay()
	if max <= 0 || len(h) == 0 {
		return 0, ""
	}
	if throttled {
		for _, name := range s.DelayHeaders {
			v := first(h, name)
			d, ok := parseAny(v, now)
			if strings.EqualFold(name, headerRetryAfterMs) {
				// Its number is milliseconds, not seconds.
				d, ok = parseMillis(v)
			}
			if ok {
				return capDelay(d, max), name
			}
		}
	}
	zero := "" // the first header that said "retry now"
	ms := first(h, headerRetryAfterMs)
	if d, ok := parseMillis(ms); ok {
		return capDelay(d, max), headerRetryAfterMs
	} else if isZero(ms) {
		zero = headerRetryAfterMs
	}
	ra := first(h, headerRetryAfter)
	if d, ok := parseRetryAfter(ra, now); ok {
		return capDelay(d, max), headerRetryAfter
	} else if zero == "" && isZero(ra) {
		zero = headerRetryAfter
	}
	if !throttled {
		return 0, zero
	}
	if !requestsLeft(h) {
		if d, ok := parseSeconds(first(h, headerResetAfter)); ok {
			return capDelay(d, max), headerResetAfter
		}
		if d, ok := parseReset(first(h, headerReset), now); ok {
			return capDelay(d, max), headerReset
		}
	}
	if d, ok := rateLimitDelay(joined(h, headerRateLimit), joined(h, headerRateLimitPolicy), now); ok {
		return capDelay(d, max), headerRateLimit
	}
	if d, ok := parseReset(first(h, headerRateLimitReset), now); ok {
		return capDelay(d, max), headerRateLimitReset
	}
	return 0, zero
}

// requestsLeft reports that X-RateLimit-Remaining says the window still
// has requests left: the response was throttled by another limit, so the
// window's reset (X-RateLimit-Reset, X-RateLimit-Reset-After) says nothing
// about when that limit admits again. GitHub sends these on every
// response, its secondary limits' 403s included, where the reset may be
// seconds away and retrying then draws another 403.
func requestsLeft(h http.Header) bool {
	n, err := strconv.ParseInt(strings.TrimSpace(first(h, headerRemaining)), 10, 64)
	return err == nil && n > 0
}

// first returns the first value of header name, as go-retryablehttp and
// most clients read a repeated Retry-After.
func first(h http.Header, name string) string {
	if name == "" {
		return ""
	}
	if v := h.Values(name); len(v) > 0 {
		return v[0]
	}
	return ""
}

// joined returns all values of header name joined by commas, as RFC 8941
// requires of a Structured Field sent on several lines, cut after
// maxSFBytes+1 bytes: parseSF reads no more than maxSFBytes, and the one
// byte beyond tells it that the field was cut. So a field of megabytes
// costs no more than one of 16 KiB.
func joined(h http.Header, name string) string {
	const n = maxSFBytes + 1
	vs := h.Values(name)
	if len(vs) == 1 {
		return vs[0][:min(len(vs[0]), n)]
	}
	size := 0
	for _, v := range vs {
		if size += len(v) + 2; size >= n {
			break
		}
	}
	var b strings.Builder
	b.Grow(min(size, n+2))
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v[:min(len(v), max(n-b.Len(), 0))])
		if b.Len() >= n {
			break
		}
	}
	s := b.String()
	return s[:min(len(s), n)]
}

// matcher matches rules against one response, reading its body at most
// once.
type matcher struct {
	resp   *http.Response
	peeked bool
	body   []byte
}

// match reports whether every set field of r matches the response.
func (m *matcher) match(r Rule) bool {
	if r.Status == 0 || m.resp.StatusCode != r.Status {
		return false
	}
	if r.Header != "" {
		vals := m.resp.Header.Values(r.Header)
		if len(vals) == 0 {
			return false
		}
		if want := strings.TrimSpace(r.HeaderValue); want != "" {
			found := false
			for _, v := range vals {
				if strings.EqualFold(strings.TrimSpace(v), want) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
	}
	if r.BodyContains != "" {
		if !m.peeked {
			m.body, m.peeked = peekBody(m.resp), true
		}
		if !bytes.Contains(m.body, []byte(r.BodyContains)) {
			return false
		}
	}
	return true
}

// peekedBody is the body Classify leaves on a response it has read: the
// bytes it read, then the rest of the original body; Close closes the
// original. peek is kept so that a later Classify of the same response
// (go-retryablehttp calls Backoff after draining the body) sees the same
// bytes.
type peekedBody struct {
	peek []byte
	r    io.Reader
	c    io.Closer
}

func (b *peekedBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *peekedBody) Close() error               { return b.c.Close() }

// errReader fails every Read with err: it stands for the rest of a body
// whose read failed while peeking, so the caller sees the same failure.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// peekBody returns at most MaxBodyPeek bytes from the start of resp.Body
// and restores resp.Body to yield the whole original body. A body no
// longer than MaxBodyPeek is read to its end, so its connection is free
// for the next request however little of it the caller reads.
func peekBody(resp *http.Response) []byte {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	if b, ok := resp.Body.(*peekedBody); ok {
		return b.peek
	}
	orig := resp.Body
	// One byte more than the peek: a body of exactly MaxBodyPeek bytes is
	// then read to its end, which lets its connection be reused.
	buf, err := io.ReadAll(io.LimitReader(orig, MaxBodyPeek+1))
	var rest io.Reader = orig
	switch {
	case err != nil:
		rest = errReader{err}
	case len(buf) <= MaxBodyPeek:
		rest = bytes.NewReader(nil) // the body ended; don't read it again
	}
	peek := buf[:min(len(buf), MaxBodyPeek)]
	resp.Body = &peekedBody{peek: peek, r: io.MultiReader(bytes.NewReader(buf), rest), c: orig}
	return peek
}
