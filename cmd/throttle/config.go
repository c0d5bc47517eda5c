package main

import (
	"errors"
	"sort"
	"strings"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// loadConfig loads --config, or the embedded catalog.
func loadConfig(path string) (*providers.Config, error) {
	var cfg *providers.Config
	var err error
	if path == "" {
		cfg, err = providers.LoadCatalog()
	} else {
		cfg, err = providers.LoadFile(path)
	}
	if err != nil {
		if errors.Is(err, providers.ErrConfig) {
			return nil, &configError{err}
		}
		return nil, err
	}
	return cfg, nil
}

// provider looks a provider up by name, as a usage error when unknown.
func provider(cfg *providers.Config, name string) (*providers.Provider, error) {
	if name == "" {
		return nil, usagef("empty provider name")
	}
	p, ok := cfg.Provider(name)
	if !ok {
		var names []string
		for _, p := range cfg.Providers() {
			names = append(names, p.Name)
		}
		sort.Strings(names)
		return nil, usagef("unknown provider %q in %s; known: %s", name, cfg.Name(), strings.Join(names, ", "))
	}
	return p, nil
}

// limitRef is one limit of a provider, with the route that adds it.
type limitRef struct {
	lim   *providers.Limit
	route *providers.Route // nil for the provider's own limits
}

// allLimits lists a provider's limits and then its routes', in file order.
func allLimits(p *providers.Provider) []limitRef {
	var out []limitRef
	for i := range p.Limits {
		out = append(out, limitRef{lim: &p.Limits[i]})
	}
	for i := range p.Routes {
		r := &p.Routes[i]
		for j := range r.Limits {
			out = append(out, limitRef{lim: &r.Limits[j], route: r})
		}
	}
	return out
}

// findLimit finds a provider's limit by name, as a usage error when
// unknown.
func findLimit(p *providers.Provider, name string) (*providers.Limit, error) {
	var names []string
	for _, l := range allLimits(p) {
		if l.lim.Quota.Name == name {
			return l.lim, nil
		}
		names = append(names, l.lim.Quota.Name)
	}
	return nil, usagef("provider %q has no limit %q; its limits: %s", p.Name, name, strings.Join(names, ", "))
}

// scopePart returns the key part of a scope value typed by an operator, as
// Resolve would make it from a request (providers.Scope.Part). A value
// shown by status as a hash ("#" and 32 hex digits) is the key part
// already and is taken as it is.
func scopePart(s providers.Scope, v string) string {
	if quota.IsHash(v) {
		return v
	}
	return s.Part(v)
}
