package proxy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
)

// The request headers that carry per-request values, as the context
// helpers of package throttle do for Go callers. The proxy reads them and
// strips every Throttle-* header before forwarding.
const (
	// headerBusiness is the value of "business" scopes (throttle.WithBusiness).
	headerBusiness = "Throttle-Business"
	// headerLabel is one or more name=value pairs, comma-separated, for
	// "label:<name>" scopes (throttle.WithLabel).
	headerLabel = "Throttle-Label"
	// headerCost is the request's cost in its stack (throttle.WithCost).
	headerCost = "Throttle-Cost"
	// headerLimitCost is one or more limit=n pairs, comma-separated: the
	// cost of named limits (throttle.WithLimitCost).
	headerLimitCost = "Throttle-Limit-Cost"
	// headerMaxWait is the longest wait for a slot, a Go duration ("1.5s",
	// "200ms") or seconds ("1.5"); it can only shorten the provider's
	// max_wait (throttle.WithMaxWait).
	headerMaxWait = "Throttle-Max-Wait"
	// headerPriority names the request's priority class, one of its
	// provider's classes (throttle.WithPriority).
	headerPriority = "Throttle-Priority"
	// HeaderError is set on every answer the proxy makes itself instead of
	// forwarding the vendor's, to the "error" code of its JSON body:
	// "limited" on a refusal's 429, never on a vendor's own 429.
	HeaderError = "Throttle-Error"
)

// Bounds on the per-request headers, which are untrusted input.
const (
	maxValueLen = 256           // a business id, a label value
	maxPairs    = 16            // labels, limit costs
	maxCost     = 1_000_000_000 // beyond any limit's capacity; Resolve checks the real one
	maxWaitCap  = 24 * time.Hour
)

// errHeader is wrapped by every problem with a Throttle-* header.
var errHeader = errors.New("bad Throttle-* header")

// values are the per-request values read from the headers.
type values struct {
	business   string
	cost       int64
	maxWait    time.Duration
	hasMaxWait bool
	labels     []pair
	limitCosts []pair
	priority   string
}

type pair struct {
	name, value string
	n           int64
}

// parseHeaders reads the Throttle-* headers of h. Unknown Throttle-*
// headers are an error, so that a misspelt one is not silently ignored
// (and a request counted against the wrong tenant).
func parseHeaders(h http.Header) (*values, error) {
	var v values
	for name, vals := range h {
		if !isThrottleHeader(name) {
			continue
		}
		var err error
		switch name {
		case headerBusiness:
			v.business, err = single(name, vals)
			if err == nil {
				err = checkValue(name, v.business)
			}
		case headerCost:
			var s string
			if s, err = single(name, vals); err == nil {
				v.cost, err = count(name, s)
			}
		case headerMaxWait:
			var s string
			if s, err = single(name, vals); err == nil {
				v.maxWait, err = duration(s)
				v.hasMaxWait = err == nil
			}
		case headerLabel:
			v.labels, err = pairs(name, vals, false)
		case headerLimitCost:
			v.limitCosts, err = pairs(name, vals, true)
		case headerPriority:
			v.priority, err = single(name, vals)
			if err == nil {
				err = checkValue(name, v.priority)
			}
		default:
			err = fmt.Errorf("%w: unknown header %s (known: %s, %s, %s, %s, %s, %s)", errHeader, quote(name),
				headerBusiness, headerLabel, headerCost, headerLimitCost, headerMaxWait, headerPriority)
		}
		if err != nil {
			return nil, err
		}
	}
	return &v, nil
}

// apply puts the values into ctx, with the max wait capped at limit (the
// provider's max_wait: a client may shorten the wait, never lengthen it).
func (v *values) apply(ctx context.Context, limit time.Duration) context.Context {
	if v.business != "" {
		ctx = throttle.WithBusiness(ctx, v.business)
	}
	if v.cost > 0 {
		ctx = throttle.WithCost(ctx, v.cost)
	}
	for _, l := range v.labels {
		ctx = throttle.WithLabel(ctx, l.name, l.value)
	}
	for _, c := range v.limitCosts {
		ctx = throttle.WithLimitCost(ctx, c.name, c.n)
	}
	if v.hasMaxWait {
		ctx = throttle.WithMaxWait(ctx, min(v.maxWait, limit))
	}
	if v.priority != "" {
		ctx = throttle.WithPriority(ctx, v.priority)
	}
	return ctx
}

// trust holds what the operator lets the headers do: the configuration
// is the operator's word, a header only the client's.
type trust struct {
	// lowerCosts lets Throttle-Cost and Throttle-Limit-Cost set a cost
	// below the configured one (Options.LowerCosts).
	lowerCosts bool
	// business, when set, is every request's business
	// (Options.Business).
	business string
}

// fit checks v against the request's stack and the operator's trust:
// Throttle-Limit-Cost must name limits of the stack, a misspelt one being
// a silent miscount otherwise; a Throttle-Business other than a bound
// business is refused; a Throttle-Priority must name one of the
// provider's classes (a provider without classes ignores it, as the
// library does); and, unless costs may be lowered, a cost below the
// configured one is raised to it, so that a client can ask to count more
// than the route says, never less.
func (v *values) fit(res providers.Resolution, tr trust) error {
	if pr := res.Provider.Priority; v.priority != "" && pr != nil {
		if _, ok := pr.Index(v.priority); !ok {
			return fmt.Errorf("%w: %s %s: provider %s has no such priority class (its classes: %s)",
				errHeader, headerPriority, quote(v.priority), res.Provider.Name, strings.Join(pr.Classes, ", "))
		}
	}
	if tr.business != "" {
		if v.business != "" && v.business != tr.business {
			return fmt.Errorf("%w: %s %s: this proxy counts every request for business %s (--business); a client cannot change it",
				errHeader, headerBusiness, quote(v.business), quote(tr.business))
		}
		v.business = tr.business
	}
	base, own := int64(1), map[string]int64(nil)
	if res.Route != nil {
		base, own = res.Route.Cost, res.Route.Costs
	}
	for i := range v.limitCosts {
		c := &v.limitCosts[i]
		if !inStack(res, c.name) {
			return fmt.Errorf("%w: %s: no limit %s in the stack of this request (%s)",
				errHeader, headerLimitCost, quote(c.name), stackNames(res))
		}
		configured := base
		if n := own[c.name]; n > 0 {
			configured = n
		}
		if !tr.lowerCosts && c.n < configured {
			c.n = configured
		}
	}
	if !tr.lowerCosts && v.cost < base {
		v.cost = 0 // the route's cost
	}
	return nil
}

// inStack reports whether the provider or the matched route has a limit
// called name.
func inStack(res providers.Resolution, name string) bool {
	for _, l := range res.Provider.Limits {
		if l.Quota.Name == name {
			return true
		}
	}
	if res.Route != nil {
		for _, l := range res.Route.Limits {
			if l.Quota.Name == name {
				return true
			}
		}
	}
	return false
}

// stackNames lists the limits of the request's stack for a message.
func stackNames(res providers.Resolution) string {
	var names []string
	for _, l := range res.Provider.Limits {
		names = append(names, l.Quota.Name)
	}
	if res.Route != nil {
		for _, l := range res.Route.Limits {
			names = append(names, l.Quota.Name)
		}
	}
	return "provider " + res.Provider.Name + ": " + strings.Join(names, ", ")
}

// isThrottleHeader reports whether a canonical header name is one of the
// proxy's.
func isThrottleHeader(name string) bool {
	return len(name) > len("Throttle-") && strings.EqualFold(name[:len("Throttle-")], "Throttle-")
}

func single(name string, vals []string) (string, error) {
	if len(vals) != 1 {
		return "", fmt.Errorf("%w: %s given %d times, want once", errHeader, name, len(vals))
	}
	return strings.TrimSpace(vals[0]), nil
}

func checkValue(name, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", errHeader, name)
	case len(s) > maxValueLen:
		return fmt.Errorf("%w: %s is %d bytes long, at most %d allowed", errHeader, name, len(s), maxValueLen)
	}
	return nil
}

func count(name, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > maxCost {
		return 0, fmt.Errorf("%w: %s %s: want a whole number from 1 to %d", errHeader, name, quote(s), int64(maxCost))
	}
	return n, nil
}

// duration parses a Go duration or a number of seconds, at least 0.
func duration(s string) (time.Duration, error) {
	bad := fmt.Errorf("%w: %s %s: want a duration such as 500ms or 2s, or seconds such as 1.5, from 0 to %v",
		errHeader, headerMaxWait, quote(s), maxWaitCap)
	if len(s) > 32 || s == "" {
		return 0, bad
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || f < 0 || f > maxWaitCap.Seconds() {
			return 0, bad
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxWaitCap {
		return 0, bad
	}
	return d, nil
}

// pairs parses "name=value" pairs, comma-separated, over every value of
// a header; with counts the values are whole numbers.
func pairs(name string, vals []string, counts bool) ([]pair, error) {
	var out []pair
	for _, v := range vals {
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			if len(out) == maxPairs {
				return nil, fmt.Errorf("%w: %s: more than %d pairs", errHeader, name, maxPairs)
			}
			k, val, ok := strings.Cut(item, "=")
			k, val = strings.TrimSpace(k), strings.TrimSpace(val)
			if !ok || !validName(k) {
				return nil, fmt.Errorf("%w: %s %s: want name=value, the name made of letters, digits, - and _ (at most 64)",
					errHeader, name, quote(item))
			}
			for _, p := range out {
				if p.name == k {
					return nil, fmt.Errorf("%w: %s: %s given twice", errHeader, name, quote(k))
				}
			}
			p := pair{name: k, value: val}
			var err error
			if counts {
				p.n, err = count(name+" "+k, val)
			} else {
				err = checkValue(name+" "+k, val)
			}
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// validName accepts the names of limits and labels: what the
// configuration allows in "label:<name>" and as a limit's name.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// quote quotes an untrusted value for a message, cut to 64 bytes.
func quote(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}
