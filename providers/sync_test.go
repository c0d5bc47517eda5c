package providers

import (
	"net/http"
	"testing"

	"github.com/fleetquota/throttle/backoff"
)

// TestSyncLoadsAndRoutesOverride: the provider's sync applies to its
// requests, a route's replaces it for the route's, and a counter may map
// to a route's limit.
func TestSyncLoadsAndRoutesOverride(t *testing.T) {
	cfg, err := Load("sync.yaml", []byte(`
providers:
  github:
    hosts: [api.github.com]
    limits: [{name: core, limit: 4500/h burst 500}]
    sync:
      format: x-ratelimit
      counters: {core: core, search: search}
    routes:
      - name: search
        path: /search/*
        limits: [{name: search, limit: 27/min burst 3}]
  shopify:
    hosts: ["*.myshopify.com"]
    routes:
      - name: graphql
        path: /admin/api/*/graphql.json
        limits: [{name: graphql, limit: 100/s, scope: host}]
        sync: {format: shopify-graphql, counters: {default: graphql}}
      - name: rest
        path: /admin/**
        limits: [{name: rest, limit: 2/s burst 40, scope: host}]
        sync: {format: shopify, counters: {default: rest}}
      - name: other
        path: /**
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url    string
		format backoff.Format
		limit  string // what counter "default" or "core" maps to
	}{
		{"https://api.github.com/repos/a/b", backoff.XRateLimit, "core"},
		{"https://api.github.com/search/issues", backoff.XRateLimit, "core"},
		{"https://s.myshopify.com/admin/api/2026-01/graphql.json", backoff.ShopifyGraphQL, "graphql"},
		{"https://s.myshopify.com/admin/api/2026-01/orders.json", backoff.Shopify, "rest"},
		{"https://s.myshopify.com/robots.txt", 0, ""},
	} {
		req, _ := http.NewRequest("GET", tc.url, nil)
		res, ok, err := cfg.Resolve(req, Input{})
		if !ok || err != nil {
			t.Fatalf("%s: Resolve: %v %v", tc.url, ok, err)
		}
		if tc.format == 0 {
			if res.Sync != nil {
				t.Errorf("%s: Sync = %+v, want none", tc.url, res.Sync)
			}
			continue
		}
		if res.Sync == nil || res.Sync.Format != tc.format {
			t.Fatalf("%s: Sync = %+v, want format %v", tc.url, res.Sync, tc.format)
		}
		got := res.Sync.Counters["default"]
		if tc.format == backoff.XRateLimit {
			got = res.Sync.Counters["core"]
			if s := res.Sync.Counters["search"]; s != "search" {
				t.Errorf("%s: counter search maps to %q, want the route's limit search", tc.url, s)
			}
		}
		if got != tc.limit {
			t.Errorf("%s: counter maps to %q, want %q", tc.url, got, tc.limit)
		}
	}
}
