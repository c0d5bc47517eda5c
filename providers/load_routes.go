package providers

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/fleetquota/throttle/quota"
)

var validMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"}

var routeFields = []string{"name", "method", "path", "cost", "costs", "limits", "sync", "settle", "priority"}

// routes reads a provider's routes. It returns the valid ones and the
// nodes of their limits, in file order.
func (l *loader) routes(p *Provider, n *yaml.Node, path string, bp int64, names map[string]string, base []*limitNodes) ([]Route, []*limitNodes) {
	items, ok := l.list(n, path, "a list of routes")
	if !ok {
		return nil, nil
	}
	var out []Route
	var kept []*limitNodes
	var seen []Route // every route with a valid method and path
	for i, it := range items {
		ip := index(path, i)
		r, own, ok := l.route(it, ip, i, bp, names, base)
		if !ok {
			continue
		}
		good := l.reachable(r, seen, it, ip)
		seen = append(seen, *r)
		good = l.routePriority(p, r, it, ip) && good
		if len(p.Limits)+len(r.Limits) > maxStack {
			l.add(it, ip+".limits", "%d limits in one stack: at most %d", len(p.Limits)+len(r.Limits), maxStack)
			good = false
		}
		good = l.stackAdmits(r, bp, base, own) && good
		if good {
			out = append(out, *r)
			kept = append(kept, own...)
		}
	}
	return out, kept
}

// route decodes the i-th route, at path, with its own limits. base are
// the provider's limits, which its costs and sync may name too. It
// reports false after a problem.
func (l *loader) route(it *yaml.Node, path string, i int, bp int64, names map[string]string, base []*limitNodes) (*Route, []*limitNodes, bool) {
	f := l.fields(it, path, routeFields...)
	if f == nil {
		return nil, nil, false
	}
	r := &Route{Name: "routes[" + strconv.Itoa(i) + "]", Cost: 1}
	good := true
	if nn := f["name"]; nn != nil {
		if s, ok := l.str(nn, path+".name", "a name"); ok && validName(s) {
			r.Name = s
		} else if ok {
			l.add(nn, path+".name", "invalid route name %q: %s", s, nameRule)
		}
	}
	if mn := f["method"]; mn != nil {
		var ok bool
		r.Methods, ok = l.methods(mn, path+".method")
		good = good && ok
	}
	if pn := f["path"]; pn == nil {
		l.add(it, path+".path", "missing: want a path pattern such as /search/* or /** for every path")
		good = false
	} else if s, ok := l.str(pn, path+".path", "a path pattern"); ok {
		segs, msg := parsePattern(s)
		if msg != "" {
			l.add(pn, path+".path", "%s", msg)
			good = false
		} else {
			r.Path, r.segs = s, segs
		}
	} else {
		good = false
	}
	if cn := f["cost"]; cn != nil {
		if v, ok := l.integer(cn, path+".cost", 1, maxCount); ok {
			r.Cost = v
		} else {
			good = false
		}
	}
	var own []*limitNodes
	if ln := f["limits"]; ln != nil {
		r.Limits, own = l.limits(ln, path+".limits", bp, names)
	}
	if cn := f["costs"]; cn != nil {
		if r.Costs = l.costs(cn, path+".costs", base, own); r.Costs == nil {
			good = false
		}
	}
	if sn := f["sync"]; sn != nil {
		if r.Sync = l.sync(sn, path+".sync", "route "+r.Name+"'s stack", base, own); r.Sync == nil {
			good = false
		}
	}
	if sn := f["settle"]; sn != nil {
		if r.Settle = l.settle(sn, path+".settle", "route "+r.Name+"'s stack", base, own); r.Settle == nil {
			good = false
		}
	}
	return r, own, good
}

// methods decodes a route's method field: one method or a list of them,
// where a lone * means any method (nil). It reports false after a
// problem.
func (l *loader) methods(mn *yaml.Node, path string) ([]string, bool) {
	var out []string
	good := true
	var ms []*yaml.Node
	if mn.Kind == yaml.SequenceNode {
		ms = mn.Content
		if len(ms) == 0 {
			l.add(mn, path, "empty: list methods, or leave the field out for any method")
			good = false
		}
	} else {
		ms = []*yaml.Node{mn}
	}
	for j, m := range ms {
		mp := path
		if mn.Kind == yaml.SequenceNode {
			mp = index(mp, j)
		}
		s, ok := l.str(m, mp, "a method such as GET")
		if !ok {
			good = false
			continue
		}
		if s == "*" && len(ms) == 1 {
			break
		}
		valid := false
		for _, v := range validMethods {
			if s == v {
				valid = true
			}
		}
		if !valid {
			l.add(m, mp, "invalid method %q, so the route could never match: want one of %s (upper case), or * for any", s, strings.Join(validMethods, ", "))
			good = false
			continue
		}
		out = append(out, s)
	}
	return out, good
}

// reachable reports whether route r can match at all, recording a
// problem when a route seen before it matches every request it does.
func (l *loader) reachable(r *Route, seen []Route, it *yaml.Node, path string) bool {
	for j := range seen {
		if methodsCover(seen[j].Methods, r.Methods) && covers(seen[j].segs, r.segs) {
			l.add(it, path, "route %s can never match: route %s (%s) matches every request it does; put the more specific route first",
				r.Name, seen[j].Name, seen[j].Path)
			return false
		}
	}
	return true
}

// stackAdmits reports whether every limit of route r's stack (the
// provider's, base, and the route's own) admits the route's cost,
// recording a problem at each limit that does not.
func (l *loader) stackAdmits(r *Route, bp int64, stacks ...[]*limitNodes) bool {
	good := true
	for _, lns := range stacks {
		for _, ln := range lns {
			q := ln.lim.Quota
			cost, where := r.Cost, ""
			if v, ok := r.Costs[q.Name]; ok {
				cost, where = v, " (its costs entry)"
			}
			if c := q.Capacity(); cost > c && q.Kind != quota.Concurrency { // a request holds one lease
				what := "burst"
				if q.Kind == quota.Window {
					what = "quota"
				}
				hr := ""
				if bp != 10000 {
					hr = fmt.Sprintf(" (after headroom %s)", strconv.FormatFloat(float64(bp)/100, 'f', -1, 64)+"%")
				}
				l.add(ln.capacity, join(ln.path, ln.capField),
					"the %s %d of limit %s%s is below the cost %d of route %s%s, so such a request could never be admitted: raise the %s to at least %d or lower the cost",
					what, c, q.Name, hr, cost, r.Name, where, what, cost)
				good = false
			}
		}
	}
	return good
}

// costs reads a route's costs: a map from the name of a limit of the
// route's stack to what one request counts for in it.
func (l *loader) costs(n *yaml.Node, path string, stacks ...[]*limitNodes) map[string]int64 {
	if n.Kind != yaml.MappingNode {
		l.add(n, path, "want a map from limit names to costs, e.g. {points: 5}")
		return nil
	}
	out := map[string]int64{}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if limitNamed(k.Value, stacks) == nil {
			l.add(k, join(path, k.Value), "no limit %q in this route's stack: costs names limits of the provider or the route", k.Value)
			ok = false
			continue
		}
		c, good := l.integer(v, join(path, k.Value), 1, maxCount)
		if !good {
			ok = false
			continue
		}
		out[k.Value] = c
	}
	if !ok {
		return nil
	}
	return out
}
