package backoff

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The IETF RateLimit fields, in the three forms the drafts have used (see
// Format). The Structured Field parser of ratelimit.go reads all of them.
const (
	ietfField     = "RateLimit"
	ietfPolicy    = "RateLimit-Policy"
	ietfLimit     = "RateLimit-Limit"
	ietfRemaining = "RateLimit-Remaining"
	ietfReset     = "RateLimit-Reset"
)

// readIETF reads the IETF format: the structured form of drafts -08 and
// later when RateLimit is a list of named items (or RateLimit-Policy names
// its policies), else the dictionary form of draft -07, else the separate
// fields of drafts up to -06. Per the drafts, a malformed RateLimit is
// ignored as a whole (with an error); the separate fields are read then.
func readIETF(r *reader, _ *http.Response) {
	field := joined(r.h, ietfField)
	var policies []sfItem
	if p := joined(r.h, ietfPolicy); strings.TrimSpace(p) != "" {
		var ok bool
		if policies, ok = r.parseSF(ietfPolicy, p, false); !ok {
			r.malformed(ietfPolicy, p, "not a Structured Field list")
		}
	}
	named := len(policies) > 0 && !numericItem(policies[0].value)
	if strings.TrimSpace(field) == "" {
		if named {
			r.readPolicies(policies, nil)
			return
		}
		r.readSeparate(policies)
		return
	}
	if items, more, ok := parseSF(field, false); ok && len(items) > 0 && !numericItem(items[0].value) {
		r.leftOut(ietfField, field, more)
		if !named {
			policies = nil // -07 policies have no names to match
		}
		r.readPolicies(policies, items)
		return
	}
	if items, ok := r.parseSF(ietfField, field, true); ok {
		r.readDictionary(items, policies)
		return
	}
	r.malformed(ietfField, field, "not a list of policies or a dictionary")
	r.readSeparate(policies)
}

// parseSF parses the text v of field as parseSF does, recording an error
// when items were left out.
func (r *reader) parseSF(field, v string, dict bool) ([]sfItem, bool) {
	items, more, ok := parseSF(v, dict)
	if ok {
		r.leftOut(field, v, more)
	}
	return items, ok
}

// leftOut records, when more, that parseSF left out the end of field v.
func (r *reader) leftOut(field, v string, more bool) {
	if more {
		r.malformed(field, v, fmt.Sprintf("more than %d items or %d bytes; the rest left out", maxSFItems, maxSFBytes))
	}
}

// numericItem reports whether an item's text is a number: the bare items
// of draft -07's RateLimit-Policy ("100;w=60") are quotas, not names.
func numericItem(v string) bool {
	return v != "" && (isDigit(v[0]) || v[0] == '-')
}

// readPolicies reads the structured form: one reading per policy named in
// RateLimit-Policy (q, w) or RateLimit (r, t), in the order of first
// appearance, policies first.
func (r *reader) readPolicies(policies, items []sfItem) {
	var order []*Reading
	byName := make(map[string]*Reading)
	get := func(field, name string) *Reading {
		if !validName(name) {
			r.malformed(field, name, "not a policy name (1 to 64 visible ASCII characters)")
			return nil
		}
		rd, ok := byName[name]
		if !ok {
			rd = &Reading{Counter: name}
			byName[name] = rd
			order = append(order, rd)
		}
		return rd
	}
	for _, p := range policies {
		rd := get(ietfPolicy, p.value)
		if rd == nil {
			continue
		}
		f := ietfPolicy + " " + p.value
		if n, ok := r.param(f, p.params, "q"); ok {
			rd.Limit, rd.HasLimit = restrict(r, f+" q", rd.Limit, rd.HasLimit, n, true), true
		}
		if w, ok := r.paramSeconds(f, p.params, "w"); ok && w > 0 {
			rd.Window = w
		}
	}
	for _, it := range items {
		rd := get(ietfField, it.value)
		if rd == nil {
			continue
		}
		f := ietfField + " " + it.value
		if n, ok := r.param(f, it.params, "r"); ok {
			rd.Remaining, rd.HasRemaining = restrict(r, f+" r", rd.Remaining, rd.HasRemaining, n, true), true
		}
		if t, ok := r.paramSeconds(f, it.params, "t"); ok {
			rd.Reset, rd.HasReset = restrict(r, f+" t", rd.Reset, rd.HasReset, t, false), true
		}
	}
	for _, rd := range order {
		r.add(*rd)
	}
}

// readDictionary reads draft -07's "RateLimit: limit=100, remaining=50,
// reset=30" as counter "default", its Window from the RateLimit-Policy
// item whose quota is the limit.
func (r *reader) readDictionary(items, policies []sfItem) {
	rd := Reading{Counter: defaultCounter}
	for _, it := range items {
		v := it.params["="]
		f := ietfField + " " + it.value
		switch it.value {
		case "limit":
			if n, ok := r.value(f, v); ok {
				rd.Limit, rd.HasLimit = restrict(r, f, rd.Limit, rd.HasLimit, n, true), true
			}
		case "remaining":
			if n, ok := r.value(f, v); ok {
				rd.Remaining, rd.HasRemaining = restrict(r, f, rd.Remaining, rd.HasRemaining, n, true), true
			}
		case "reset":
			if d, why := parseResetValue(v, epochOrSeconds, r.now); why != "" {
				r.malformed(f, v, why)
			} else {
				rd.Reset, rd.HasReset = restrict(r, f, rd.Reset, rd.HasReset, d, false), true
			}
		}
	}
	if rd.HasLimit {
		rd.Window = r.windowOf(rd.Limit, policies)
	}
	r.add(rd)
}

// readSeparate reads the fields of drafts up to -06 as counter "default":
// RateLimit-Limit (whose first item is the limit; more items, and those of
// a RateLimit-Policy, may give the window as "100;w=60"),
// RateLimit-Remaining and RateLimit-Reset.
func (r *reader) readSeparate(policies []sfItem) {
	rd := Reading{Counter: defaultCounter}
	if l := joined(r.h, ietfLimit); strings.TrimSpace(l) != "" {
		items, ok := r.parseSF(ietfLimit, l, false)
		if !ok || len(items) == 0 {
			r.malformed(ietfLimit, l, "not a Structured Field list")
		} else if n, ok := r.value(ietfLimit, items[0].value); ok {
			rd.Limit, rd.HasLimit = n, true
			rd.Window = r.windowOf(n, append(items, policies...))
		}
	}
	rd.Remaining, rd.HasRemaining = r.count(ietfRemaining, down)
	rd.Reset, rd.HasReset = r.reset(ietfReset, epochOrSeconds)
	r.add(rd)
}

// value reads the text v of field as a count.
func (r *reader) value(field, v string) (int64, bool) {
	n, why := parseCount(v, down)
	if why != "" {
		r.malformed(field, v, why)
		return 0, false
	}
	return n, true
}

// param reads parameter key of field, when present, as a count.
func (r *reader) param(field string, params map[string]string, key string) (int64, bool) {
	v, ok := params[key]
	if !ok {
		return 0, false
	}
	return r.value(field+" "+key, v)
}

// paramSeconds reads parameter key of field, when present, as seconds.
func (r *reader) paramSeconds(field string, params map[string]string, key string) (d time.Duration, ok bool) {
	v, ok := params[key]
	if !ok {
		return 0, false
	}
	d, why := parseResetValue(v, seconds, r.now)
	if why != "" {
		r.malformed(field+" "+key, v, why)
		return 0, false
	}
	return d, true
}

// windowOf returns the w of the first item whose quota is limit, or 0.
func (r *reader) windowOf(limit int64, items []sfItem) time.Duration {
	for _, it := range items {
		if n, why := parseCount(it.value, down); why != "" || n != limit {
			continue
		}
		if w, ok := r.paramSeconds(ietfPolicy+" "+it.value, it.params, "w"); ok {
			return w
		}
	}
	return 0
}
