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
	learn    *yaml.Node // its learn field, or nil
	reserve  *yaml.Node // its reserve field, or nil (see priority.go)
	pace     *yaml.Node // its pace field, or nil
	fair     *yaml.Node // its fair field, or nil (see fair.go)
	lim      *Limit
}

var limitFields = []string{
	"name", "limit", "rate", "period", "burst", "quota", "per", "resets", "timezone",
	"rolling", "scope", "missing", "only", "learn", "reserve", "pace", "ahead",
	"fair",
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

// limitDecoder decodes one limit. Each of its methods decodes one field
// or one form of the limit; a problem recorded through bad drops the
// limit, so the fields after it are still checked and reported at once.
type limitDecoder struct {
	*loader
	f    map[string]*yaml.Node // the limit's fields
	n    *yaml.Node            // the limit's mapping
	path string
	ln   *limitNodes
	good bool // no problem so far: the limit is kept

	sf        shortForm  // the limit as written, in either form
	hasReset  bool       // a reset time is given
	resetNode *yaml.Node // where: resets or the short form
	tz        string     // the time zone given, if any
	tzNode    *yaml.Node // where: timezone or the short form
	tzPath    string
}

// bad records a problem that drops the limit.
func (d *limitDecoder) bad(node *yaml.Node, p, format string, args ...any) {
	d.add(node, p, format, args...)
	d.good = false
}

// limit decodes one limit, its count scaled by headroom bp (basis
// points); names holds the limit names already used by the provider, and
// gets this one. It returns nil, nil after a problem.
func (l *loader) limit(n *yaml.Node, path string, bp int64, names map[string]string) (*Limit, *limitNodes) {
	f := l.fields(n, path, limitFields...)
	if f == nil {
		return nil, nil
	}
	d := l.limitDecoder(f, n, path)
	q := &quota.Limit{Name: d.name(names)}
	d.figures()
	d.calendar(q)
	q.Kind, q.Period = d.sf.kind, d.sf.period
	pub := *q
	pub.Rate, pub.Burst = d.sf.rate, d.sf.burst
	if d.sf.burst != 0 {
		q.Burst = scale(d.sf.burst, bp)
	}
	if q.Kind == quota.GCRA {
		q.Rate, q.Period, q.Burst = scaleRate(d.sf.rate, d.sf.period, q.Burst, bp)
	} else {
		q.Rate = scale(d.sf.rate, bp)
	}
	d.learn(q, bp)
	lim := &Limit{Quota: q, Published: &pub}
	d.scope(lim)
	d.missing(lim)
	d.only(lim)
	d.fair(q, lim)
	d.ln.reserve, d.ln.pace = f["reserve"], f["pace"] // decoded with the provider's priority
	if !d.good || !l.engineAccepts(q, d.ln, n, path) {
		return nil, nil
	}
	return lim, d.ln
}

// name decodes the limit's name, unique within the provider, and records
// it in names. It returns "" after a problem.
func (d *limitDecoder) name(names map[string]string) string {
	path := d.path + ".name"
	if nn := d.f["name"]; nn == nil {
		d.bad(d.n, path, "missing: every limit has a name (it names its keys and errors)")
	} else if s, ok := d.str(nn, path, "a name"); !ok {
		d.good = false
	} else if !validName(s) {
		d.bad(nn, path, "invalid limit name %q: %s", s, nameRule)
	} else if s == pauseKey {
		d.bad(nn, path, "%q is reserved for the provider's pause key: choose another name", s)
	} else if prev, dup := names[s]; dup {
		d.bad(nn, path, "limit name %q is already used by %s: names are unique within a provider, routes included", s, prev)
	} else {
		names[s] = d.path
		return s
	}
	return ""
}

// shortForm decodes the field limit, e.g. "100/s burst 20" or
// "250000/day resets 00:00 America/Los_Angeles", which excludes the
// fields of the long form.
func (d *limitDecoder) shortForm() {
	for _, k := range []string{"rate", "period", "quota", "per", "rolling"} {
		if d.f[k] != nil {
			d.bad(d.f[k], d.path+"."+k, "%s cannot be combined with the short form \"limit\": write one or the other", k)
		}
	}
	sn := d.f["limit"]
	if s, ok := d.str(sn, d.path+".limit", "a limit such as 100/s"); !ok {
		d.good = false
	} else if v, msg := parseShort(s); msg != "" {
		d.bad(sn, d.path+".limit", "%s", msg)
	} else if v.rate == 0 {
		d.bad(sn, d.path+".limit", "a rate of 0 admits nothing: want at least 1 (leave the limit out to not limit)")
	} else {
		d.sf = v
		d.ln.capacity, d.ln.capField = sn, "limit"
		if d.sf.tz != "" {
			d.tz, d.tzNode, d.tzPath = d.sf.tz, sn, d.path+".limit"
		}
		if d.sf.hasReset {
			d.hasReset, d.resetNode = true, sn
		}
	}
}

// longForm decodes a limit written field by field: rate and period (GCRA),
// quota and per with rolling (a rolling window) or without (a calendar
// window).
func (d *limitDecoder) longForm() {
	f := d.f
	switch {
	case f["rate"] != nil && f["quota"] != nil:
		d.bad(f["quota"], d.path+".quota", "a limit has either rate (GCRA) or quota (calendar window), not both")
	case f["rate"] != nil:
		d.gcra()
	case f["quota"] != nil && f["rolling"] != nil && rolls(f["rolling"]):
		d.rollingWindow()
	case f["quota"] != nil:
		d.calendarWindow()
	default:
		d.bad(d.n, d.path, "missing the limit itself: want limit (e.g. \"100/s\"), rate and period (GCRA) or quota and per (calendar window)")
	}
}

// count decodes the field (rate or quota) that gives what the limit
// admits per period, the field a too-small capacity is reported at.
func (d *limitDecoder) count(field string) {
	d.ln.capacity, d.ln.capField = d.f[field], field
	if v, ok := d.integer(d.f[field], d.path+"."+field, 1, maxCount); ok {
		d.sf.rate = v
	} else {
		d.good = false
	}
}

// gcra decodes rate and period.
func (d *limitDecoder) gcra() {
	f, path := d.f, d.path
	d.sf.kind = quota.GCRA
	d.count("rate")
	if pn := f["period"]; pn == nil {
		d.bad(d.n, path+".period", "missing: a GCRA limit needs a period, e.g. period: 1s")
	} else if p, ok := d.duration(pn, path+".period", false); ok {
		d.sf.period = p
	} else {
		d.good = false
	}
	if f["per"] != nil {
		d.bad(f["per"], path+".per", "per is the unit of a calendar window (with quota); a GCRA limit has a period")
	}
	if rn := f["rolling"]; rn != nil {
		d.bad(rn, path+".rolling", "rolling belongs to a quota (quota and per: a rolling window); a GCRA limit has rate and period")
	}
}

// rollingWindow decodes quota and per of a rolling window.
func (d *limitDecoder) rollingWindow() {
	f, path := d.f, d.path
	d.sf.kind = quota.Rolling
	d.count("quota")
	if pn := f["per"]; pn == nil {
		d.bad(d.n, path+".per", "missing: a rolling window needs per, its period, e.g. per: 24h")
	} else if s, ok := d.str(pn, path+".per", "a duration such as 24h"); !ok {
		d.good = false
	} else if p, ok := rollingPeriods[s]; ok {
		d.sf.period = p
	} else if p, err := time.ParseDuration(s); err == nil && p > 0 {
		d.sf.period = p
	} else {
		d.bad(pn, path+".per", "want the rolling period as a duration such as 24h, 10s or 1h30m (or hour or day), got %q", s)
	}
	if f["period"] != nil {
		d.bad(f["period"], path+".period", "period belongs to a GCRA limit (with rate); a rolling window has per")
	}
}

// calendarWindow decodes quota and per of a calendar window.
func (d *limitDecoder) calendarWindow() {
	f, path := d.f, d.path
	d.sf.kind = quota.Window
	d.count("quota")
	if pn := f["per"]; pn == nil {
		d.bad(d.n, path+".per", "missing: a calendar window needs per: hour, day or month")
	} else if i, ok := d.enum(pn, path+".per", "hour", "day", "month"); ok {
		d.sf.unit = []quota.Unit{quota.Hour, quota.Day, quota.Month}[i]
	} else {
		d.good = false
	}
	if f["period"] != nil {
		d.bad(f["period"], path+".period", "period belongs to a GCRA limit (with rate); a calendar window has per")
	}
}

// rolling checks the value of the field rolling where no other check
// has reported it.
func (d *limitDecoder) rolling() {
	if rn := d.f["rolling"]; rn != nil && d.f["limit"] == nil && d.f["rate"] == nil {
		if _, ok := d.enum(rn, d.path+".rolling", "false", "true"); !ok {
			d.good = false
		}
	}
}

// burst decodes the field burst, which only a GCRA limit has.
func (d *limitDecoder) burst() {
	bn := d.f["burst"]
	if bn == nil {
		return
	}
	path := d.path + ".burst"
	switch {
	case d.sf.kind == quota.Rolling:
		d.bad(bn, path, "a rolling window has no burst: its whole quota is available at once")
	case d.sf.kind == quota.Window:
		d.bad(bn, path, "a calendar window has no burst: its whole quota is available at once")
	case d.sf.kind == quota.Concurrency:
		d.bad(bn, path, "a concurrency limit has no burst: its leases are all available at once")
	case d.sf.burst != 0:
		d.bad(bn, path, "burst is already given in the short form")
	default:
		if v, ok := d.integer(bn, path, 1, maxCount); ok {
			d.sf.burst = v
			d.ln.capacity, d.ln.capField = bn, "burst"
		} else {
			d.good = false
		}
	}
}

// resets decodes the field resets, a calendar window's reset time.
func (d *limitDecoder) resets() {
	rn := d.f["resets"]
	if rn == nil {
		return
	}
	path := d.path + ".resets"
	if d.hasReset {
		d.bad(rn, path, "the reset time is already given in the short form")
	} else if s, ok := d.str(rn, path, "a time HH:MM"); ok {
		if t, ok := parseClock(s); ok {
			d.sf.reset, d.hasReset, d.resetNode = t, true, rn
		} else {
			d.bad(rn, path, "want a time HH:MM from 00:00 to 23:59, got %q", s)
		}
	} else {
		d.good = false
	}
}

// timezone decodes the field timezone, a calendar window's time zone.
// limitDecoder returns the decoder of the limit node n at path, whose
// fields f are.
func (l *loader) limitDecoder(f map[string]*yaml.Node, n *yaml.Node, path string) *limitDecoder {
	return &limitDecoder{loader: l, f: f, n: n, path: path, ln: &limitNodes{path: path, node: n}, good: true, tzPath: path + ".timezone"}
}

// figures decodes what a limit admits: its short or long form, rolling,
// burst, resets and timezone (a limit's and a plan's figures alike).
func (d *limitDecoder) figures() {
	if d.f["limit"] != nil {
		d.shortForm()
	} else {
		d.longForm()
	}
	d.rolling()
	d.burst()
	d.resets()
	d.timezone()
}

func (d *limitDecoder) timezone() {
	tn := d.f["timezone"]
	if tn == nil {
		return
	}
	if d.tzNode != nil {
		d.bad(tn, d.path+".timezone", "the time zone is already given in the short form")
	} else if s, ok := d.str(tn, d.path+".timezone", "an IANA time zone such as America/Los_Angeles"); ok {
		d.tz, d.tzNode = s, tn
	} else {
		d.good = false
	}
}

// calendar checks that a reset time and a time zone come with a calendar
// window, and sets q's calendar from them.
func (d *limitDecoder) calendar(q *quota.Limit) {
	if d.sf.kind != quota.Window && (d.resetNode != nil || d.tzNode != nil) {
		node := d.resetNode
		if node == nil {
			node = d.tzNode
		}
		d.bad(node, d.path, "resets and timezone belong to calendar windows (quota per hour, day or month); this limit is %s", d.sf.kind)
	}
	if d.sf.kind != quota.Window {
		return
	}
	q.Calendar.Unit = d.sf.unit
	q.Calendar.Reset = d.sf.reset
	if d.sf.unit == quota.Hour && d.hasReset {
		if d.sf.reset >= time.Hour {
			d.bad(d.resetNode, d.path+".resets", "an hourly window resets within the hour: want 00:MM, e.g. 00:30 for half past")
		}
	}
	if d.tz != "" {
		switch loc, err := loadLocation(d.tz); {
		case err != nil:
			d.bad(d.tzNode, d.tzPath, "unknown time zone %q: want an IANA name such as UTC, Europe/Berlin or America/Los_Angeles", d.tz)
		default:
			q.Calendar.Location = loc
		}
	}
}

// scope decodes the field scope: what values the limit counts apart.
func (d *limitDecoder) scope(lim *Limit) {
	sn := d.f["scope"]
	if sn == nil {
		return
	}
	d.ln.scope = sn
	if s, ok := d.str(sn, d.path+".scope", "a scope"); ok {
		if sc, ok := parseScope(s); ok {
			lim.Scope = sc
		} else {
			d.bad(sn, d.path+".scope", "want provider, business, host, header:<Header-Name> or label:<name>, got %q", s)
		}
	} else {
		d.good = false
	}
}

// missing decodes the field missing: what a request without the scope's
// value does.
func (d *limitDecoder) missing(lim *Limit) {
	mn := d.f["missing"]
	if mn == nil {
		return
	}
	if i, ok := d.enum(mn, d.path+".missing", "shared", "skip", "refuse"); ok {
		lim.Missing = Missing(i)
		if lim.Scope.Kind == ScopeProvider || lim.Scope.Kind == ScopeHost {
			d.bad(mn, d.path+".missing", "a provider-wide or host limit always has its scope; missing applies to business, header and label scopes")
		}
	} else {
		d.good = false
	}
}

// only decodes the field only: the scope values the limit applies to.
func (d *limitDecoder) only(lim *Limit) {
	on := d.f["only"]
	if on == nil {
		return
	}
	path := d.path + ".only"
	if items, ok := d.list(on, path, "a list of scope values"); ok {
		if lim.Scope.Kind == ScopeProvider {
			d.bad(on, path, "only applies to business, host, header and label scopes")
		}
		for i, it := range items {
			if s, ok := d.str(it, index(path, i), "a scope value"); ok {
				lim.Only = append(lim.Only, s)
			}
		}
		if len(items) == 0 {
			d.bad(on, path, "empty: list the scope values the limit applies to, or leave the field out")
		}
	}
}

// engineAccepts reports whether the store engine can run q, recording a
// problem at the limit's count or mapping (n, path) when not. These are
// the engine's own rules, as a backstop: the checks of the fields should
// have caught everything it rejects.
func (l *loader) engineAccepts(q *quota.Limit, ln *limitNodes, n *yaml.Node, path string) bool {
	if q.Kind == quota.Rolling && (q.Period < quota.MinRollingPeriod || q.Period.Microseconds() > quota.MaxExact) {
		l.add(ln.capacity, join(path, ln.capField), "a rolling period of %v is out of range: want %v to 71 years", q.Period, quota.MinRollingPeriod)
		return false
	}
	if q.Kind == quota.GCRA {
		if q.Period < time.Microsecond || q.Period.Microseconds()/q.Rate == 0 {
			l.add(ln.capacity, join(path, ln.capField), "%d per %v is finer than one event per microsecond: lower the rate or lengthen the period", q.Rate, q.Period)
			return false
		}
		if iv := q.Interval(); q.Capacity() > math.MaxInt64/4/iv {
			l.add(ln.capacity, join(path, ln.capField), "burst %d times an interval of %dµs is too large", q.Capacity(), iv)
			return false
		}
	}
	if err := q.Validate(); err != nil {
		l.add(n, path, "%v", err)
		return false
	}
	return true
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
// scaleRate applies headroom to a GCRA rate without rounding it away:
// where floor(rate*bp) loses part of an event (2/s at 95% would become
// 1/s, half the vendor's rate), it keeps the count and stretches the
// period instead (2 per 1.052632s, rounded up to the microsecond so the
// rate never exceeds rate*bp). The burst, unset, is the scaled rate, as
// the rate's own default would have been.
func scaleRate(rate int64, period time.Duration, burst, bp int64) (int64, time.Duration, int64) {
	if rate <= 0 || period <= 0 || bp >= 10000 {
		return scale(rate, bp), period, burst
	}
	hi, lo := bits.Mul64(uint64(rate), uint64(bp))
	if _, rem := bits.Div64(hi, lo, 10000); rem == 0 {
		return scale(rate, bp), period, burst
	}
	if burst == 0 {
		burst = scale(rate, bp)
	}
	us := period.Microseconds()
	hi, lo = bits.Mul64(uint64(us), 10000)
	if hi >= uint64(bp) { // beyond any period the engine accepts: leave it to its check
		return scale(rate, bp), period, burst
	}
	q, r := bits.Div64(hi, lo, uint64(bp))
	if r != 0 {
		q++
	}
	if q > math.MaxInt64/uint64(time.Microsecond) {
		return scale(rate, bp), period, burst
	}
	return rate, time.Duration(q) * time.Microsecond, burst
}

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

// limitNamed returns the limit named name among stacks, or nil. Names are
// unique within a provider; after a duplicate, which Load reports, it is
// the last one.
func limitNamed(name string, stacks [][]*limitNodes) *Limit {
	var found *Limit
	for _, lns := range stacks {
		for _, ln := range lns {
			if ln.lim.Quota.Name == name {
				found = ln.lim
			}
		}
	}
	return found
}
