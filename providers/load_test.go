package providers

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fleetquota/throttle/quota"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata/invalid")

// noEnv is a lookup that finds no variable.
func noEnv(string) (string, bool) { return "", false }

// env returns a lookup over a map.
func env(m map[string]string) Option {
	return WithLookupEnv(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
}

// TestInvalid loads every fixture of testdata/invalid and compares the
// error with its golden file: one fixture per failure mode.
func TestInvalid(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(filepath.Base(file), data, WithLookupEnv(noEnv))
			if err == nil {
				t.Fatalf("Load = %v, nil; want an error", cfg)
			}
			if cfg != nil {
				t.Errorf("Load returned a config with an error")
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("errors.Is(err, ErrConfig) = false for %v", err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("err is not a *ConfigError with problems: %v", err)
			}
			for _, p := range ce.Problems {
				if p.File != filepath.Base(file) {
					t.Errorf("problem %q: file %q", p, p.File)
				}
			}
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			got := err.Error() + "\n"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("error:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestValidFixtures loads every fixture of testdata/valid.
func TestValidFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			if _, err := LoadFile(file, WithLookupEnv(noEnv)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	t.Parallel()
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || errors.Is(err, ErrConfig) {
		t.Errorf("LoadFile(missing) = %v; want a file error that is not ErrConfig", err)
	}
	big := make([]byte, maxFileSize+1)
	if _, err := Load("big.yaml", big); !errors.Is(err, ErrConfig) {
		t.Errorf("Load(big) = %v; want ErrConfig", err)
	}
}

// TestLimits checks how each written form becomes a quota.Limit.
func TestLimits(t *testing.T) {
	t.Parallel()
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		yaml     string // one limit, inline
		headroom string
		want     quota.Limit
	}{
		{"per second", `{name: x, limit: 100/s}`, "",
			quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 100, Period: time.Second}},
		{"per hour", `{name: x, limit: 5000/h}`, "",
			quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 5000, Period: time.Hour}},
		{"per minute", `{name: x, limit: 30/min}`, "",
			quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 30, Period: time.Minute}},
		{"per 10s", `{name: x, limit: 100/10s}`, "",
			quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 100, Period: 10 * time.Second}},
		{"duration", `{name: x, limit: 7/1m30s}`, "",
			quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 7, Period: 90 * time.Second}},
		{"ms", `{name: x, limit: 1/ms}`, "",
			quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 1, Period: time.Millisecond}},
		{"burst short", `{name: x, limit: 2/s burst 40}`, "",
			quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 2, Period: time.Second, Burst: 40}},
		{"burst field", `{name: x, limit: 2/s, burst: 40}`, "",
			quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 2, Period: time.Second, Burst: 40}},
		{"explicit gcra", `{name: x, rate: 100, period: 1s, burst: 50}`, "",
			quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 100, Period: time.Second, Burst: 50}},
		{"digit separators", `{name: x, limit: 250_000/day}`, "",
			quota.Limit{Name: "x", Kind: quota.Window, Rate: 250000, Calendar: quota.Calendar{Unit: quota.Day}}},
		{"day window", `{name: x, limit: 250000/day resets 00:00 America/Los_Angeles}`, "",
			quota.Limit{Name: "x", Kind: quota.Window, Rate: 250000, Calendar: quota.Calendar{Unit: quota.Day, Location: la}}},
		{"explicit window", `{name: x, quota: 250000, per: day, resets: "09:30", timezone: America/Los_Angeles}`, "",
			quota.Limit{Name: "x", Kind: quota.Window, Rate: 250000, Calendar: quota.Calendar{Unit: quota.Day, Reset: 9*time.Hour + 30*time.Minute, Location: la}}},
		{"short window, zone field", `{name: x, limit: 10/day, timezone: America/Los_Angeles}`, "",
			quota.Limit{Name: "x", Kind: quota.Window, Rate: 10, Calendar: quota.Calendar{Unit: quota.Day, Location: la}}},
		{"month", `{name: x, limit: 1000000/month}`, "",
			quota.Limit{Name: "x", Kind: quota.Window, Rate: 1000000, Calendar: quota.Calendar{Unit: quota.Month}}},
		{"hour window", `{name: x, limit: 1000/hour resets 00:30}`, "",
			quota.Limit{Name: "x", Kind: quota.Window, Rate: 1000, Calendar: quota.Calendar{Unit: quota.Hour, Reset: 30 * time.Minute}}},
		{"headroom floors", `{name: x, limit: 5000/h burst 500}`, "95%",
			quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 4750, Period: time.Hour, Burst: 475}},
		{"headroom exact", `{name: x, limit: 40/min}`, "0.95",
			quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 38, Period: time.Minute}},
		// 30/min at 95% is 28.5/min: rounding the count down would drop 5%
		// more than asked, so the period stretches (rounded up) instead.
		{"headroom fraction", `{name: x, limit: 30/min}`, "0.95",
			quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 30, Period: 63157895 * time.Microsecond, Burst: 28}},
		// Shopify REST: 2/s at 95% used to be 1/s, half the vendor's rate.
		{"headroom on a small rate", `{name: x, limit: 2/s burst 40}`, "95%",
			quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 2, Period: 1052632 * time.Microsecond, Burst: 38}},
		{"headroom never below 1", `{name: x, limit: 1/s}`, "10%",
			quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 1, Period: 10 * time.Second, Burst: 1}},
		{"headroom on window", `{name: x, quota: 1000, per: day}`, "90%",
			quota.Limit{Name: "x", Kind: quota.Window, Rate: 900, Calendar: quota.Calendar{Unit: quota.Day}}},
		{"rolling", `{name: x, limit: 15000/24h rolling}`, "",
			quota.Limit{Name: "x", Kind: quota.Rolling, Rate: 15000, Period: 24 * time.Hour}},
		{"rolling day", `{name: x, limit: 15000/day rolling}`, "",
			quota.Limit{Name: "x", Kind: quota.Rolling, Rate: 15000, Period: 24 * time.Hour}},
		{"rolling 10s", `{name: x, limit: 100/10s rolling}`, "",
			quota.Limit{Name: "x", Kind: quota.Rolling, Rate: 100, Period: 10 * time.Second}},
		{"rolling hour", `{name: x, limit: 100/h rolling}`, "",
			quota.Limit{Name: "x", Kind: quota.Rolling, Rate: 100, Period: time.Hour}},
		{"explicit rolling", `{name: x, quota: 15000, per: 24h, rolling: true}`, "",
			quota.Limit{Name: "x", Kind: quota.Rolling, Rate: 15000, Period: 24 * time.Hour}},
		{"explicit rolling day", `{name: x, quota: 15000, per: day, rolling: true}`, "",
			quota.Limit{Name: "x", Kind: quota.Rolling, Rate: 15000, Period: 24 * time.Hour}},
		{"explicit not rolling", `{name: x, quota: 15000, per: day, rolling: false}`, "",
			quota.Limit{Name: "x", Kind: quota.Window, Rate: 15000, Calendar: quota.Calendar{Unit: quota.Day}}},
		{"headroom on rolling", `{name: x, limit: 1000/24h rolling}`, "95%",
			quota.Limit{Name: "x", Kind: quota.Rolling, Rate: 950, Period: 24 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := "providers:\n  p:\n    hosts: [p.example]\n"
			if tt.headroom != "" {
				src += "    headroom: " + tt.headroom + "\n"
			}
			src += "    limits:\n      - " + tt.yaml + "\n"
			cfg, err := Load("t.yaml", []byte(src), WithLookupEnv(noEnv))
			if err != nil {
				t.Fatal(err)
			}
			p, _ := cfg.Provider("p")
			got := *p.Limits[0].Quota
			if got.Calendar.Location != nil && tt.want.Calendar.Location != nil &&
				got.Calendar.Location.String() == tt.want.Calendar.Location.String() {
				got.Calendar.Location = tt.want.Calendar.Location
			}
			if !got.Equal(&tt.want) {
				t.Errorf("limit = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestBehaviour(t *testing.T) {
	t.Parallel()
	cfg, err := Load("b.yaml", []byte(`
providers:
  defaults:
    hosts: [a.example]
    limits: [{name: x, limit: 1/s}]
  custom:
    hosts: [b.example]
    on_limit: fail
    mode: shadow
    on_store_error: local
    local_share: 25%
    headroom: 0.9
    signals:
      throttled:
        - {status: 429}
        - {status: 403, header: x-ratelimit-remaining, header_value: "0"}
      ignore: [{status: 429, body_contains: insufficient_quota}]
      delay_headers: [retry-after-ms]
      max_delay: 90s
    limits: [{name: x, limit: 10/s}]
`), WithLookupEnv(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := cfg.Provider("defaults")
	if d.OnLimit != Wait || d.MaxWait != DefaultMaxWait || d.Mode != Enforce || d.OnStoreError != FailClosed || d.Headroom != 1 || d.LocalShare != 0 {
		t.Errorf("defaults = %v %v %v %v %v %v", d.OnLimit, d.MaxWait, d.Mode, d.OnStoreError, d.Headroom, d.LocalShare)
	}
	c, _ := cfg.Provider("custom")
	if c.OnLimit != Fail || c.MaxWait != 0 || c.Mode != Shadow || c.OnStoreError != Local || c.LocalShare != 0.25 || c.Headroom != 0.9 {
		t.Errorf("custom = %v %v %v %v %v %v", c.OnLimit, c.MaxWait, c.Mode, c.OnStoreError, c.LocalShare, c.Headroom)
	}
	s := c.Signals
	if len(s.Rules) != 2 || s.Rules[1].Header != "X-Ratelimit-Remaining" || s.Rules[1].HeaderValue != "0" || s.Rules[1].Status != 403 {
		t.Errorf("rules = %+v", s.Rules)
	}
	if len(s.Ignore) != 1 || s.Ignore[0].BodyContains != "insufficient_quota" {
		t.Errorf("ignore = %+v", s.Ignore)
	}
	if len(s.DelayHeaders) != 1 || s.DelayHeaders[0] != "Retry-After-Ms" || s.MaxDelay != 90*time.Second {
		t.Errorf("delay = %v %v", s.DelayHeaders, s.MaxDelay)
	}
}

func TestVariables(t *testing.T) {
	t.Parallel()
	src := []byte(`
providers:
  p:
    hosts: ["${HOST}"]
    max_wait: ${WAIT:-3s}
    limits:
      - {name: x, limit: "${RATE:-10/s}"}
      - {name: y, rate: "${Y_RATE}", period: 1s}
      - {name: z, limit: 1/s}
    source: "$${literal}"
`)
	cfg, err := Load("v.yaml", src, env(map[string]string{"HOST": "api.v.example", "RATE": "", "Y_RATE": "7"}))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := cfg.Provider("p")
	if p.Hosts[0] != "api.v.example" || p.MaxWait != 3*time.Second || p.Limits[0].Quota.Rate != 10 || p.Limits[1].Quota.Rate != 7 {
		t.Errorf("got hosts %v wait %v rates %d %d", p.Hosts, p.MaxWait, p.Limits[0].Quota.Rate, p.Limits[1].Quota.Rate)
	}
	if p.Source != "${literal}" {
		t.Errorf("$$ escape: source %q", p.Source)
	}
	if _, err := Load("v.yaml", src, env(map[string]string{"HOST": "api.v.example"})); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Y_RATE is not set") {
		t.Errorf("unset variable: %v", err)
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	look := func(k string) (string, bool) {
		v, ok := map[string]string{"A": "1", "EMPTY": ""}[k]
		return v, ok
	}
	tests := []struct{ in, want, err string }{
		{"plain", "plain", ""},
		{"${A}", "1", ""},
		{"x${A}y${A}", "x1y1", ""},
		{"${B:-2}", "2", ""},
		{"${EMPTY:-3}", "3", ""},
		{"${EMPTY}", "", ""},
		{"$$A", "$A", ""},
		{"$A", "$A", ""},
		{"cost$", "cost$", ""},
		{"${B}", "", "B is not set"},
		{"${A", "", "unterminated"},
		{"${}", "", "invalid variable name"},
		{"${1X}", "", "invalid variable name"},
	}
	for _, tt := range tests {
		got, err := expand(tt.in, look)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("expand(%q) = %q, %v; want error %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestScale(t *testing.T) {
	t.Parallel()
	tests := []struct{ n, bp, want int64 }{
		{5000, 9500, 4750},
		{30, 9500, 28},
		{1, 9500, 1},
		{1, 1, 1},
		{maxCount, 9999, maxCount / 10000 * 9999},
		{100, 10000, 100},
	}
	for _, tt := range tests {
		if got := scale(tt.n, tt.bp); got != tt.want {
			t.Errorf("scale(%d, %d) = %d, want %d", tt.n, tt.bp, got, tt.want)
		}
	}
	for _, s := range []string{"95%", "0.95", "95.00%"} {
		if bp, ok := parseShare(s); !ok || bp != 9500 {
			t.Errorf("parseShare(%q) = %d, %v", s, bp, ok)
		}
	}
	for _, s := range []string{"0", "0%", "101%", "1.5", "NaN", "Inf", "-5%", "0x1p-2", ""} {
		if bp, ok := parseShare(s); ok {
			t.Errorf("parseShare(%q) = %d, ok", s, bp)
		}
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConfigErrorIsBounded (D17): a file full of mistakes gives the first
// MaxProblems problems and a count of the rest, and no message repeats
// more than maxEcho bytes of a value, escaped and cut on a rune boundary.
func TestConfigErrorIsBounded(t *testing.T) {
	t.Parallel()
	const unknown = 1000
	var sb strings.Builder
	sb.WriteString("providers:\n  p:\n    hosts: [api.p.com]\n    limits: [{name: peak, limit: 1/s}]\n")
	for i := 0; i < unknown; i++ {
		fmt.Fprintf(&sb, "    f%d: 1\n", i)
	}
	_, err := Load("many.yaml", []byte(sb.String()), WithLookupEnv(noEnv))
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Load = %v, want a *ConfigError", err)
	}
	if len(ce.Problems) != MaxProblems || ce.More != unknown-MaxProblems {
		t.Errorf("%d problems listed and %d more, want %d and %d", len(ce.Problems), ce.More, MaxProblems, unknown-MaxProblems)
	}
	for i, p := range ce.Problems { // the first ones in the file, in order
		if want := 5 + i; p.Line != want || p.Path != fmt.Sprintf("providers.p.f%d", i) {
			t.Fatalf("problem %d at line %d path %s, want line %d path providers.p.f%d", i, p.Line, p.Path, want, i)
		}
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, fmt.Sprintf("providers: invalid configuration: %d problems:", unknown)) ||
		!strings.HasSuffix(msg, fmt.Sprintf("\n\t… and %d more problems", unknown-MaxProblems)) {
		t.Errorf("Error() does not count every problem:\n%.300s\n…\n%s", msg, msg[max(0, len(msg)-200):])
	}

	long := strings.Repeat("é", 1<<19) // 1 MB; a cut mid-rune would show as \xc3
	// Control characters, escaped. YAML keys are under 1024 characters.
	ctl := "\x1b[31mred\x1b[0m" + long[:400]
	name := strings.Repeat("V", 100<<10) // a 100 KB variable name
	hostsYAML := fmt.Sprintf("providers:\n  p:\n    hosts: [%q]\n    limits: [{name: peak, limit: \"${%s}\"}]\n  %q:\n    hosts: [api.q.com]\n    limits: [{name: peak, limit: 1/s}]\n",
		long+".com", name, ctl)
	_, err = Load("long.yaml", []byte(hostsYAML), WithLookupEnv(noEnv))
	if !errors.As(err, &ce) || len(ce.Problems) != 3 {
		t.Fatalf("Load = %v, want 3 problems", err)
	}
	for _, p := range ce.Problems {
		s := p.String()
		if len(s) > 600 {
			t.Errorf("a %d-byte problem: %.200s…", len(s), s)
		}
		if strings.Contains(s, "\x1b") || strings.Contains(s, `\xc3`) || !utf8.ValidString(s) {
			t.Errorf("raw control character or a rune cut in two: %q", s)
		}
		if !strings.Contains(s, "…") {
			t.Errorf("no mark of the cut value: %s", s)
		}
	}
}
