package providers

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fleetquota/throttle/quota"
)

// This file reads who slows first (docs/configuration.md, "Priority
// classes"): a provider's priority field,
//
//	priority:
//	  classes: [interactive, default, batch]     # the top first
//	  default: batch                             # a request that names none; default: the last class
//	  reserve: {interactive: 20%, default: 10%}  # of each limit, kept from the classes below
//	  active_for: 1m                             # a reserve stays held this long after its class's last request
//
// a limit's reserve (per class, over the provider's, or 0% to keep no
// reserve in that limit), a calendar window's pace, and a route's
// priority (the class of its requests that name none). They become
// quota.Limit.Reserve, ActiveFor, Pace and PaceReserve, which the stores
// decide with (package quota, "Priority classes"), and Resolve sets
// quota.Request.Class.

// ErrUnknownClass is wrapped by the error Resolve returns for a request
// that names a priority class (Input.Priority) its provider does not
// declare. The error names the provider and its classes. A provider
// without classes ignores the class a request names.
var ErrUnknownClass = errors.New("providers: unknown priority class")

// A Priority is a provider's priority classes, as loaded.
type Priority struct {
	// Classes are the class names, the top first.
	Classes []string
	// Default is the index in Classes of the class of a request that
	// names none and whose route names none: the last class unless the
	// default field says otherwise.
	Default int
	// Reserve is, for each class but the last, the share of each limit
	// that the class keeps from the classes below it, in basis points
	// (1/10,000), as quota.Limit.Reserve; a limit's own reserve field
	// replaces some or all of it for that limit.
	Reserve []int64
	// ActiveFor is how long a class's reserve stays held in a window,
	// rolling or concurrency limit after the class's last admitted
	// request there (quota.Limit.ActiveFor).
	ActiveFor time.Duration
}

// Index returns the index of the class called name.
func (pr *Priority) Index(name string) (int, bool) {
	if pr == nil {
		return 0, false
	}
	for i, c := range pr.Classes {
		if c == name {
			return i, true
		}
	}
	return 0, false
}

// Classes returns the provider's priority classes, the top first, or nil
// when it declares none.
func (p *Provider) Classes() []string {
	if p.Priority == nil {
		return nil
	}
	return append([]string(nil), p.Priority.Classes...)
}

// ClassName returns the name of the provider's class i (a
// quota.Request.Class that Resolve set), or "" when the provider has no
// classes or i is not one of them.
func (p *Provider) ClassName(i int) string {
	if p == nil || p.Priority == nil || i < 0 || i >= len(p.Priority.Classes) {
		return ""
	}
	return p.Priority.Classes[i]
}

// class resolves the class of a request of provider p matching route rt
// (nil for none) that names the class name ("" for none): name, else the
// route's default, else the provider's. ok is false for a name p does
// not declare.
func (p *Provider) class(rt *Route, name string) (int, bool) {
	pr := p.Priority
	if name != "" {
		return pr.Index(name)
	}
	if rt != nil && rt.class > 0 {
		return rt.class - 1, true
	}
	return pr.Default, true
}

// unknownClass is Resolve's error for a class p does not declare.
func unknownClass(p *Provider, name string) error {
	if len(name) > 64 {
		name = name[:64] + "..."
	}
	return fmt.Errorf("%w %s: provider %s declares %s", ErrUnknownClass, strconv.Quote(name), p.Name, strings.Join(p.Priority.Classes, ", "))
}

var priorityFields = []string{"classes", "default", "reserve", "active_for"}

// priority decodes a provider's priority field n. It returns nil when
// the classes themselves have a problem (the fields that name classes
// are then not checked against a list that is wrong), and reports false
// after any problem.
func (l *loader) priority(n *yaml.Node, path string) (*Priority, bool) {
	f := l.fields(n, path, priorityFields...)
	if f == nil {
		return nil, false
	}
	pr := &Priority{ActiveFor: quota.DefaultActiveFor}
	good := true
	if an := f["active_for"]; an != nil {
		if d, ok := l.duration(an, path+".active_for", false); !ok {
			good = false
		} else if d > maxActiveFor {
			l.add(an, path+".active_for", "active_for %v is above %v: a reserve held that long after its class's last request is a share taken from the classes below; use a shorter time, or a lower reserve", d, maxActiveFor)
			good = false
		} else {
			pr.ActiveFor = d
		}
	}
	if !l.classNames(pr, f["classes"], n, path+".classes") {
		return nil, false
	}
	pr.Default = len(pr.Classes) - 1
	if dn := f["default"]; dn != nil {
		if i, ok := l.className(pr, dn, path+".default"); ok {
			pr.Default = i
		} else {
			good = false
		}
	}
	pr.Reserve = make([]int64, len(pr.Classes)-1)
	if rn := f["reserve"]; rn != nil {
		if rn.Kind != yaml.MappingNode {
			l.wrongKind(rn, path+".reserve", "a mapping from class names to the share of each limit they keep, e.g. {interactive: 20%}")
			good = false
		} else if !l.classShares(pr, pr.Reserve, rn, path+".reserve") {
			good = false
		}
	}
	return pr, good
}

// maxActiveFor bounds active_for: a day is far beyond a class's pause
// between two requests, and keeps the store's activity records short-lived.
const maxActiveFor = 24 * time.Hour

// classNames decodes the field classes (n, nil when missing from the
// priority mapping v) into pr.Classes.
func (l *loader) classNames(pr *Priority, n, v *yaml.Node, path string) bool {
	if n == nil {
		l.add(v, path, "missing: want the class names, the top first, e.g. [interactive, batch]")
		return false
	}
	items, ok := l.list(n, path, "a list of class names, the top first")
	if !ok {
		return false
	}
	good := true
	seen := map[string]int{}
	for i, it := range items {
		ip := index(path, i)
		s, ok := l.str(it, ip, "a class name")
		switch {
		case !ok:
			good = false
		case !validName(s):
			l.add(it, ip, "invalid class name %q: %s", s, nameRule)
			good = false
		case seen[s] > 0:
			l.add(it, ip, "class %q is already listed at line %d: class names are unique", s, seen[s])
			good = false
		default:
			seen[s] = it.Line
			pr.Classes = append(pr.Classes, s)
		}
	}
	switch {
	case !good:
	case len(items) < 2:
		l.add(n, path, "%d class: a class keeps headroom from the classes below it, so declare at least two (the top first, e.g. [interactive, batch]), or remove priority", len(items))
		good = false
	case len(items) > quota.MaxClasses:
		l.add(n, path, "%d classes: at most %d", len(items), quota.MaxClasses)
		good = false
	}
	return good
}

// className decodes a scalar naming one of pr's classes.
func (l *loader) className(pr *Priority, n *yaml.Node, path string) (int, bool) {
	s, ok := l.str(n, path, "a class name")
	if !ok {
		return 0, false
	}
	i, ok := pr.Index(s)
	if !ok {
		l.add(n, path, "unknown class %q: the provider's classes are %s", s, strings.Join(pr.Classes, ", "))
	}
	return i, ok
}

// classShares decodes a mapping from class names to shares (n) into
// shares, one per class but the last, and checks that they sum to less
// than the whole limit.
func (l *loader) classShares(pr *Priority, shares []int64, n *yaml.Node, path string) bool {
	good := true
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kp := join(path, k.Value)
		c, ok := l.className(pr, k, kp)
		if !ok {
			good = false
			continue
		}
		if seen[k.Value] {
			l.add(k, kp, "class %q is given twice", k.Value)
			good = false
			continue
		}
		seen[k.Value] = true
		if c == len(pr.Classes)-1 {
			l.add(k, kp, "%s is the bottom class: no class is below it to keep a reserve from (every class above it keeps its own from it)", k.Value)
			good = false
			continue
		}
		s, ok := l.str(v, kp, "a share such as 20%")
		if !ok {
			good = false
			continue
		}
		bp, ok := parseReserve(s)
		if !ok {
			l.add(v, kp, "want a share of each limit from 0%% to below 100%%, e.g. 20%% or 0.2, got %q", s)
			good = false
			continue
		}
		shares[c] = bp
	}
	if good {
		if sum := sumShares(shares); sum >= 10000 {
			l.add(n, path, "the reserves add up to %s of each limit, which would leave the bottom class nothing: keep their sum below 100%%", percent(sum))
			good = false
		}
	}
	return good
}

// parseReserve reads a share that may be zero ("0", "0%") as well as
// what parseShare reads, in basis points.
func parseReserve(s string) (int64, bool) {
	t := strings.TrimSpace(strings.TrimSuffix(s, "%"))
	if f, err := strconv.ParseFloat(t, 64); err == nil && f == 0 && !strings.ContainsAny(t, "eEinxXpP_") {
		return 0, true
	}
	return parseShare(s)
}

func sumShares(shares []int64) int64 {
	var sum int64
	for _, v := range shares {
		sum += v
	}
	return sum
}

// percent formats basis points as a percentage, e.g. "12.5%".
func percent(bp int64) string {
	return strconv.FormatFloat(float64(bp)/100, 'f', -1, 64) + "%"
}

// routePriority decodes the priority field of route r (whose mapping is
// n) against the classes of p.
func (l *loader) routePriority(p *Provider, r *Route, n *yaml.Node, path string) bool {
	pn := mappingValue(n, "priority")
	if pn == nil || p.priorityBad {
		return true
	}
	path += ".priority"
	if p.Priority == nil {
		l.add(pn, path, "provider %s declares no priority classes: add priority: {classes: [...]} to the provider, or remove the route's priority", p.Name)
		return false
	}
	i, ok := l.className(p.Priority, pn, path)
	if ok {
		r.Priority, r.class = p.Priority.Classes[i], i+1
	}
	return ok
}

// mappingValue returns the value of key in mapping n, or nil.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// limitPriority sets the class reserves and pacing of the provider's
// limits (lims, in file order), from the provider's priority and each
// limit's reserve and pace fields, and checks them: with the quota
// engine's own rules (quota.Limit.Validate), placed at the field to
// change, and that every route's cost fits the bottom class's share of
// each GCRA limit. prio is the provider's priority field, or nil.
func (l *loader) limitPriority(p *Provider, prio *yaml.Node, lims []*limitNodes) {
	if p.priorityBad {
		return
	}
	var reserveNode *yaml.Node // where the provider's reserves are given
	if rn := mappingValue(prio, "reserve"); rn != nil {
		reserveNode = rn
	} else if prio != nil {
		reserveNode = prio
	}
	for _, ln := range lims {
		if ln.lim == nil {
			continue
		}
		q := ln.lim.Quota
		if !l.pace(p, q, ln) || !l.reserve(p, q, ln) || p.reservesBad {
			continue // a limit whose reserves are wrong is not checked further
		}
		where, wp := ln.reserve, join(ln.path, "reserve")
		if where == nil && q.Reserve != nil {
			where, wp = ln.capacity, join(ln.path, ln.capField)
		}
		if q.Reserve != nil && q.Learn {
			l.add(ln.learn, join(ln.path, "learn"), "limit %s learns the vendor's limit, and a learning limit cannot keep class reserves: set reserve: 0%% on it (the provider's priority reserves it otherwise)", q.Name)
			continue
		}
		if q.Reserve != nil && q.Fair {
			l.add(ln.fair, join(ln.path, "fair"), "limit %s is shared fairly among tenants, and a fair limit cannot keep class reserves (its share is per tenant, not per class): set reserve: 0%% on it (the provider's priority reserves it otherwise)", q.Name)
			continue
		}
		msg := laneProblem(p, q)
		if msg == "" {
			if err := q.Validate(); err != nil {
				msg = err.Error()
			}
		}
		if msg != "" {
			if ln.reserve == nil && q.Reserve != nil {
				msg += fmt.Sprintf(" (the reserves of the provider's priority, line %d: give the limit a reserve of its own to change them for it alone, or reserve: 0%% to keep none in it)", reserveNode.Line)
			}
			if where == nil {
				where, wp = ln.node, ln.path
			}
			l.add(where, wp, "%s", msg)
		}
	}
	for i := range p.Routes {
		if !p.reservesBad {
			l.laneAdmits(p, &p.Routes[i], lims)
		}
	}
}

// pace decodes the pace field of the limit q (nodes ln): true, false, or
// {reserve: 10%}, on a calendar window only.
func (l *loader) pace(p *Provider, q *quota.Limit, ln *limitNodes) bool {
	n := ln.pace
	if n == nil {
		return true
	}
	path := join(ln.path, "pace")
	var reserve *yaml.Node
	switch {
	case n.Kind == yaml.ScalarNode && (n.Value == "true" || n.Value == "false"):
		if n.Value == "false" {
			return true
		}
	case n.Kind == yaml.MappingNode:
		f := l.fields(n, path, "reserve")
		if f == nil {
			return false
		}
		if reserve = f["reserve"]; reserve == nil {
			l.add(n, path+".reserve", "missing: want pace: true, or pace: {reserve: 10%%} to keep a share of the window for the top class until its last minutes")
			return false
		}
	default:
		l.add(n, path, "want true, false or {reserve: 10%%}, got %s", kindName(n))
		return false
	}
	if q.Kind != quota.Window {
		l.add(n, path, "pace spreads a calendar window (quota per hour, day or month) over the window; limit %s is a %v limit", q.Name, q.Kind)
		return false
	}
	q.Pace = true
	if reserve == nil {
		return true
	}
	rp := path + ".reserve"
	s, ok := l.str(reserve, rp, "a share such as 10%")
	if !ok {
		return false
	}
	bp, ok := parseReserve(s)
	if !ok {
		l.add(reserve, rp, "want a share of the window from 0%% to below 100%%, e.g. 10%%, got %q", s)
		return false
	}
	if bp > 0 && p.Priority == nil {
		l.add(reserve, rp, "the pace reserve keeps part of the window for the top priority class, but provider %s declares no classes: add priority: {classes: [...]} to the provider, or write pace: true", p.Name)
		return false
	}
	q.PaceReserve = bp
	return true
}

// reserve sets q.Reserve and q.ActiveFor from the provider's priority
// and the limit's own reserve field: a mapping from classes to shares
// over the provider's, or 0% for none.
func (l *loader) reserve(p *Provider, q *quota.Limit, ln *limitNodes) bool {
	pr := p.Priority
	n := ln.reserve
	path := join(ln.path, "reserve")
	if n != nil && pr == nil {
		l.add(n, path, "provider %s declares no priority classes to keep a reserve for: add priority: {classes: [...]} to the provider, or remove reserve", p.Name)
		return false
	}
	if pr == nil {
		return true
	}
	shares := append([]int64(nil), pr.Reserve...)
	switch {
	case n == nil:
	case n.Kind == yaml.ScalarNode:
		s, ok := l.str(n, path, "0% or a mapping from classes to shares")
		if !ok {
			return false
		}
		if bp, ok := parseReserve(s); !ok || bp != 0 {
			l.add(n, path, "want 0%% (no class keeps a reserve in this limit) or a share per class, e.g. {%s: 20%%}, got %q: one share is not said to be whose", pr.Classes[0], s)
			return false
		}
		for i := range shares {
			shares[i] = 0
		}
	case n.Kind == yaml.MappingNode:
		if !l.classShares(pr, shares, n, path) {
			return false
		}
	default:
		l.wrongKind(n, path, "0% or a mapping from class names to shares, e.g. {"+pr.Classes[0]+": 20%}")
		return false
	}
	if sumShares(shares) == 0 && q.PaceReserve == 0 {
		return true // no class keeps anything: the limit decides as it would without classes
	}
	q.Reserve, q.ActiveFor = shares, pr.ActiveFor
	return true
}

// laneAdmits checks that route r's cost fits the bottom class's lane of
// every GCRA limit of its stack (p's limits and the route's) that keeps
// class reserves: a request of the bottom class is admitted in its own
// lane alone, so a larger cost could never be.
func (l *loader) laneAdmits(p *Provider, r *Route, lims []*limitNodes) {
	for _, ln := range lims {
		q := ln.lim.Quota
		if q.Kind != quota.GCRA || q.Reserve == nil || !(inStack(ln.lim, p.Limits) || inStack(ln.lim, r.Limits)) || q.Validate() != nil {
			continue
		}
		cost := r.Cost
		if v, ok := r.Costs[q.Name]; ok {
			cost = v
		}
		lanes := q.Lanes()
		if bottom := lanes[len(lanes)-1]; cost > bottom.Burst {
			l.add(ln.capacity, join(ln.path, ln.capField),
				"the bottom class's share of limit %s (what the reserves of the classes above it leave) has a burst of %d, below the cost %d of route %s, so such a request of the bottom class could never be admitted: raise the burst, or lower the reserves or the cost",
				q.Name, bottom.Burst, cost, r.Name)
		}
	}
}

// classChanges lists what a change of provider op's classes (np's) does
// to the requests that name them.
func classChanges(op, np *Provider) []Change {
	oc, nc := op.Classes(), np.Classes()
	od, nd := op.ClassName(defaultClass(op)), np.ClassName(defaultClass(np))
	if strings.Join(oc, ",") == strings.Join(nc, ",") && od == nd {
		return nil
	}
	var gone []string
	for _, c := range oc {
		if !contains(nc, c) {
			gone = append(gone, c)
		}
	}
	detail := fmt.Sprintf("priority classes %s -> %s, default class %s -> %s", classList(oc), classList(nc), orNone(od), orNone(nd))
	switch {
	case len(nc) == 0:
		detail += ": the provider's requests no longer have a class, and the classes they name are ignored"
	case len(gone) > 0:
		detail += fmt.Sprintf(": a request that names %s is refused (ErrUnknownClass, the proxy's 400) until its callers stop naming it", strings.Join(gone, ", "))
	}
	if len(oc) > 0 && len(nc) > 0 && !samePrefix(oc, nc) {
		detail += "; the store records a class's activity by its place in the list, so for up to active_for a class's recent requests count as the class now in that place"
	}
	return []Change{{Provider: op.Name, Kind: PriorityChanged, Detail: detail}}
}

// reserveChanges lists what a change of a limit's class reserves or
// pacing, ol in op to nl in np (of the same kind), does to its state.
func reserveChanges(op, np *Provider, ol, nl *Limit) []Change {
	oq, nq := ol.Quota, nl.Quota
	name := oq.Name
	var out []Change
	add := func(k ChangeKind, format string, args ...any) {
		out = append(out, Change{Provider: op.Name, Limit: name, Kind: k, Detail: fmt.Sprintf(format, args...)})
	}
	ors, nrs := reserveString(op, oq), reserveString(np, nq)
	if oq.Kind == quota.GCRA && len(oq.Reserve) != len(nq.Reserve) {
		switch {
		case oq.Reserve == nil:
			add(LanesChanged, "class reserves none -> %s: its state becomes the bottom class's lane (%s keeps what was spent), and the lanes of the classes above it start full: until they refill, the fleet may admit up to their bursts (%d) beyond the limit",
				nrs, np.ClassName(len(nq.Reserve)), upperBursts(nq))
		case nq.Reserve == nil:
			add(LanesChanged, "class reserves %s -> none: the bottom lane's state (the limit's key) is the whole limit's again, and what the lanes of the classes above it had spent is forgotten", ors)
		default:
			add(LanesChanged, "class reserves %s -> %s: the number of lanes changes; the bottom lane keeps the limit's key, a new upper lane starts full (up to its burst may be admitted beyond the limit until it refills), a lane no longer kept is forgotten", ors, nrs)
		}
	} else if ors != nrs {
		what := "the counts stay, and the new reserves hold from the next decision"
		if oq.Kind == quota.GCRA {
			what = "each lane keeps its state, read at its new share from the next decision"
		}
		add(PriorityChanged, "class reserves %s -> %s: %s", ors, nrs, what)
	}
	if oq.Reserve != nil && nq.Reserve != nil && oq.Kind != quota.GCRA && activeFor(oq) != activeFor(nq) {
		add(PriorityChanged, "active_for %v -> %v: from the next decision", activeFor(oq), activeFor(nq))
	}
	if oq.Pace != nq.Pace || oq.PaceReserve != nq.PaceReserve {
		add(PriorityChanged, "pace %s -> %s: the window's count stays; the pacing applies from the next decision", paceString(oq), paceString(nq))
	}
	return out
}

// defaultClass is the index of p's default class, or -1.
func defaultClass(p *Provider) int {
	if p.Priority == nil {
		return -1
	}
	return p.Priority.Default
}

func classList(cs []string) string {
	if len(cs) == 0 {
		return "none"
	}
	return "[" + strings.Join(cs, ", ") + "]"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// samePrefix reports whether the shorter of a and b starts the other.
func samePrefix(a, b []string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ReserveString describes the class reserves of q, a limit of p, e.g.
// "interactive 20%, default 10%", or "none".
func ReserveString(p *Provider, q *quota.Limit) string { return reserveString(p, q) }

func reserveString(p *Provider, q *quota.Limit) string {
	if q.Reserve == nil {
		return "none"
	}
	parts := make([]string, len(q.Reserve))
	for i, bp := range q.Reserve {
		c := p.ClassName(i)
		if c == "" {
			c = "class " + strconv.Itoa(i)
		}
		parts[i] = c + " " + percent(bp)
	}
	return strings.Join(parts, ", ")
}

// PaceString describes the pacing of q: "off", "on" or "on, reserve
// 10%".
func PaceString(q *quota.Limit) string { return paceString(q) }

func paceString(q *quota.Limit) string {
	switch {
	case !q.Pace:
		return "off"
	case q.PaceReserve > 0:
		return "on, reserve " + percent(q.PaceReserve)
	}
	return "on"
}

// upperBursts is the sum of the bursts of q's lanes above the bottom.
func upperBursts(q *quota.Limit) int64 {
	if q.Validate() != nil {
		return 0
	}
	var sum int64
	lanes := q.Lanes()
	for _, l := range lanes[:len(lanes)-1] {
		sum += l.Burst
	}
	return sum
}

// activeFor is q's ActiveFor, its default applied.
func activeFor(q *quota.Limit) time.Duration {
	if q.ActiveFor == 0 {
		return quota.DefaultActiveFor
	}
	return q.ActiveFor
}

// laneProblem says, naming the classes, why a GCRA limit q of p cannot
// keep its class reserves in lanes (quota.Limit.Lanes): each class above
// the bottom keeps a lane of its own, which needs at least one event per
// period and a burst of one, and the bottom class keeps what is left.
// It returns "" when every lane is possible (Validate checks the rest).
func laneProblem(p *Provider, q *quota.Limit) string {
	if q.Kind != quota.GCRA || q.Reserve == nil || q.Learn {
		return ""
	}
	lanes := q.Lanes()
	bottom := len(lanes) - 1
	least := func(of int64) string { return percent((quota.BasisPoints + of - 1) / of) }
	for k, lane := range lanes {
		c := p.ClassName(k)
		switch {
		case k == bottom && (lane.Rate < 1 || lane.Burst < 1):
			return fmt.Sprintf("the reserves (%s) leave the bottom class %s a rate of %d and a burst of %d in limit %s: lower them", reserveString(p, q), c, lane.Rate, lane.Burst, q.Name)
		case k == bottom:
		case q.Reserve[k] == 0:
			return fmt.Sprintf("class %s keeps no reserve in limit %s, but a GCRA limit keeps each class above the bottom in a lane of its own, of at least one event per period: give %s a reserve (at least %s of this limit), or leave the class out of the provider's classes",
				c, q.Name, c, least(min(q.Rate, q.Capacity())))
		case lane.Rate < 1:
			return fmt.Sprintf("class %s keeps %s of limit %s, less than one event per %v of its rate %d: each class above the bottom keeps a lane of its own in a GCRA limit, so give %s a reserve of at least %s here, or raise the rate",
				c, percent(q.Reserve[k]), q.Name, q.Period, q.Rate, c, least(q.Rate))
		case lane.Burst < 1:
			return fmt.Sprintf("class %s keeps %s of limit %s, less than one event of its burst %d: each class above the bottom keeps a lane of its own in a GCRA limit, so give %s a reserve of at least %s here, or raise the burst",
				c, percent(q.Reserve[k]), q.Name, q.Capacity(), c, least(q.Capacity()))
		}
	}
	return ""
}
