package providers

import (
	"errors"
	"math"
	"math/bits"
	"net/http"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fleetquota/throttle/quota"
)

// limitNodes keeps the positions of one limit's fields for later checks.
type limitNodes struct {
	path     string
	node     *yaml.Node // the limit's mapping
	scope    *yaml.Node // its scope field, or nil
	capacity *yaml.Node // where a too-small capacity is reported
	capField string     // its field name
	lim      *Limit
}

var limitFields = []string{
	"name", "limit", "rate", "period", "burst", "quota", "per", "resets", "timezone",
	"rolling", "scope", "missing", "only",
}

func (l *loader) limits(n *yaml.Node, path string, bp int64, names map[string]string) ([]Limit, []*limitNodes) {
	items, ok := l.list(n, path, "a list of limits")
	if !ok {
		return nil, nil
	}
	var out []Limit
	var nodes []*limitNodes
	for i, it := range items {
		ip := index(path, i)
		lim, ln := l.limit(it, ip, bp, names)
		if lim != nil {
			out = append(out, *lim)
			nodes = append(nodes, ln)
		}
	}
	for i := range nodes {
		nodes[i].lim = &out[i]
	}
	return out, nodes
}

func (l *loader) limit(n *yaml.Node, path string, bp int64, names map[string]string) (*Limit, *limitNodes) {
	f := l.fields(n, path, limitFields...)
	if f == nil {
		return nil, nil
	}
	ln := &limitNodes{path: path, node: n}
	good := true
	bad := func(node *yaml.Node, p, format string, args ...any) {
		l.add(node, p, format, args...)
		good = false
	}
	q := &quota.Limit{}
	if nn := f["name"]; nn == nil {
		bad(n, path+".name", "missing: every limit has a name (it names its keys and errors)")
	} else if s, ok := l.str(nn, path+".name", "a name"); !ok {
		good = false
	} else if !validName(s) {
		bad(nn, path+".name", "invalid limit name %q: %s", s, nameRule)
	} else if s == pauseKey {
		bad(nn, path+".name", "%q is reserved for the provider's pause key: choose another name", s)
	} else if prev, dup := names[s]; dup {
		bad(nn, path+".name", "limit name %q is already used by %s: names are unique within a provider, routes included", s, prev)
	} else {
		q.Name = s
		names[s] = path
	}

	var sf shortForm
	var tzNode, resetNode *yaml.Node
	var tz string
	tzPath := path + ".timezone"
	hasReset := false
	if sn := f["limit"]; sn != nil {
		for _, k := range []string{"rate", "period", "quota", "per", "rolling"} {
			if f[k] != nil {
				bad(f[k], path+"."+k, "%s cannot be combined with the short form \"limit\": write one or the other", k)
			}
		}
		if s, ok := l.str(sn, path+".limit", "a limit such as 100/s"); !ok {
			good = false
		} else if v, msg := parseShort(s); msg != "" {
			bad(sn, path+".limit", "%s", msg)
		} else if v.rate == 0 {
			bad(sn, path+".limit", "a rate of 0 admits nothing: want at least 1 (leave the limit out to not limit)")
		} else {
			sf = v
			ln.capacity, ln.capField = sn, "limit"
			if sf.tz != "" {
				tz, tzNode, tzPath = sf.tz, sn, path+".limit"
			}
			if sf.hasReset {
				hasReset, resetNode = true, sn
			}
		}
	} else {
		switch {
		case f["rate"] != nil && f["quota"] != nil:
			bad(f["quota"], path+".quota", "a limit has either rate (GCRA) or quota (calendar window), not both")
		case f["rate"] != nil:
			sf.kind = quota.GCRA
			ln.capacity, ln.capField = f["rate"], "rate"
			if v, ok := l.integer(f["rate"], path+".rate", 1, maxCount); ok {
				sf.rate = v
			} else {
				good = false
			}
			if pn := f["period"]; pn == nil {
				bad(n, path+".period", "missing: a GCRA limit needs a period, e.g. period: 1s")
			} else if d, ok := l.duration(pn, path+".period", false); ok {
				sf.period = d
			} else {
				good = false
			}
			if f["per"] != nil {
				bad(f["per"], path+".per", "per is the unit of a calendar window (with quota); a GCRA limit has a period")
			}
			if rn := f["rolling"]; rn != nil {
				bad(rn, path+".rolling", "rolling belongs to a quota (quota and per: a rolling window); a GCRA limit has rate and period")
			}
		case f["quota"] != nil && f["rolling"] != nil && rolls(f["rolling"]):
			sf.kind = quota.Rolling
			ln.capacity, ln.capField = f["quota"], "quota"
			if v, ok := l.integer(f["quota"], path+".quota", 1, maxCount); ok {
				sf.rate = v
			} else {
				good = false
			}
			if pn := f["per"]; pn == nil {
				bad(n, path+".per", "missing: a rolling window needs per, its period, e.g. per: 24h")
			} else if s, ok := l.str(pn, path+".per", "a duration such as 24h"); !ok {
				good = false
			} else if d, ok := rollingPeriods[s]; ok {
				sf.period = d
			} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
				sf.period = d
			} else {
				bad(pn, path+".per", "want the rolling period as a duration such as 24h, 10s or 1h30m (or hour or day), got %q", s)
			}
			if f["period"] != nil {
				bad(f["period"], path+".period", "period belongs to a GCRA limit (with rate); a rolling window has per")
			}
		case f["quota"] != nil:
			sf.kind = quota.Window
			ln.capacity, ln.capField = f["quota"], "quota"
			if v, ok := l.integer(f["quota"], path+".quota", 1, maxCount); ok {
				sf.rate = v
			} else {
				good = false
			}
			if pn := f["per"]; pn == nil {
				bad(n, path+".per", "missing: a calendar window needs per: hour, day or month")
			} else if i, ok := l.enum(pn, path+".per", "hour", "day", "month"); ok {
				sf.unit = []quota.Unit{quota.Hour, quota.Day, quota.Month}[i]
			} else {
				good = false
			}
			if f["period"] != nil {
				bad(f["period"], path+".period", "period belongs to a GCRA limit (with rate); a calendar window has per")
			}
		default:
			bad(n, path, "missing the limit itself: want limit (e.g. \"100/s\"), rate and period (GCRA) or quota and per (calendar window)")
		}
	}
	if rn := f["rolling"]; rn != nil && f["limit"] == nil && f["rate"] == nil {
		if _, ok := l.enum(rn, path+".rolling", "false", "true"); !ok {
			good = false
		}
	}
	if bn := f["burst"]; bn != nil {
		switch {
		case sf.kind == quota.Rolling:
			bad(bn, path+".burst", "a rolling window has no burst: its whole quota is available at once")
		case sf.kind == quota.Window:
			bad(bn, path+".burst", "a calendar window has no burst: its whole quota is available at once")
		case sf.kind == quota.Concurrency:
			bad(bn, path+".burst", "a concurrency limit has no burst: its leases are all available at once")
		case sf.burst != 0:
			bad(bn, path+".burst", "burst is already given in the short form")
		default:
			if v, ok := l.integer(bn, path+".burst", 1, maxCount); ok {
				sf.burst = v
				ln.capacity, ln.capField = bn, "burst"
			} else {
				good = false
			}
		}
	}
	if rn := f["resets"]; rn != nil {
		if hasReset {
			bad(rn, path+".resets", "the reset time is already given in the short form")
		} else if s, ok := l.str(rn, path+".resets", "a time HH:MM"); ok {
			if d, ok := parseClock(s); ok {
				sf.reset, hasReset, resetNode = d, true, rn
			} else {
				bad(rn, path+".resets", "want a time HH:MM from 00:00 to 23:59, got %q", s)
			}
		} else {
			good = false
		}
	}
	if tn := f["timezone"]; tn != nil {
		if tzNode != nil {
			bad(tn, path+".timezone", "the time zone is already given in the short form")
		} else if s, ok := l.str(tn, path+".timezone", "an IANA time zone such as America/Los_Angeles"); ok {
			tz, tzNode = s, tn
		} else {
			good = false
		}
	}
	if sf.kind != quota.Window && (resetNode != nil || tzNode != nil) {
		node := resetNode
		if node == nil {
			node = tzNode
		}
		bad(node, path, "resets and timezone belong to calendar windows (quota per hour, day or month); this limit is %s", sf.kind)
	}
	if sf.kind == quota.Window {
		q.Calendar.Unit = sf.unit
		q.Calendar.Reset = sf.reset
		if sf.unit == quota.Hour && hasReset {
			if sf.reset >= time.Hour {
				bad(resetNode, path+".resets", "an hourly window resets within the hour: want 00:MM, e.g. 00:30 for half past")
			}
		}
		if tz != "" {
			switch loc, err := loadLocation(tz); {
			case err != nil:
				bad(tzNode, tzPath, "unknown time zone %q: want an IANA name such as UTC, Europe/Berlin or America/Los_Angeles", tz)
			default:
				q.Calendar.Location = loc
			}
		}
	}
	q.Kind = sf.kind
	q.Rate = scale(sf.rate, bp)
	q.Period = sf.period
	if sf.burst != 0 {
		q.Burst = scale(sf.burst, bp)
	}
	lim := &Limit{Quota: q}
	if sn := f["scope"]; sn != nil {
		ln.scope = sn
		if s, ok := l.str(sn, path+".scope", "a scope"); ok {
			if sc, ok := parseScope(s); ok {
				lim.Scope = sc
			} else {
				bad(sn, path+".scope", "want provider, business, host, header:<Header-Name> or label:<name>, got %q", s)
			}
		} else {
			good = false
		}
	}
	if mn := f["missing"]; mn != nil {
		if i, ok := l.enum(mn, path+".missing", "shared", "skip", "refuse"); ok {
			lim.Missing = Missing(i)
			if lim.Scope.Kind == ScopeProvider || lim.Scope.Kind == ScopeHost {
				bad(mn, path+".missing", "a provider-wide or host limit always has its scope; missing applies to business, header and label scopes")
			}
		} else {
			good = false
		}
	}
	if on := f["only"]; on != nil {
		if items, ok := l.list(on, path+".only", "a list of scope values"); ok {
			if lim.Scope.Kind == ScopeProvider {
				bad(on, path+".only", "only applies to business, host, header and label scopes")
			}
			for i, it := range items {
				if s, ok := l.str(it, index(path+".only", i), "a scope value"); ok {
					lim.Only = append(lim.Only, s)
				}
			}
			if len(items) == 0 {
				bad(on, path+".only", "empty: list the scope values the limit applies to, or leave the field out")
			}
		}
	}
	if !good {
		return nil, nil
	}
	if q.Kind == quota.Rolling && (q.Period < quota.MinRollingPeriod || q.Period.Microseconds() > quota.MaxExact) {
		l.add(ln.capacity, join(path, ln.capField), "a rolling period of %v is out of range: want %v to 71 years", q.Period, quota.MinRollingPeriod)
		return nil, nil
	}
	// The engine's own rules, as a backstop: the checks above should
	// have caught everything it rejects.
	if q.Kind == quota.GCRA {
		if q.Period < time.Microsecond || q.Period.Microseconds()/q.Rate == 0 {
			l.add(ln.capacity, join(path, ln.capField), "%d per %v is finer than one event per microsecond: lower the rate or lengthen the period", q.Rate, q.Period)
			return nil, nil
		}
		if iv := q.Interval(); q.Capacity() > math.MaxInt64/4/iv {
			l.add(ln.capacity, join(path, ln.capField), "burst %d times an interval of %dµs is too large", q.Capacity(), iv)
			return nil, nil
		}
	}
	if err := q.Validate(); err != nil {
		l.add(n, path, "%v", err)
		return nil, nil
	}
	return lim, ln
}

// rollingPeriods are the words a rolling window's per may be besides a
// duration.
var rollingPeriods = map[string]time.Duration{"hour": time.Hour, "day": 24 * time.Hour}

// rolls reads a limit's rolling field: anything but false makes the limit
// a rolling window, so that its per is read as one (an invalid value is
// reported where the field is checked).
func rolls(n *yaml.Node) bool { return n.Value != "false" }

// loadLocation loads an IANA time zone. "Local" depends on the machine and
// is refused.
func loadLocation(name string) (*time.Location, error) {
	if name == "Local" || name == "" || len(name) > 64 {
		return nil, errors.New("unknown time zone")
	}
	return time.LoadLocation(name)
}

// scale applies headroom in basis points: floor(n*bp/10000), at least 1.
func scale(n, bp int64) int64 {
	if n <= 0 {
		return n
	}
	hi, lo := bits.Mul64(uint64(n), uint64(bp))
	q, _ := bits.Div64(hi, lo, 10000)
	if q < 1 {
		return 1
	}
	return int64(q)
}

func parseScope(s string) (Scope, bool) {
	switch s {
	case "provider":
		return Scope{Kind: ScopeProvider}, true
	case "business":
		return Scope{Kind: ScopeBusiness}, true
	case "host":
		return Scope{Kind: ScopeHost}, true
	}
	kind, name, ok := strings.Cut(s, ":")
	if !ok {
		return Scope{}, false
	}
	switch kind {
	case "header":
		if validToken(name) {
			return Scope{Kind: ScopeHeader, Name: http.CanonicalHeaderKey(name)}, true
		}
	case "label":
		if name != "" && len(name) <= 64 && validToken(name) {
			return Scope{Kind: ScopeLabel, Name: name}, true
		}
	}
	return Scope{}, false
}
