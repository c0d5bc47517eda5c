package providers

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

func TestMatchPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"/", "/", true},
		{"/", "", true},
		{"/", "/a", false},
		{"/a", "/a", true},
		{"/a", "/a/", true},
		{"/a", "/b", false},
		{"/a", "/a/b", false},
		{"/a/*", "/a/b", true},
		{"/a/*", "/a", false},
		{"/a/*", "/a/", false},
		{"/a/*", "/a//", false},
		{"/a/{id}/c", "/a/1/c", true},
		{"/a/{id}/c", "/a/1/d", false},
		{"/**", "/", true},
		{"/**", "/x/y/z", true},
		{"/a/**", "/a", true},
		{"/a/**", "/a/b/c", true},
		{"/a/**", "/ab", false},
		{"/a/*/**", "/a", false},
		{"/a/*/**", "/a/b", true},
	}
	for _, tt := range tests {
		segs, msg := parsePattern(tt.pattern)
		if msg != "" {
			t.Fatalf("parsePattern(%q): %s", tt.pattern, msg)
		}
		if got := matchPath(segs, tt.path); got != tt.want {
			t.Errorf("matchPath(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}

func TestCovers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want bool
	}{
		{"/**", "/a/b", true},
		{"/**", "/**", true},
		{"/a/**", "/**", false},
		{"/a/*", "/a/b", true},
		{"/a/b", "/a/*", false},
		{"/a/*", "/a/{id}", true},
		{"/a/*", "/a/*/c", false},
		{"/a/*/c", "/a/b/c", true},
		{"/a", "/a", true},
		{"/a", "/b", false},
		{"/", "/", true},
		{"/", "/a", false},
		{"/a/**", "/a", true},
		{"/a/b/**", "/a/**", false},
	}
	for _, tt := range tests {
		a, _ := parsePattern(tt.a)
		b, _ := parsePattern(tt.b)
		if got := covers(a, b); got != tt.want {
			t.Errorf("covers(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
	if !methodsCover(nil, []string{"GET"}) || methodsCover([]string{"GET"}, nil) ||
		!methodsCover([]string{"GET", "POST"}, []string{"POST"}) || methodsCover([]string{"GET"}, []string{"GET", "POST"}) {
		t.Error("methodsCover")
	}
}

func TestParseShort(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		kind quota.Kind
		rate int64
		per  time.Duration
		unit quota.Unit
		ok   bool
	}{
		{"100/s", quota.GCRA, 100, time.Second, 0, true},
		{"100/sec", quota.GCRA, 100, time.Second, 0, true},
		{"5000/h", quota.GCRA, 5000, time.Hour, 0, true},
		{"5000/hour", quota.GCRA, 5000, time.Hour, 0, true},
		{"30/min", quota.GCRA, 30, time.Minute, 0, true},
		{"30/m", quota.GCRA, 30, time.Minute, 0, true},
		{"100/10s", quota.GCRA, 100, 10 * time.Second, 0, true},
		{"100/10min", quota.GCRA, 100, 10 * time.Minute, 0, true},
		{"100/day", quota.Window, 100, 0, quota.Day, true},
		{"100/d", quota.Window, 100, 0, quota.Day, true},
		{"100/month", quota.Window, 100, 0, quota.Month, true},
		{"100/hour resets 00:15", quota.Window, 100, 0, quota.Hour, true},
		{"  100/s   burst   5 ", quota.GCRA, 100, time.Second, 0, true},
		{"100", 0, 0, 0, 0, false},
		{"/s", 0, 0, 0, 0, false},
		{"-1/s", 0, 0, 0, 0, false},
		{"1e3/s", 0, 0, 0, 0, false},
		{"100/s burst", 0, 0, 0, 0, false},
		{"100/s burst 0", 0, 0, 0, 0, false},
		{"100/s burst 5 burst 6", 0, 0, 0, 0, false},
		{"100/day resets", 0, 0, 0, 0, false},
		{"100/day resets 0:00", 0, 0, 0, 0, false},
		{"100/day resets -1:00", 0, 0, 0, 0, false},
		{"100/0s", 0, 0, 0, 0, false},
		{"100/-1s", 0, 0, 0, 0, false},
		{"99999999999999999999/s", 0, 0, 0, 0, false},
		{"100/9999999999h", 0, 0, 0, 0, false},
		{"100/s extra", 0, 0, 0, 0, false},
		{"100 concurrent", quota.Concurrency, 100, DefaultLease, 0, true},
		{"25 concurrent lease 2m", quota.Concurrency, 25, 2 * time.Minute, 0, true},
		{"25 concurrent lease", 0, 0, 0, 0, false},
		{"25 concurrent lease 10ms", 0, 0, 0, 0, false},
		{"25 concurrent lease 48h", 0, 0, 0, 0, false},
		{"25 concurrent burst 5", 0, 0, 0, 0, false},
		{"x concurrent", 0, 0, 0, 0, false},
	}
	for _, tt := range tests {
		f, msg := parseShort(tt.in)
		if ok := msg == ""; ok != tt.ok {
			t.Errorf("parseShort(%q) = %q; want ok %v", tt.in, msg, tt.ok)
			continue
		}
		if tt.ok && (f.kind != tt.kind || f.rate != tt.rate || f.period != tt.per || f.unit != tt.unit) {
			t.Errorf("parseShort(%q) = %+v", tt.in, f)
		}
	}
}

func TestNormalizeHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, key string
		wild    bool
		ok      bool
	}{
		{"api.example.com", "api.example.com", false, true},
		{"API.Example.COM.", "api.example.com", false, true},
		{"*.example.com", ".example.com", true, true},
		{"*.example.com:8443", ".example.com:8443", true, true},
		{"api.example.com:443", "api.example.com:443", false, true},
		{"[::1]:9000", "::1:9000", false, true},
		{"*", "", false, false},
		{"*.", "", false, false},
		{"a..b", "", false, false},
		{"a.*.b", "", false, false},
		{"a.b:0", "", false, false},
		{"a.b:", "", false, false},
		{"a.b:08", "", false, false},
		{"*.[::1]", "", false, false},
		{"a b", "", false, false},
	}
	for _, tt := range tests {
		key, wild, msg := normalizeHost(tt.in)
		if ok := msg == ""; ok != tt.ok || key != tt.key || wild != tt.wild {
			t.Errorf("normalizeHost(%q) = %q, %v, %q", tt.in, key, wild, msg)
		}
	}
}

// TestLongestHost: a host of the maximum length, with a trailing dot and a
// port, still resolves.
func TestLongestHost(t *testing.T) {
	t.Parallel()
	host := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	if len(host) != 253 {
		t.Fatalf("len %d", len(host))
	}
	cfg, err := Load("long.yaml", []byte("providers:\n  p:\n    hosts: [\""+host+".:65535\"]\n    limits: [{name: x, limit: 1/s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "https://"+strings.ToUpper(host)+".:65535/", nil)
	if _, ok, _ := cfg.Resolve(req, Input{}); !ok {
		t.Error("the longest host did not resolve")
	}
}

// TestResolveCleansThePath (D15): a path with repeated slashes, "." or
// ".." segments matches the route its clean form matches, as the vendor
// reads it; case is not folded.
func TestResolveCleansThePath(t *testing.T) {
	t.Parallel()
	cfg, err := Load("d15.yaml", []byte(`
providers:
  github:
    hosts: [api.github.com]
    limits: [{name: core, limit: 5000/hour}]
    routes:
      - {name: writes, method: [POST], path: /repos/*/*/issues, costs: {core: 5}, limits: [{name: content, limit: 80/min}]}
      - {name: root, path: /, limits: [{name: root, limit: 1/s}]}
`), WithLookupEnv(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path, route string
	}{
		{"/repos/o/r/issues", "writes"},
		{"/repos/o/r/issues/", "writes"},
		{"/repos//o/r/issues", "writes"},
		{"//repos/o/r//issues//", "writes"},
		{"/repos/o/r/./issues", "writes"},
		{"/repos/o/r/x/../issues", "writes"},
		{"/repos/o/r/%2e%2e/r/issues", "writes"}, // decoded, then resolved
		{"/repos/o/r/issues/..", ""},
		{"/../../repos/o/r/issues", "writes"},
		{"/Repos/o/r/issues", ""}, // the vendor's business
		{"/.", "root"},
		{"//", "root"},
		{"/x/..", "root"},
	} {
		req := newRequest(t, "POST", "https://api.github.com"+tt.path)
		res, ok, err := cfg.Resolve(req, Input{})
		if !ok || err != nil {
			t.Fatalf("%s: Resolve = %v, %v", tt.path, ok, err)
		}
		got := ""
		if res.Route != nil {
			got = res.Route.Name
		}
		if got != tt.route {
			t.Errorf("%s: route %q, want %q", tt.path, got, tt.route)
		}
		want := 1 // core alone
		if tt.route != "" {
			want = 2 // and the route's limit
		}
		if len(res.Request.Items) != want {
			t.Errorf("%s: %d items, want %d", tt.path, len(res.Request.Items), want)
		}
	}
}

func TestCleanPathKeepsCleanPathsWithoutAllocating(t *testing.T) {
	for _, p := range []string{"", "/", "/repos/o/r/issues", "/repos/o/r/issues/", "relative/x"} {
		if n := testing.AllocsPerRun(100, func() { cleanPath(p) }); n != 0 {
			t.Errorf("cleanPath(%q): %v allocations, want 0", p, n)
		}
	}
}
