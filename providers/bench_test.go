package providers

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// bigConfig has 1,000 providers and 10,000 hosts: per provider nine exact
// hosts and one wildcard.
func bigConfig(b *testing.B) *Config {
	b.Helper()
	var sb strings.Builder
	sb.WriteString("providers:\n")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&sb, "  p%d:\n    hosts: [", i)
		for j := 0; j < 9; j++ {
			fmt.Fprintf(&sb, "api%d.vendor%d.example, ", j, i)
		}
		fmt.Fprintf(&sb, "\"*.eu.vendor%d.example\"]\n", i)
		sb.WriteString("    limits:\n      - {name: peak, limit: 100/s}\n      - {name: daily, limit: 100000/day}\n")
		sb.WriteString("      - {name: tenant, limit: 10/s, scope: business}\n")
		sb.WriteString("    routes:\n      - {name: search, method: GET, path: /search/*, limits: [{name: search, limit: 30/min}]}\n")
	}
	cfg, err := Load("big.yaml", []byte(sb.String()), WithLookupEnv(noEnv))
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

func benchResolve(b *testing.B, reg *Registry, url string, in Input) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok, err := reg.Resolve(req, in); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkResolve(b *testing.B) {
	small := newTestRegistry(b)
	big := NewRegistry(bigConfig(b))
	b.Run("provider-wide", func(b *testing.B) {
		benchResolve(b, small, "https://api.wide.example/v1/things", Input{})
	})
	b.Run("provider-wide-route", func(b *testing.B) {
		benchResolve(b, small, "https://api.wide.example/search/code", Input{})
	})
	b.Run("tenant", func(b *testing.B) {
		benchResolve(b, small, "https://api.tenant.example/x", Input{Business: "acme"})
	})
	b.Run("mixed-scopes", func(b *testing.B) {
		benchResolve(b, small, "https://api.mixed.example/x", Input{Business: "acme", Labels: map[string]string{"class": "batch"}})
	})
	b.Run("1000-providers-exact", func(b *testing.B) {
		benchResolve(b, big, "https://api7.vendor777.example/search/x", Input{Business: "acme"})
	})
	b.Run("1000-providers-wildcard", func(b *testing.B) {
		benchResolve(b, big, "https://a.b.eu.vendor777.example/x", Input{Business: "acme"})
	})
	b.Run("1000-providers-miss", func(b *testing.B) {
		req, _ := http.NewRequest("GET", "https://a.b.c.unknown.example/x", nil)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, ok, _ := big.Resolve(req, Input{}); ok {
				b.Fatal("matched")
			}
		}
	})
}

// TestResolveAllocs pins the allocation counts the benchmarks show.
func TestResolveAllocs(t *testing.T) {
	reg := newTestRegistry(t)
	tests := []struct {
		url string
		in  Input
		max float64
	}{
		{"https://api.wide.example/v1/things", Input{}, 0},
		{"https://api.wide.example/search/code", Input{}, 0},
		{"https://example.org/", Input{}, 0},
		{"https://api.tenant.example/x", Input{Business: "acme"}, 2},
		{"https://api.mixed.example/x", Input{Business: "acme"}, 2},
	}
	for _, tt := range tests {
		req := newRequest(t, "GET", tt.url)
		got := testing.AllocsPerRun(100, func() { reg.Resolve(req, tt.in) })
		if got > tt.max {
			t.Errorf("%s: %v allocations, want at most %v", tt.url, got, tt.max)
		}
	}
}
