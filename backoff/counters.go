package backoff

import (
	"errors"
	"fmt"
	"iter"
	"net/http"
	"sort"
	"strings"
	"time"
)

// This file reads the counters vendors publish on every response (how
// much of a quota is left and when it is full again), so that a fleet can
// reconcile its own state with the vendor's instead of learning only from
// 429s. The readers are pure: they take the current time as a parameter,
// never read the clock, never panic, and report every malformed field as
// an error without giving up on the others.

// A Reading is one vendor counter as a response reports it. Each value
// comes with a Has flag, because vendors send any subset of them; the zero
// Reading reports nothing.
type Reading struct {
	// Counter names the counter within its Format, as the vendor names
	// it where it does (GitHub's X-RateLimit-Resource "core" or "search",
	// an IETF policy name, Discord's bucket, a Salesforce limit name) and
	// by a fixed name otherwise ("requests" and "tokens" for OpenAI,
	// "interval" and "daily" for HubSpot, "default" for a format's single
	// unnamed counter). See [Format] for each format's names.
	Counter string

	// Limit is the counter's capacity in the vendor's units (requests,
	// tokens, cost points) per window. Zero is a real value: the vendor
	// allows nothing. Valid when HasLimit.
	Limit    int64
	HasLimit bool

	// Remaining is what is left of Limit now, never negative and, when
	// HasLimit, never above Limit. Valid when HasRemaining.
	Remaining    int64
	HasRemaining bool

	// Reset is the time from now until the counter is full again (a
	// bucket) or its window starts over (a window). Zero means the
	// vendor's reset is now or already past: the counter should be full,
	// however Remaining reads. Valid when HasReset.
	Reset    time.Duration
	HasReset bool

	// Window is the counter's period where the response states it: the
	// IETF w= parameter, HubSpot's X-HubSpot-RateLimit-Interval-
	// Milliseconds, 24 h for a counter the vendor calls daily (HubSpot's
	// X-HubSpot-RateLimit-Daily, Salesforce's api-usage). Zero means not
	// stated.
	Window time.Duration

	// Scope is the vendor's word for who shares the counter, where it
	// gives one: Discord's X-RateLimit-Scope ("user", "global",
	// "shared"), or "global" when X-RateLimit-Global is true. Empty
	// otherwise.
	Scope string
}

// Errors the counter readers return, each wrapped with the header (or body
// field), its value and what is wrong, e.g.
// `backoff: malformed counter field: X-RateLimit-Remaining: "-1": negative`.
var (
	// ErrMalformed: the field could not be read and is left out of the
	// reading (a reading left with no value is dropped).
	ErrMalformed = errors.New("backoff: malformed counter field")

	// ErrInconsistent: the field was read but contradicts itself or
	// another field; the reading carries the most restrictive value,
	// which the error names.
	ErrInconsistent = errors.New("backoff: inconsistent counter field")

	// ErrUnknownFormat: ReadCounters was given a Format it does not know.
	ErrUnknownFormat = errors.New("backoff: unknown counter format")
)

// Bounds on what a reading may hold. Values beyond them are rejected with
// ErrMalformed rather than saturated: a saturated count or reset would give
// a buggy or hostile header its largest possible effect (a huge Remaining
// lets everything through, a huge Reset holds everything back).
const (
	// maxCount is the largest count accepted: 10^15 - 1, far above any
	// quota seen (OpenAI's per-minute token limits reach 10^8) and small
	// enough that sums and differences of counts cannot overflow.
	maxCount = maxWhole - 1

	// maxReset is the longest reset or window accepted. No vendor in
	// VENDORS.md publishes a counter longer than a day (Salesforce's
	// rolling 24 h, HubSpot's daily); a year leaves room for monthly
	// quotas yet rejects a Unix time in milliseconds read as seconds
	// (tens of thousands of years ahead).
	maxReset = 366 * 24 * time.Hour

	// maxName is the longest counter name accepted from a response.
	maxName = 64

	// maxReadings and maxErrors bound what one response can produce. No
	// vendor sends more than a handful of counters; a response with
	// thousands of them (an IETF field of thousands of policies) is an
	// attack or a bug, whose cost must not grow with its size.
	maxReadings = 64
	maxErrors   = 16

	// maxValues bounds the comma-separated values read of one header,
	// and the ";"-separated pairs: a proxy may fold a repeated header
	// into a few, never into thousands.
	maxValues = 16

	// maxValue is the longest value parsed as a reset: an RFC 3339 time
	// or a Go duration is a few dozen bytes, and the standard library's
	// errors copy the whole of what they could not parse.
	maxValue = 64

	// defaultCounter names the single unnamed counter of a format.
	defaultCounter = "default"
)

// ReadCounters reads the counters that resp reports in format f at time
// now. It returns one Reading per counter the response reports at least
// one value of (Limit, Remaining or Reset), in a fixed order per format,
// and one error per malformed or inconsistent field, each wrapping
// ErrMalformed or ErrInconsistent. A bad field never stops the others
// from being read. A response yields at most 64 readings and 16 errors
// (then one more error counting those left out), and costs about as much
// to read, whatever its size: see "What is read" below. A nil resp gives
// nothing; an unknown f gives an error wrapping ErrUnknownFormat.
//
// The rules every format follows:
//
//   - Counts are decimal digits, with an optional fraction (rounded
//     towards the more restrictive side: a limit or remaining down, a used
//     count up). A sign, exponent or other text is malformed; so is a
//     count of 10^15 or more.
//   - A header present with an empty value counts as absent.
//   - A header sent several times, or with comma-separated values (as a
//     proxy may fold repeated lines), is read up to its 16th value:
//     equal values are one value; different values give the most
//     restrictive (the smallest limit or remaining, the largest used
//     count, the latest reset) and an ErrInconsistent error. Counter names (GitHub's resource, Discord's
//     bucket) must agree, or the reading is dropped: its numbers cannot be
//     told apart.
//   - A Remaining above Limit is lowered to Limit, with ErrInconsistent. A
//     used count above the limit is Remaining 0, without error (Salesforce
//     lets an org run over its allocation).
//   - A reset at or before now is Reset 0 with HasReset: the counter is
//     due to be full, and a clock slightly ahead of the vendor's should
//     not make the reading forget that. A reset or window more than a year
//     ahead is malformed.
//   - Header names match whatever case the server sent (net/http
//     canonicalises them).
//
// What is read: up to 16 values (or ";"-separated pairs) of a header; of
// an IETF Structured Field, up to 64 items in its first 16 KiB (an item
// that runs past them is left out whole, never read cut short; an item of
// more than 16 parameters makes the field malformed); the first 64
// Zendesk-RateLimit-* headers in the order of their names; resets of up
// to 64 bytes. What is left out is reported as an error wrapping
// ErrMalformed.
//
// For [ShopifyGraphQL] it reads the body, at most [MaxBodyPeek] bytes of
// it, and gives the whole body back in resp.Body as [Classify] does; so it
// must not run concurrently with other uses of resp.
func ReadCounters(resp *http.Response, f Format, now time.Time) ([]Reading, []error) {
	if resp == nil {
		return nil, nil
	}
	read, ok := formatReaders[f]
	if !ok {
		return nil, []error{fmt.Errorf("%w: %v", ErrUnknownFormat, f)}
	}
	r := &reader{h: resp.Header, now: now}
	read(r, resp)
	if len(r.readings) > maxReadings {
		r.malformed("response", fmt.Sprint(len(r.readings)), fmt.Sprintf("more than %d counters; the rest left out", maxReadings))
		r.readings = r.readings[:maxReadings]
	}
	if r.dropped > 0 {
		r.errs = append(r.errs, fmt.Errorf("%w: %d more errors left out", ErrMalformed, r.dropped))
	}
	return r.readings, r.errs
}

// reader accumulates the readings and errors of one response.
type reader struct {
	h        http.Header
	now      time.Time
	readings []Reading
	errs     []error
	dropped  int // errors past maxErrors
}

// maxQuoted bounds how much of a bad value an error quotes: a header can
// be kilobytes long.
const maxQuoted = 40

// quote returns v quoted for an error message, cut to maxQuoted bytes.
func quote(v string) string {
	if len(v) > maxQuoted {
		return fmt.Sprintf("%q...", v[:maxQuoted])
	}
	return fmt.Sprintf("%q", v)
}

// malformed records that field (with value v) could not be read.
func (r *reader) malformed(field, v, why string) {
	if r.full() {
		return
	}
	r.errs = append(r.errs, fmt.Errorf("%w: %s: %s: %s", ErrMalformed, field, quote(v), why))
}

// inconsistent records that field was read but adjusted.
func (r *reader) inconsistent(field, why string) {
	if r.full() {
		return
	}
	r.errs = append(r.errs, fmt.Errorf("%w: %s: %s", ErrInconsistent, field, why))
}

// full reports whether maxErrors errors are recorded, counting the one
// about to be left out: a header of thousands of bad items must not cost
// thousands of formatted errors, nor become thousands of log lines.
func (r *reader) full() bool {
	if len(r.errs) < maxErrors {
		return false
	}
	r.dropped++
	return true
}

// add records rd if it reports anything.
func (r *reader) add(rd Reading) {
	if rd, ok := r.check(rd); ok {
		r.readings = append(r.readings, rd)
	}
}

// check returns rd with a Remaining above its Limit lowered to the Limit,
// and false if rd reports nothing.
func (r *reader) check(rd Reading) (Reading, bool) {
	if !rd.HasLimit && !rd.HasRemaining && !rd.HasReset {
		return rd, false
	}
	if rd.HasLimit && rd.HasRemaining && rd.Remaining > rd.Limit {
		r.inconsistent(rd.Counter, fmt.Sprintf("remaining %d above limit %d; took %d", rd.Remaining, rd.Limit, rd.Limit))
		rd.Remaining = rd.Limit
	}
	return rd, true
}

// elements yields the non-empty, trimmed, comma-separated elements of
// every value of header name: the first maxValues of them, recording an
// error if there are more.
func (r *reader) elements(name string) iter.Seq[string] {
	return r.split(name, ",", "values")
}

// split yields the non-empty, trimmed parts between the separators sep
// of every value of header name: the first maxValues of them, recording
// an error that counts them as what if there are more.
func (r *reader) split(name, sep, what string) iter.Seq[string] {
	return func(yield func(string) bool) {
		n := 0
		for _, line := range r.h.Values(name) {
			for rest, more := line, true; more; {
				var e string
				e, rest, more = strings.Cut(rest, sep)
				if e = strings.TrimSpace(e); e == "" {
					continue
				}
				if n == maxValues {
					r.malformed(name, e, fmt.Sprintf("more than %d %s; the rest left out", maxValues, what))
					return
				}
				n++
				if !yield(e) {
					return
				}
			}
		}
	}
}

// rounding says which way a count with a fraction goes: towards the more
// restrictive side of what it counts.
type rounding bool

const (
	down rounding = false // a limit or a remaining count
	up   rounding = true  // a used count
)

// parseCount reads a count: digits with an optional fraction, rounded as
// asked. It returns why it is malformed, or "".
func parseCount(v string, round rounding) (int64, string) {
	s := strings.TrimSpace(v)
	whole, frac, ok := parseDecimal(s)
	if !ok {
		if negative(s) {
			return 0, "negative"
		}
		return 0, "not a count"
	}
	if whole > maxCount || (round == up && frac > 0 && whole == maxCount) {
		return 0, "too large"
	}
	n := int64(whole)
	if round == up && frac > 0 {
		n++
	}
	return n, ""
}

// negative reports whether s is a negative decimal number, to say so in
// an error rather than "not a number".
func negative(s string) bool {
	if !strings.HasPrefix(s, "-") {
		return false
	}
	_, _, ok := parseDecimal(s[1:])
	return ok
}

// count reads header name as a count, combining repeated values as
// ReadCounters documents: the smallest (round down) or the largest (round
// up).
func (r *reader) count(name string, round rounding) (int64, bool) {
	return combine(r, name, func(e string) (int64, string) { return parseCount(e, round) }, round == down)
}

// quantity is what a counter field holds: a count or a duration.
type quantity interface{ int64 | time.Duration }

// combine reads every element of header name with parse and keeps the
// most restrictive (the smallest when lower, the largest otherwise),
// reporting the first malformed element and any disagreement, once each.
func combine[T quantity](r *reader, name string, parse func(string) (T, string), lower bool) (T, bool) {
	var n T
	have, differ, bad := false, false, false
	for e := range r.elements(name) {
		v, why := parse(e)
		switch {
		case why != "":
			if !bad {
				r.malformed(name, e, why)
				bad = true
			}
		case !have:
			n, have = v, true
		case v != n:
			differ = true
			if lower == (v < n) {
				n = v
			}
		}
	}
	if differ {
		r.inconsistent(name, fmt.Sprintf("repeated with different values; took the most restrictive, %v", n))
	}
	return n, have
}

// restrict merges value v of field into a value already read (have): the
// first value, or else the more restrictive of the two (the smaller when
// lower, the larger otherwise), recording a disagreement.
func restrict[T quantity](r *reader, field string, old T, have bool, v T, lower bool) T {
	if !have || v == old {
		return v
	}
	if lower == (v < old) {
		old = v
	}
	r.inconsistent(field, fmt.Sprintf("repeated with different values; took the most restrictive, %v", old))
	return old
}

// resetKind says how a header writes a reset.
type resetKind uint8

const (
	// epochOrSeconds: a Unix time or seconds from now, told apart by size
	// (parseReset).
	epochOrSeconds resetKind = iota
	// seconds: seconds from now, integer or decimal (parseSeconds).
	seconds
	// goDuration: a Go-like duration from now, "6m0s" (parseGoDuration).
	goDuration
	// rfc3339: a timestamp (parseRFC3339).
	rfc3339
	// millis: milliseconds, integer or decimal (parseMillis).
	millis
)

// parseResetValue reads a reset (or a window) written as kind. The delay
// parsers of parse.go give no delay for a value that is zero or past as
// for a malformed one; this tells the two apart, so that a reset that is
// due reads as 0 and only garbage is an error. It returns why v is
// malformed, or "".
func parseResetValue(v string, kind resetKind, now time.Time) (time.Duration, string) {
	s := strings.TrimSpace(v)
	if len(s) > maxValue {
		return 0, fmt.Sprintf("longer than %d bytes", maxValue)
	}
	var d time.Duration
	switch kind {
	case epochOrSeconds, seconds, millis:
		if _, _, ok := parseDecimal(s); !ok {
			if negative(s) {
				return 0, "negative"
			}
			return 0, "not a number"
		}
		switch kind {
		case epochOrSeconds:
			d, _ = parseReset(s, now)
		case seconds:
			d, _ = parseSeconds(s)
		default:
			d, _ = parseMillis(s)
		}
	case goDuration:
		var ok bool
		if d, ok = parseGoDuration(s); !ok {
			// parseGoDuration has no zero; time.ParseDuration tells a
			// zero ("0", "0s") from garbage and from a negative.
			z, err := time.ParseDuration(s)
			switch {
			case err != nil:
				return 0, "not a duration"
			case z < 0:
				return 0, "negative"
			}
			d = 0
		}
	case rfc3339:
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return 0, "not an RFC 3339 time"
		}
		d, _ = parseRFC3339(s, now)
	}
	if d > maxReset {
		return 0, "more than a year ahead"
	}
	return d, ""
}

// reset reads header name as a reset written as kind; repeated values give
// the latest.
func (r *reader) reset(name string, kind resetKind) (time.Duration, bool) {
	return combine(r, name, func(e string) (time.Duration, string) { return parseResetValue(e, kind, r.now) }, false)
}

// validName reports whether s may name a counter: 1 to maxName visible
// ASCII characters. Names go into logs, metrics and keys.
func validName(s string) bool {
	if s == "" || len(s) > maxName {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// name reads header name as a counter name. It returns fallback when the
// header is absent and ok false when it is malformed or its values
// disagree (the error is recorded).
func (r *reader) name(header, fallback string) (string, bool) {
	first := ""
	for e := range r.elements(header) {
		if !validName(e) {
			r.malformed(header, e, "not a name (1 to 64 visible ASCII characters)")
			return "", false
		}
		if first != "" && e != first {
			r.malformed(header, e, fmt.Sprintf("repeated with different names (first %s)", quote(first)))
			return "", false
		}
		first = e
	}
	if first == "" {
		return fallback, true
	}
	return first, true
}

// boolean reads header name as "true" or "false" in any case; absent is
// false. Repeated values: true wins (the more restrictive for every
// boolean read here).
func (r *reader) boolean(name string) bool {
	v := false
	for e := range r.elements(name) {
		switch {
		case strings.EqualFold(e, "true"):
			v = true
		case strings.EqualFold(e, "false"):
		default:
			r.malformed(name, e, `not "true" or "false"`)
		}
	}
	return v
}

// usedOf reads "used/limit" (Shopify's call limit, Salesforce's usage) as
// a reading's Limit and Remaining.
func usedOf(v string) (limit, remaining int64, why string) {
	u, l, ok := strings.Cut(v, "/")
	if !ok {
		return 0, 0, `not "used/limit"`
	}
	used, why := parseCount(u, up)
	if why != "" {
		return 0, 0, "used: " + why
	}
	if limit, why = parseCount(l, down); why != "" {
		return 0, 0, "limit: " + why
	}
	return limit, max(limit-used, 0), ""
}

// sortReadings orders readings by counter name, for formats whose
// counters come from a map.
func sortReadings(rs []Reading) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].Counter < rs[j].Counter })
}
