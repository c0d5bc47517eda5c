package providers

import (
	"gopkg.in/yaml.v3"

	"github.com/fleetquota/throttle/quota"
)

var providerFields = []string{
	"hosts", "source", "read", "limits", "routes", "on_limit", "max_wait", "headroom",
	"mode", "on_store_error", "local_share", "signals", "keys", "sync", "settle", "priority",
	"plans", "default_plan", "ahead",
}

// provider decodes one provider. It returns nil only when v is not a
// mapping; otherwise a provider with whatever could be decoded (problems
// are recorded), and the nodes of its hosts.
func (l *loader) provider(name string, v *yaml.Node, path string) (*Provider, []*yaml.Node) {
	f := l.fields(v, path, providerFields...)
	if f == nil {
		return nil, nil
	}
	p := &Provider{Name: name, Headroom: 1}
	hostNodes := l.hosts(p, f["hosts"], v, path+".hosts")
	if n := f["source"]; n != nil {
		p.Source, _ = l.str(n, path+".source", "a URL")
	}
	if n := f["read"]; n != nil {
		p.Read, _ = l.str(n, path+".read", "a date")
	}
	l.waiting(p, f, path)
	bp := l.headroom(p, f["headroom"], path+".headroom")
	if n := f["mode"]; n != nil {
		if i, ok := l.enum(n, path+".mode", "enforce", "shadow"); ok {
			p.Mode = Mode(i)
		}
	}
	l.storeErrors(p, f, path)
	if n := f["signals"]; n != nil {
		p.Signals = l.signals(n, path+".signals")
	}
	keys := f["keys"]
	if keys != nil {
		if i, ok := l.enum(keys, path+".keys", "per_provider", "per_tenant"); ok {
			p.Keys = KeyMode(i)
		}
	}
	if n := f["priority"]; n != nil {
		var ok bool
		p.Priority, ok = l.priority(n, path+".priority")
		p.priorityBad, p.reservesBad = p.Priority == nil, !ok
	}
	names := make(map[string]string) // limit name -> path of its definition
	var limitNodes, routeNodes []*limitNodes
	if n := f["limits"]; n != nil {
		p.Limits, limitNodes = l.limits(n, path+".limits", bp, names)
	}
	if n := f["routes"]; n != nil {
		p.Routes, routeNodes = l.routes(p, n, path+".routes", bp, names, limitNodes)
	}
	if n := f["sync"]; n != nil {
		p.Sync = l.sync(n, path+".sync", "provider "+p.Name, append(limitNodes, routeNodes...))
	}
	if n := f["settle"]; n != nil {
		p.Settle = l.settle(n, path+".settle", "provider "+p.Name, append(limitNodes, routeNodes...))
	}
	l.limitPriority(p, f["priority"], append(limitNodes, routeNodes...))
	l.checkLearners(p, append(limitNodes, routeNodes...))
	l.fairLimits(p, append(limitNodes, routeNodes...), keys)
	l.aheads(p, f["ahead"], path, append(limitNodes, routeNodes...))
	if len(p.Limits) == 0 && len(p.Routes) == 0 && f["limits"] == nil {
		l.add(v, path+".limits", "missing: want a list of limits (or routes with limits)")
	}
	// A request that matches no route has cost 1, which every limit admits.
	l.finish(p)
	l.tenantKeys(p, append(limitNodes, routeNodes...), keys, path+".keys")
	l.plans(p, f, path, bp, append(limitNodes, routeNodes...))
	return p, hostNodes
}

// hosts decodes the provider's hosts (n, nil when missing from the
// provider's mapping v) into p.Hosts, and returns the node of each.
func (l *loader) hosts(p *Provider, n, v *yaml.Node, path string) []*yaml.Node {
	var hostNodes []*yaml.Node
	if n == nil {
		l.add(v, path, "missing: want a list of host names, e.g. [api.example.com, \"*.example.com\"]")
	} else if items, ok := l.list(n, path, "a list of host names"); ok {
		if len(items) == 0 {
			l.add(n, path, "empty: want at least one host")
		}
		for i, it := range items {
			if s, ok := l.str(it, index(path, i), "a host name"); ok {
				p.Hosts = append(p.Hosts, s)
				hostNodes = append(hostNodes, it)
			}
		}
	}
	return hostNodes
}

// waiting decodes on_limit and max_wait: whether and how long a request
// waits for its slot.
func (l *loader) waiting(p *Provider, f map[string]*yaml.Node, path string) {
	if n := f["on_limit"]; n != nil {
		if i, ok := l.enum(n, path+".on_limit", "wait", "fail"); ok {
			p.OnLimit = OnLimit(i)
		}
	}
	if n := f["max_wait"]; n != nil {
		if d, ok := l.duration(n, path+".max_wait", true); ok {
			p.MaxWait = d
			if d > quota.LongestWait {
				l.add(n, path+".max_wait", "max_wait %v is above the longest wait a store grants, %v (about 71 years): "+
					"no request waits that long; give the longest wait you mean, e.g. 24h to wait for a daily quota", d, quota.LongestWait)
			} else if p.OnLimit == Fail {
				l.add(n, path+".max_wait", "max_wait has no effect with on_limit: fail; remove it or use on_limit: wait")
			}
		}
	} else if p.OnLimit == Wait {
		p.MaxWait = DefaultMaxWait
	}
}

// headroom decodes the share of the published limits the provider uses
// (n, nil when not given) into p.Headroom, and returns it in basis points,
// as the limits are scaled.
func (l *loader) headroom(p *Provider, n *yaml.Node, path string) int64 {
	bp := int64(10000)
	if n != nil {
		if s, ok := l.str(n, path, "a share"); ok {
			if v, ok := parseShare(s); ok {
				bp = v
				p.Headroom = float64(v) / 10000
			} else {
				l.add(n, path, "want a share of the published limits above 0 and at most 100%%, e.g. 95%% or 0.95, got %q", s)
			}
		}
	}
	return bp
}

// storeErrors decodes on_store_error and local_share: what a request does
// when the store cannot be reached.
func (l *loader) storeErrors(p *Provider, f map[string]*yaml.Node, path string) {
	if n := f["on_store_error"]; n != nil {
		if i, ok := l.enum(n, path+".on_store_error", "fail_closed", "fail_open", "local"); ok {
			p.OnStoreError = StoreErrorPolicy(i)
		}
	}
	if n := f["local_share"]; n != nil {
		if s, ok := l.str(n, path+".local_share", "a share"); ok {
			if v, ok := parseShare(s); !ok {
				l.add(n, path+".local_share", "want a share of each rate above 0 and at most 100%%, e.g. 10%% or 0.1, got %q", s)
			} else if p.OnStoreError != Local {
				l.add(n, path+".local_share", "local_share only applies to on_store_error: local")
			} else {
				p.LocalShare = float64(v) / 10000
			}
		}
	} else if p.OnStoreError == Local {
		l.add(f["on_store_error"], path+".local_share", "missing: on_store_error: local needs local_share, the share of each rate one process may use alone, e.g. 10%%")
	}
}

// tenantKeys checks that, with keys per tenant, every limit of the
// provider (routes included) has one scope, and sets it as the tenant
// scope. lims are the provider's limits in file order.
func (l *loader) tenantKeys(p *Provider, lims []*limitNodes, keys *yaml.Node, path string) {
	if p.Keys != PerTenant {
		return
	}
	// Every key of a tenant must live in that tenant's tag whatever the
	// route, and a limit's state must never be split between two tags: a
	// provider-wide limit, or one scoped otherwise, has no place there.
	var first *limitNodes
	for _, ln := range lims {
		if ln.lim.Scope.Kind != ScopeProvider {
			first = ln
			break
		}
	}
	if first == nil {
		l.add(keys, path, "keys: per_tenant gives each tenant's keys a hash tag of their own, but no limit of provider %q is scoped per tenant: scope its limits (e.g. scope: business) or remove keys", p.Name)
		return
	}
	p.tenant = first.lim.Scope
	for _, ln := range lims {
		sc := ln.lim.Scope
		if sc == p.tenant || ln.lim.Fair != nil { // a fair limit: see fairLimits
			continue
		}
		node, fp := ln.scope, ln.path+".scope"
		if node == nil {
			node = ln.node
		}
		what := "is provider-wide"
		if sc.Kind != ScopeProvider {
			what = "is scoped by " + sc.String()
		}
		l.add(node, fp, "limit %s %s, but keys: per_tenant keeps each %s value's keys in a hash tag of its own (the scope of limit %s, line %d): its state would be split across the tenants' tags, each copy admitting the whole limit. Scope it by %s, or remove keys: per_tenant (line %d) to keep every key in the tag %q",
			ln.lim.Quota.Name, what, p.tenant, first.lim.Quota.Name, first.node.Line, p.tenant, keys.Line, p.Name)
	}
}
