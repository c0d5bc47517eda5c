package backoff

import (
	"strings"
	"time"
)

// This file reads the IETF RateLimit header fields (draft-ietf-httpapi-
// ratelimit-headers). Drafts -07 and later, including -10 and -11, use
// Structured Field Values (RFC 8941):
//
//	RateLimit-Policy: "burst";q=100;w=60,"daily";q=1000;w=86400
//	RateLimit: "burst";r=0;t=30
//
// where, per policy, r is the remaining quota and t the seconds until it
// resets. Older drafts used a dictionary or separate fields:
//
//	RateLimit: limit=100, remaining=0, reset=30
//	RateLimit-Reset: 30
//
// Per the drafts, a malformed field is ignored as a whole.

// sfItem is a member of a Structured Field list: a bare item (only its
// text is kept) with its parameters (raw text of each value).
type sfItem struct {
	value  string
	params map[string]string
}

// sfParser parses the subset of RFC 8941 the RateLimit fields use: lists
// and dictionaries of bare items (strings, tokens, numbers, booleans, byte
// sequences) with parameters. Inner lists are not supported and fail the
// parse.
type sfParser struct {
	s   string
	pos int
	cut bool // s is the first maxSFBytes of a longer field
}

// Bounds on what parseSF reads of one field, so that its cost does not
// grow with the field's size (the Go client accepts 10 MB of headers): no
// vendor sends more than a handful of policies of a few parameters each,
// so 64 items of up to 16 parameters in 16 KiB leave room for any real
// field.
const (
	maxSFBytes  = 16 << 10
	maxSFItems  = maxReadings
	maxSFParams = 16
)

func (p *sfParser) eof() bool { return p.pos >= len(p.s) }

func (p *sfParser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.s[p.pos]
}

func (p *sfParser) skipSP() {
	for !p.eof() && p.s[p.pos] == ' ' {
		p.pos++
	}
}

func (p *sfParser) skipOWS() {
	for !p.eof() && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

func isLCAlpha(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || ('A' <= c && c <= 'Z') }

// isTChar reports whether c is an RFC 9110 tchar.
func isTChar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func (p *sfParser) key() (string, bool) {
	start := p.pos
	if c := p.peek(); !isLCAlpha(c) && c != '*' {
		return "", false
	}
	for !p.eof() {
		c := p.s[p.pos]
		if !isLCAlpha(c) && !isDigit(c) && c != '_' && c != '-' && c != '.' && c != '*' {
			break
		}
		p.pos++
	}
	return p.s[start:p.pos], true
}

// bareItem returns the item's text: a string's content unescaped, any
// other item's source text.
func (p *sfParser) bareItem() (string, bool) {
	start := p.pos
	c := p.peek()
	switch {
	case c == '"':
		var b strings.Builder
		for p.pos++; !p.eof(); p.pos++ {
			c := p.s[p.pos]
			switch {
			case c == '\\':
				p.pos++
				if p.eof() || (p.s[p.pos] != '"' && p.s[p.pos] != '\\') {
					return "", false
				}
				b.WriteByte(p.s[p.pos])
			case c == '"':
				p.pos++
				return b.String(), true
			case c < 0x20 || c > 0x7e:
				return "", false
			default:
				b.WriteByte(c)
			}
		}
		return "", false
	case c == '-' || isDigit(c):
		if c == '-' {
			p.pos++
		}
		digits, dot := 0, false
		for !p.eof() && (isDigit(p.s[p.pos]) || (p.s[p.pos] == '.' && !dot)) {
			if p.s[p.pos] == '.' {
				dot = true
			} else {
				digits++
			}
			p.pos++
		}
		if digits == 0 || digits > 15 || p.s[p.pos-1] == '.' {
			return "", false
		}
		return p.s[start:p.pos], true
	case isAlpha(c) || c == '*':
		for !p.eof() && (isTChar(p.s[p.pos]) || p.s[p.pos] == ':' || p.s[p.pos] == '/') {
			p.pos++
		}
		return p.s[start:p.pos], true
	case c == '?':
		p.pos++
		if c := p.peek(); c != '0' && c != '1' {
			return "", false
		}
		p.pos++
		return p.s[start:p.pos], true
	case c == ':':
		for p.pos++; !p.eof(); p.pos++ {
			c := p.s[p.pos]
			if c == ':' {
				p.pos++
				return p.s[start:p.pos], true
			}
			if !isAlpha(c) && !isDigit(c) && c != '+' && c != '/' && c != '=' {
				return "", false
			}
		}
		return "", false
	}
	return "", false
}

func (p *sfParser) params() (map[string]string, bool) {
	var m map[string]string
	for p.peek() == ';' {
		p.pos++
		p.skipSP()
		k, ok := p.key()
		if !ok {
			return nil, false
		}
		v := "?1"
		if p.peek() == '=' {
			p.pos++
			if v, ok = p.bareItem(); !ok {
				return nil, false
			}
		}
		if m == nil {
			m = make(map[string]string)
		}
		if _, dup := m[k]; !dup && len(m) == maxSFParams {
			return nil, false
		}
		m[k] = v
	}
	return m, true
}

// parseSF parses a list (dict false) or a dictionary (dict true). For a
// dictionary, each item's value is its key and params["="] holds the
// member's value. It reads at most maxSFItems items and maxSFBytes bytes
// of s: more is true when items were left out, the last item read being
// one that ends before the cut (so a number cut short is never read as a
// smaller one).
func parseSF(s string, dict bool) (items []sfItem, more, ok bool) {
	p := &sfParser{s: s}
	if len(s) > maxSFBytes {
		p.s, p.cut = s[:maxSFBytes], true
	}
	p.skipOWS() // SP per RFC 8941; a tab is as harmless
	for !p.eof() {
		if len(items) == maxSFItems {
			return items, true, true
		}
		it, ok := p.member(dict)
		if ok {
			p.skipOWS()
		}
		if p.cut && p.eof() {
			// The member, or what follows it, runs past the cut.
			return items, true, true
		}
		if !ok {
			return nil, false, false
		}
		items = append(items, it)
		if p.eof() {
			return items, false, true
		}
		if p.peek() != ',' {
			return nil, false, false
		}
		p.pos++
		p.skipOWS()
		if p.eof() && !p.cut {
			return nil, false, false
		}
	}
	return items, p.cut, true
}

// member parses one member of a list (dict false) or a dictionary (dict
// true), as parseSF returns it.
func (p *sfParser) member(dict bool) (sfItem, bool) {
	var it sfItem
	var ok bool
	if !dict {
		if it.value, ok = p.bareItem(); !ok {
			return it, false
		}
		it.params, ok = p.params()
		return it, ok
	}
	if it.value, ok = p.key(); !ok {
		return it, false
	}
	v := "?1"
	if p.peek() == '=' {
		p.pos++
		if v, ok = p.bareItem(); !ok {
			return it, false
		}
	}
	if it.params, ok = p.params(); !ok {
		return it, false
	}
	if it.params == nil {
		it.params = make(map[string]string)
	}
	it.params["="] = v
	return it, true
}

// sfSeconds reads a non-negative integer parameter as seconds.
func sfSeconds(m map[string]string, key string) (time.Duration, bool) {
	v, ok := m[key]
	if !ok {
		return 0, false
	}
	whole, frac, ok := parseDecimal(v)
	if !ok || frac != 0 {
		return 0, false
	}
	return scale(whole, 0, time.Second), true
}

// rateLimitDelay reads the RateLimit field (with RateLimit-Policy to fill
// in a missing reset) and returns the delay it implies for a throttled
// response:
//
//   - structured form: the latest reset (t) among the policies with no
//     quota left (r=0), a policy's window (w in RateLimit-Policy) standing
//     in for a missing t; when no policy reports r=0, the earliest reset
//     among all, as that is the first moment anything can change;
//   - dictionary form of older drafts: its reset.
//
// It returns (0, false) when the field is absent or malformed.
func rateLimitDelay(field, policy string, now time.Time) (time.Duration, bool) {
	if strings.TrimSpace(field) == "" {
		return 0, false
	}
	if items, _, ok := parseSF(field, false); ok {
		return structuredDelay(items, policy)
	}
	if items, _, ok := parseSF(field, true); ok {
		for _, it := range items {
			if it.value == "reset" {
				return parseReset(it.params["="], now)
			}
		}
	}
	return 0, false
}

func structuredDelay(items []sfItem, policy string) (time.Duration, bool) {
	var windows map[string]time.Duration
	if ps, _, ok := parseSF(policy, false); ok {
		for _, p := range ps {
			if w, ok := sfSeconds(p.params, "w"); ok {
				if windows == nil {
					windows = make(map[string]time.Duration)
				}
				windows[p.value] = w
			}
		}
	}
	var exhausted, earliest time.Duration
	sawExhausted := false
	for _, it := range items {
		t, hasT := sfSeconds(it.params, "t")
		if !hasT {
			t, hasT = windows[it.value]
		}
		if r, ok := it.params["r"]; ok && (r == "0" || r == "-0") {
			sawExhausted = true
			if hasT && t > exhausted {
				exhausted = t
			}
			continue
		}
		if hasT && t > 0 && (earliest == 0 || t < earliest) {
			earliest = t
		}
	}
	if sawExhausted {
		return positive(exhausted)
	}
	return positive(earliest)
}
