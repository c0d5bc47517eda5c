package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/redisstore"
)

const (
	validFile   = "testdata/valid.yaml"
	invalidFile = "testdata/invalid.yaml"
)

// cli runs the command line and returns its exit code and output.
func cli(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := cli(context.Background(), args...)
	if code != exitOK {
		t.Fatalf("throttle %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

var prefixes atomic.Int64

// fixture is a Redis, a prefix of its own, the test configuration and a
// store on them, as a fleet process would have.
type fixture struct {
	url    string
	prefix string
	cfg    *providers.Config
	store  *redisstore.Store
	client redis.UniversalClient
}

func newFixture(t *testing.T, url string, client redis.UniversalClient) *fixture {
	t.Helper()
	cfg, err := providers.LoadFile(validFile)
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("cli%d:", prefixes.Add(1))
	st, err := redisstore.New(client, redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{url: url, prefix: prefix, cfg: cfg, store: st, client: client}
}

func startFixture(t *testing.T) *fixture {
	t.Helper()
	srv := redistest.Start(t)
	return newFixture(t, "redis://"+srv.Addr, srv.Client(t))
}

// args appends the flags that point a command at the fixture.
func (f *fixture) args(args ...string) []string {
	return append(args, "--redis", f.url, "--config", validFile, "--prefix", f.prefix)
}

// reserve resolves a request to url for business as the transport does
// and reserves it in the store.
func (f *fixture) reserve(t *testing.T, url, business string) *quota.Reservation {
	t.Helper()
	res, ok, err := f.cfg.Resolve(httptest.NewRequest("GET", url, nil), providers.Input{Business: business})
	if !ok || err != nil {
		t.Fatalf("Resolve(%s): %v %v", url, ok, err)
	}
	r, err := f.store.Reserve(context.Background(), &res.Request)
	if err != nil {
		t.Fatalf("Reserve(%s): %v", url, err)
	}
	return r
}

func (f *fixture) status(t *testing.T, args ...string) view {
	t.Helper()
	out := mustCLI(t, f.args(append([]string{"status", "--json"}, args...)...)...)
	var v view
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("status --json does not parse: %v\n%s", err, out)
	}
	return v
}

func findRow(t *testing.T, v view, provider, limit, value string) row {
	t.Helper()
	for _, p := range v.Providers {
		if p.Name != provider {
			continue
		}
		for _, r := range p.Rows {
			if r.Limit == limit && r.Value == value {
				return r
			}
		}
	}
	t.Fatalf("no row %s/%s/%q in %+v", provider, limit, value, v)
	return row{}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	out := mustCLI(t, "validate", validFile)
	for _, want := range []string{
		"valid, 5 providers",
		"limit core learns the vendor's limit: 10/min at the least, 100/min at most (no ceiling: 10 times the floor)",
		"3 concurrent lease 1m0s",
		"10/min burst 5",
		"100/day resets 00:00 America/Los_Angeles",
		"1000/24h rolling",
		"tagged per business",
		"50/s",  // headroom 50% applied to 100/s
		"3/min", // and to 6/min
		"search: * /search",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
	// A learning limit without a ceiling is valid, with a warning.
	code, _, errOut := cli(context.Background(), "validate", validFile)
	if want := "testdata/valid.yaml: warning: learner: limit core: learn: true without a ceiling: any response can lift it to 100/min (10 times the floor) for 24h0m0s; set learn: {ceiling: N}"; code != exitOK || !strings.Contains(errOut, want) {
		t.Errorf("validate of a learning limit without a ceiling: exit %d, stderr %q; want %d and %q", code, errOut, exitOK, want)
	}
	if out := mustCLI(t, "validate"); !strings.Contains(out, providers.CatalogName+": valid") {
		t.Errorf("validate without FILE does not validate the catalog:\n%s", out)
	}

	code, out, errOut = cli(context.Background(), "validate", invalidFile)
	if code != exitConfig {
		t.Fatalf("validate of an invalid file: exit %d, want %d", code, exitConfig)
	}
	if out != "" {
		t.Errorf("invalid file wrote to stdout: %q", out)
	}
	pos := regexp.MustCompile(`(?m)^testdata/invalid\.yaml:(\d+):(\d+): providers\.acme\.limits\[\d\]\.`)
	got := pos.FindAllStringSubmatch(errOut, -1)
	if len(got) != 2 || got[0][1] != "5" || got[1][1] != "6" {
		t.Errorf("want two problems, lines 5 and 6, as file:line:column; stderr:\n%s", errOut)
	}
	if code, _, _ := cli(context.Background(), "validate", "testdata/missing.yaml"); code != exitFailure {
		t.Errorf("validate of a missing file: exit %d, want %d", code, exitFailure)
	}
}

// TestValidateOutputIsBounded (D17): a file of 20,000 unknown fields
// prints the first providers.MaxProblems problems and a count (19 KB for
// 200,000 of them, which printed 39 MB; fewer keep the test quick, the
// output does not depend on the count); a 3 MB host name is echoed cut.
func TestValidateOutputIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const unknown = 20000
	var sb strings.Builder
	sb.WriteString("providers:\n  p:\n    hosts: [api.p.com]\n    limits: [{name: peak, limit: 1/s}]\n")
	for i := 0; i < unknown; i++ {
		fmt.Fprintf(&sb, "    f%d: 1\n", i)
	}
	many := filepath.Join(dir, "many.yaml")
	if err := os.WriteFile(many, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := cli(context.Background(), "validate", many)
	if code != exitConfig {
		t.Fatalf("exit %d, want %d", code, exitConfig)
	}
	const most = 64 << 10
	if len(errOut) > most {
		t.Errorf("%d bytes of problems, want at most %d", len(errOut), most)
	}
	if lines := strings.Count(errOut, "\n"); lines != providers.MaxProblems+2 {
		t.Errorf("%d lines, want %d problems, the count of the rest and the total", lines, providers.MaxProblems)
	}
	for _, want := range []string{
		fmt.Sprintf("\n… and %d more problems\n", unknown-providers.MaxProblems),
		fmt.Sprintf("throttle: invalid configuration: %d problems\n", unknown),
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q; its end:\n%s", want, errOut[max(0, len(errOut)-300):])
		}
	}

	host := filepath.Join(dir, "host.yaml")
	yaml := "providers:\n  p:\n    hosts: [" + strings.Repeat("a", 3<<20) + ".com]\n    limits: [{name: peak, limit: 1/s}]\n"
	if err := os.WriteFile(host, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = cli(context.Background(), "validate", host)
	if code != exitConfig || len(errOut) > 1024 || !strings.Contains(errOut, `aaa…"`) {
		t.Errorf("exit %d, %d bytes: %.500s; want exit %d and the host cut short", code, len(errOut), errOut, exitConfig)
	}
}

// TestSpecRoundTrip checks that the short form status and validate print
// loads back to the same limit, for every limit of the catalog.
func TestSpecRoundTrip(t *testing.T) {
	t.Parallel()
	cfg, err := providers.LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range cfg.Providers() {
		for _, l := range allLimits(p) {
			q := l.lim.Quota
			y := fmt.Sprintf("providers:\n  x:\n    hosts: [x.test]\n    limits:\n      - {name: %s, limit: %q}\n", q.Name, spec(q))
			back, err := providers.Load("roundtrip", []byte(y))
			if err != nil {
				t.Errorf("%s/%s: spec %q does not load: %v", p.Name, q.Name, spec(q), err)
				continue
			}
			px, _ := back.Provider("x")
			g := px.Limits[0].Quota
			if g.Kind != q.Kind || g.Rate != q.Rate || g.Period != q.Period || g.Capacity() != q.Capacity() ||
				g.Calendar.Unit != q.Calendar.Unit || g.Calendar.Reset != q.Calendar.Reset ||
				g.Calendar.Location.String() != q.Calendar.Location.String() {
				t.Errorf("%s/%s: spec %q loads as %+v, want %+v", p.Name, q.Name, spec(q), *g, *q)
			}
			n++
		}
	}
	if n < 20 {
		t.Errorf("only %d limits in the catalog", n)
	}
}

func TestStatusMatchesReservations(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	for i := 0; i < 3; i++ {
		if r := f.reserve(t, "https://api.acme.test/x", ""); !r.Allowed {
			t.Fatalf("acme reservation %d denied", i)
		}
	}
	for i := 0; i < 4; i++ {
		f.reserve(t, "https://api.tenants.test/x", "busy")
	}
	f.reserve(t, "https://api.tenants.test/x", "calm")
	f.reserve(t, "https://api.mixed.test/search", "finder")

	v := f.status(t)
	if v.Now.IsZero() || time.Since(v.Now).Abs() > time.Minute || !v.ScanComplete || v.Prefix != f.prefix {
		t.Errorf("header: now %v, scan complete %v, prefix %q", v.Now, v.ScanComplete, v.Prefix)
	}
	daily := findRow(t, v, "acme", "daily", "")
	if daily.Used != 3 || daily.Remaining != 97 || daily.Capacity != 100 || !daily.Exists || daily.Kind != "window" {
		t.Errorf("acme daily: %+v, want used 3 of 100", daily)
	}
	if r := findRow(t, v, "acme", "trailing", ""); r.Used != 3 || r.Remaining != 997 || !r.Exists || r.Kind != "rolling" ||
		r.ResetAfterMS < 24*3600*1000 || r.ResetAfterMS > 24*3600*1000+864*1000 {
		t.Errorf("acme trailing: %+v, want used 3 of 1000, reset after 24h and at most a bucket", r)
	}
	// 10/min burst 5: three used (T = 6s, so none back yet).
	peak := findRow(t, v, "acme", "peak", "")
	if peak.Remaining != 2 || peak.Used != 3 || peak.ResetAfterMS < 17000 || peak.ResetAfterMS > 18000 {
		t.Errorf("acme peak: %+v, want 2 of 5 remaining, reset after ~18s", peak)
	}
	if want := f.store.Key("acme", "peak"); peak.Key != want {
		t.Errorf("acme peak key %q, want %q", peak.Key, want)
	}
	busy := findRow(t, v, "tenants", "quota", "busy")
	calm := findRow(t, v, "tenants", "quota", "calm")
	if busy.Used != 4 || busy.Remaining != 1 || calm.Used != 1 || calm.Remaining != 4 {
		t.Errorf("tenants: busy %+v, calm %+v", busy, calm)
	}
	if r := findRow(t, v, "mixed", "search", "finder"); r.Used != 1 || r.Capacity != 3 {
		t.Errorf("mixed search finder: %+v, want 1 of 3 used", r)
	}
	// Busiest first, and --top bounds the tenants shown.
	v = f.status(t, "tenants", "--top", "1")
	p := v.Providers[0]
	if len(v.Providers) != 1 || p.Name != "tenants" || p.TenantScope != "business" || p.ScopesKnown != 2 || p.ScopesShown != 1 {
		t.Fatalf("status tenants --top 1: %+v", v.Providers)
	}
	if last := p.Rows[len(p.Rows)-1]; last.Value != "busy" {
		t.Errorf("--top 1 shows %q, want the busiest, busy", last.Value)
	}
	// One tenant directly, with no scan.
	v = f.status(t, "tenants/calm")
	if r := findRow(t, v, "tenants", "quota", "calm"); r.Remaining != 4 {
		t.Errorf("status tenants/calm: %+v", r)
	}
	// The table says the same.
	out := mustCLI(t, f.args("status", "tenants", "--width", "200")...)
	if !regexp.MustCompile(`tenants\s+quota\s+business busy\s+5/min\s+5/min\s+1 of 5\s+in \d+(\.\d)?s\n`).MatchString(out) {
		t.Errorf("table lacks busy's row:\n%s", out)
	}
}

// TestStatusLearned: status shows a learning limit as decisions run it,
// at the figure the store learned, marked so.
func TestStatusLearned(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	r := f.reserve(t, "https://api.learner.test/x", "")
	if err := r.Sync(context.Background(), []quota.Observed{{Limit: 30, LimitOnly: true}}); err != nil {
		t.Fatal(err)
	}
	if row := findRow(t, f.status(t, "learner"), "learner", "core", ""); row.Spec != "30/min (learned)" || row.Capacity != 30 {
		t.Errorf("learner core: %+v, want spec 30/min (learned), capacity 30", row)
	}
}

// TestStatusLeasesAndDebt checks that status shows a concurrency limit's
// leases held and when the soonest expires, and the debt that settling a
// cost above its estimate left on a GCRA limit, in JSON and in the table.
func TestStatusLeasesAndDebt(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	first := f.reserve(t, "https://api.models.test/v1/chat", "")
	res, _, err := f.cfg.Resolve(httptest.NewRequest("GET", "https://api.models.test/v1/chat", nil), providers.Input{})
	if err != nil {
		t.Fatal(err)
	}
	res.Request.Cost = 40 // the estimate: 40 tokens of the burst of 50
	second, err := f.store.Reserve(context.Background(), &res.Request)
	if err != nil || !first.Allowed || !second.Allowed {
		t.Fatalf("reservations: %v, %v, %v", first.Allowed, second.Allowed, err)
	}
	// It used 60: 20 tokens beyond the estimate, 10 beyond the burst (T = 600ms).
	if err := second.Settle(context.Background(), []int64{60, -1}); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := f.status(t, "models")
	streams := findRow(t, v, "models", "streams", "")
	if streams.Kind != "concurrent" || streams.Used != 1 || streams.Capacity != 3 || streams.Remaining != 2 ||
		streams.NextExpiryMS < 50_000 || streams.NextExpiryMS > 60_000 || streams.Debt != 0 {
		t.Errorf("streams: %+v, want 1 lease of 3 held, the soonest expiring within the minute's TTL", streams)
	}
	tokens := findRow(t, v, "models", "tokens", "")
	if tokens.Debt < 9 || tokens.Debt > 11 || tokens.Remaining != 0 || tokens.NextExpiryMS != 0 {
		t.Errorf("tokens: %+v, want a debt of about 10 tokens and nothing remaining", tokens)
	}
	out := mustCLI(t, f.args("status", "models", "--width", "200")...)
	for _, re := range []string{
		`models\s+streams\s+provider\s+3 concurrent\s+3 concurrent\s+2 of 3\s+in \d+s\s+1 lease held, soonest expires in \d+s\n`,
		`models\s+tokens\s+provider\s+100/min burst 50\s+100/min burst 50\s+0 of 50\s+in \d+(\.\d)?s\s+(9|10|11) debt\n`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("table lacks %s:\n%s", re, out)
		}
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	mustCLI(t, f.args("pause", "tenants/victim", "--for", "10m")...)
	if r := f.reserve(t, "https://api.tenants.test/x", "victim"); r.Allowed || r.Decider != quota.PausedDecider {
		t.Errorf("victim after pause: %+v, want denied by the pause", r.Result)
	}
	if r := f.reserve(t, "https://api.tenants.test/x", "other"); !r.Allowed {
		t.Errorf("another tenant was paused too: %+v", r.Result)
	}
	v := f.status(t, "tenants")
	row := findRow(t, v, "tenants", "quota", "victim")
	if row.PausedUntil == nil || row.PausedUntil.Sub(v.Now) < 9*time.Minute {
		t.Errorf("status of the paused tenant: %+v", row)
	}
	out := mustCLI(t, f.args("resume", "tenants/victim")...)
	if !strings.Contains(out, "resumed tenants/victim") {
		t.Errorf("resume said %q", out)
	}
	if r := f.reserve(t, "https://api.tenants.test/x", "victim"); !r.Allowed {
		t.Errorf("victim after resume: %+v, want admitted", r.Result)
	}
	if out := mustCLI(t, f.args("resume", "tenants/victim")...); !strings.Contains(out, "was not paused") {
		t.Errorf("second resume said %q", out)
	}

	// A provider-wide pause.
	mustCLI(t, f.args("pause", "acme", "--for", "1m")...)
	if r := f.reserve(t, "https://api.acme.test/x", ""); r.Allowed || r.Decider != quota.PausedDecider {
		t.Errorf("acme after pause: %+v, want denied by the pause", r.Result)
	}
	if v := f.status(t, "acme"); v.Providers[0].PausedUntil == nil {
		t.Errorf("status acme shows no pause")
	}
	mustCLI(t, f.args("resume", "acme")...)
	if r := f.reserve(t, "https://api.acme.test/x", ""); !r.Allowed {
		t.Errorf("acme after resume: %+v", r.Result)
	}

	// A provider not tagged per tenant has no tenant pause.
	if code, _, errOut := cli(context.Background(), f.args("pause", "mixed/x", "--for", "1m")...); code != exitUsage ||
		!strings.Contains(errOut, "not tagged per tenant") {
		t.Errorf("pause mixed/x: exit %d, %s", code, errOut)
	}
}

// TestPauseHoldsEveryTenant: "pause PROVIDER" holds every request of a
// provider tagged per tenant, of every tenant, and status shows it on
// their rows; --tenant pauses one tenant, and resuming it leaves the
// provider's pause in force.
func TestPauseHoldsEveryTenant(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	f.reserve(t, "https://api.tenants.test/x", "victim") // state, so status lists it
	mustCLI(t, f.args("pause", "tenants", "--for", "10m")...)
	for _, tenant := range []string{"", "victim", "other"} {
		if r := f.reserve(t, "https://api.tenants.test/x", tenant); r.Allowed || r.Decider != quota.PausedDecider {
			t.Errorf("tenant %q after pause tenants: %+v, want denied by the pause", tenant, r.Result)
		}
	}
	v := f.status(t, "tenants")
	if row := findRow(t, v, "tenants", "quota", "victim"); row.PausedUntil == nil || row.PausedUntil.Sub(v.Now) < 9*time.Minute {
		t.Errorf("status of a tenant under the provider's pause: %+v", row)
	}
	mustCLI(t, f.args("pause", "tenants", "--tenant", "victim", "--for", "20m")...)
	if out := mustCLI(t, f.args("resume", "tenants")...); !strings.Contains(out, "resumed tenants") {
		t.Errorf("resume said %q", out)
	}
	if r := f.reserve(t, "https://api.tenants.test/x", "other"); !r.Allowed {
		t.Errorf("other after resume: %+v, want admitted", r.Result)
	}
	if r := f.reserve(t, "https://api.tenants.test/x", "victim"); r.Allowed || r.Decider != quota.PausedDecider {
		t.Errorf("victim, paused on its own: %+v, want denied by its pause", r.Result)
	}
	if out := mustCLI(t, f.args("resume", "tenants", "--tenant", "victim")...); !strings.Contains(out, "resumed tenants/victim") {
		t.Errorf("resume --tenant said %q", out)
	}
	if r := f.reserve(t, "https://api.tenants.test/x", "victim"); !r.Allowed {
		t.Errorf("victim after resume --tenant: %+v, want admitted", r.Result)
	}
	if code, _, errOut := cli(context.Background(), f.args("pause", "tenants/a", "--tenant", "b", "--for", "1m")...); code != exitUsage ||
		!strings.Contains(errOut, "name the tenant once") {
		t.Errorf("pause tenants/a --tenant b: exit %d, %s", code, errOut)
	}
	if code, _, errOut := cli(context.Background(), f.args("pause", "acme", "--tenant", "x", "--for", "1m")...); code != exitUsage ||
		!strings.Contains(errOut, "not tagged per tenant") {
		t.Errorf("pause acme --tenant x: exit %d, %s", code, errOut)
	}
}

func TestReset(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	for i := 0; i < 5; i++ {
		f.reserve(t, "https://api.tenants.test/x", "full")
		f.reserve(t, "https://api.acme.test/x", "")
	}
	if r := f.reserve(t, "https://api.tenants.test/x", "full"); r.Allowed {
		t.Fatal("tenant full is not full")
	}
	out := mustCLI(t, f.args("reset", "tenants/quota/full")...)
	if !strings.Contains(out, "quota:full") {
		t.Errorf("reset said %q", out)
	}
	if r := f.reserve(t, "https://api.tenants.test/x", "full"); !r.Allowed {
		t.Errorf("after reset: %+v, want admitted", r.Result)
	}
	mustCLI(t, f.args("reset", "acme/daily")...)
	v := f.status(t, "acme")
	if d := findRow(t, v, "acme", "daily", ""); d.Used != 0 || d.Exists {
		t.Errorf("daily after reset: %+v", d)
	}
	if p := findRow(t, v, "acme", "peak", ""); !p.Exists {
		t.Errorf("reset acme/daily reset peak too: %+v", p)
	}
	mustCLI(t, f.args("reset", "acme")...)
	if p := findRow(t, f.status(t, "acme"), "acme", "peak", ""); p.Exists {
		t.Errorf("reset acme left peak: %+v", p)
	}
	// A value unsafe for a key is shown hashed, and the hash is accepted
	// back as it is.
	f.reserve(t, "https://api.tenants.test/x", "a b{c}")
	hashed := quota.SafePart("a b{c}")
	if r := findRow(t, f.status(t, "tenants"), "tenants", "quota", hashed); r.Used != 1 {
		t.Errorf("hashed tenant: %+v", r)
	}
	mustCLI(t, f.args("reset", "tenants/quota/"+hashed)...)
	if r := findRow(t, f.status(t, "tenants/a b{c}"), "tenants", "quota", hashed); r.Exists {
		t.Errorf("hashed tenant after reset: %+v", r)
	}
	mustCLI(t, f.args("reset", "tenants/*/full")...)
	if n := f.client.Exists(context.Background(), f.store.Key(f.cfg.Providers()[1].StateKey(&f.cfg.Providers()[1].Limits[0], "full"))).Val(); n != 0 {
		t.Errorf("reset tenants/*/full left the key")
	}
}

func TestUsageErrors(t *testing.T) {
	t.Setenv(envRedis, "")
	f := &fixture{url: "redis://127.0.0.1:1", prefix: "x:"}
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"status", "--no-such-flag"},
		{"status", "a", "b"},
		{"validate", "a", "b"},
		{"status"}, // no --redis
		{"status", "--redis", "mysql://x"},
		{"status", "--redis", "localhost"},
		{"status", "--interval", "0s", "--redis", f.url},
		{"status", "--width", "19", "--redis", f.url},
		{"status", "--width", "-1", "--redis", f.url},
		f.args("pause", "acme"),                 // no --for
		f.args("pause", "acme", "--for", "-1s"), // negative
		f.args("pause"),                         // no target
		{"status", "--prefix", "a{b", "--redis", f.url},
	} {
		code, _, errOut := cli(context.Background(), args...)
		if code != exitUsage || errOut == "" {
			t.Errorf("throttle %q: exit %d, stderr %q; want %d and a message", args, code, errOut, exitUsage)
		}
	}
}

func TestUsageErrorsWithRedis(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	for _, args := range [][]string{
		f.args("status", "nosuch"),
		f.args("pause", "nosuch", "--for", "1m"),
		f.args("reset", "acme/nosuch"),
		f.args("reset", "acme/peak/x"), // provider-wide: no scope values
		f.args("reset", "acme/*"),
		f.args("status", "acme/x"), // no scoped limit
	} {
		code, _, errOut := cli(context.Background(), args...)
		if code != exitUsage || errOut == "" {
			t.Errorf("throttle %q: exit %d, stderr %q; want %d", args, code, errOut, exitUsage)
		}
	}
	code, _, errOut := cli(context.Background(), "status", "--redis", f.url, "--config", invalidFile)
	if code != exitConfig || !strings.Contains(errOut, "invalid.yaml:5:") {
		t.Errorf("status with an invalid config: exit %d, %s", code, errOut)
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, c := range commands {
		for _, flag := range []string{"--help", "-h"} {
			code, out, _ := cli(context.Background(), c.name, flag)
			if code != exitOK || !strings.Contains(out, "Usage: throttle "+c.name) || !strings.Contains(out, "Exit codes") {
				t.Errorf("%s %s: exit %d\n%s", c.name, flag, code, out)
			}
		}
	}
	if code, out, _ := cli(context.Background(), "--help"); code != exitOK || !strings.Contains(out, "throttle status") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
	if code, out, _ := cli(context.Background(), "help", "pause"); code != exitOK || !strings.Contains(out, "--for") {
		t.Errorf("help pause: exit %d\n%s", code, out)
	}
}

func TestUnreachableRedis(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	for _, args := range [][]string{
		{"status", "--redis", "redis://127.0.0.1:1", "--timeout", "500ms"},
		{"pause", "acme", "--for", "1m", "--redis", "127.0.0.1:1", "--config", validFile},
		{"status", "--redis", "127.0.0.1:1,127.0.0.1:2", "--timeout", "500ms"},
	} {
		code, _, errOut := cli(context.Background(), args...)
		if code != exitFailure || !strings.Contains(errOut, "127.0.0.1:1") {
			t.Errorf("throttle %q: exit %d, stderr %q; want %d naming the address", args, code, errOut, exitFailure)
		}
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("three commands against a dead Redis took %v", d)
	}
}

// frames is a stdout that ends the command (cancel) once it has written
// n frames, each ending or starting with sep.
type frames struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	sep    string
	n      int
	cancel context.CancelFunc
}

func (f *frames) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf.Write(p)
	if strings.Count(f.buf.String(), f.sep) >= f.n {
		f.cancel()
	}
	return len(p), nil
}

func (f *frames) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.String()
}

// watch runs status --watch until it has written n frames (each ending or
// starting with sep); a minute bounds a watch that never does.
func watch(t *testing.T, f *fixture, sep string, n int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := &frames{sep: sep, n: n, cancel: cancel}
	var errOut bytes.Buffer
	if code := run(ctx, f.args(append([]string{"status", "tenants", "--watch", "--interval", "50ms"}, args...)...), out, &errOut); code != exitOK {
		t.Fatalf("watch %v: exit %d, %s", args, code, errOut.String())
	}
	if strings.Count(out.String(), sep) < n {
		t.Fatalf("watch %v wrote fewer than %d frames in a minute:\n%s", args, n, out)
	}
	return out.String()
}

// TestWatch: --watch redraws the table in place, or writes a JSON
// document per line, until its context ends.
func TestWatch(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	f.reserve(t, "https://api.tenants.test/x", "w1")
	if out := watch(t, f, "\x1b[H\x1b[2J", 3); !strings.Contains(out, "business w1") {
		t.Errorf("watch does not show w1:\n%s", out)
	}
	out := watch(t, f, "\n", 2, "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		var v view
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("watch --json line does not parse: %v\n%s", err, l)
		}
		findRow(t, v, "tenants", "quota", "w1")
	}
}

// TestCluster runs status (with discovery on every master), pause and
// reset against a Redis Cluster named by its nodes' addresses.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	f := newFixture(t, strings.Join(c.Addrs, ","), c.Client(t))
	var names []string
	for i := 0; i < 12; i++ {
		name := fmt.Sprintf("t%02d", i)
		names = append(names, name)
		for j := 0; j <= i%5; j++ {
			f.reserve(t, "https://api.tenants.test/x", name)
		}
	}
	v := f.status(t, "tenants", "--top", "0", "--scan-steps", "1000")
	if !v.ScanComplete || v.Providers[0].ScopesKnown != len(names) {
		t.Fatalf("cluster status: scan complete %v, %d scopes known, want %d", v.ScanComplete, v.Providers[0].ScopesKnown, len(names))
	}
	for i, name := range names {
		if r := findRow(t, v, "tenants", "quota", name); r.Used != int64(i%5+1) {
			t.Errorf("%s: used %d, want %d", name, r.Used, i%5+1)
		}
	}
	mustCLI(t, f.args("pause", "tenants/t03", "--for", "1m")...)
	if r := f.reserve(t, "https://api.tenants.test/x", "t03"); r.Allowed {
		t.Errorf("t03 admitted while paused")
	}
	mustCLI(t, f.args("resume", "tenants/t03")...)
	// One seed URL with --cluster finds the rest.
	seed := &fixture{url: "redis://" + c.Addrs[0], prefix: f.prefix}
	out := mustCLI(t, append(seed.args("status", "tenants/t03", "--json"), "--cluster")...)
	if !strings.Contains(out, `"value":"t03"`) {
		t.Errorf("status through one seed with --cluster:\n%s", out)
	}
	mustCLI(t, f.args("reset", "tenants/quota/t04")...)
	if r := findRow(t, f.status(t, "tenants/t04"), "tenants", "quota", "t04"); r.Exists {
		t.Errorf("t04 after reset: %+v", r)
	}
}

// TestPauseEveryTenantOnCluster: on a Redis Cluster, "pause PROVIDER"
// holds the tenants whose keys live on each of the three masters, not
// only the requests without a tenant, and "resume PROVIDER" releases
// them: the pause is copied into every slot, where each tenant's decision
// reads it.
func TestPauseEveryTenantOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	client := c.Client(t)
	f := newFixture(t, strings.Join(c.Addrs, ","), client)
	// One tenant per master: the slot ranges are redistest's even split.
	tenants := make([]string, 3)
	for i, found := 0, 0; found < 3; i++ {
		name := fmt.Sprintf("t%d", i)
		s, err := client.ClusterKeySlot(context.Background(), "{tenants:"+name+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if m := s * 3 / 16384; tenants[m] == "" {
			tenants[m] = name
			found++
		}
	}
	for _, tenant := range tenants {
		f.reserve(t, "https://api.tenants.test/x", tenant) // state, so status lists it
	}
	// 16,384 writes: a timeout a loaded machine cannot exceed.
	mustCLI(t, f.args("pause", "tenants", "--for", "10m", "--timeout", "30s")...)
	for _, tenant := range append([]string{""}, tenants...) {
		if r := f.reserve(t, "https://api.tenants.test/x", tenant); r.Allowed || r.Decider != quota.PausedDecider {
			t.Errorf("tenant %q after pause tenants on a cluster: %+v, want denied by the pause", tenant, r.Result)
		}
	}
	// Status reads the provider's pause, and passes over its copies.
	v := f.status(t, "tenants", "--top", "0", "--scan-steps", "1000")
	if !v.ScanComplete || v.Providers[0].ScopesKnown != len(tenants) {
		t.Errorf("status: scan complete %v, %d tenants known, want %d", v.ScanComplete, v.Providers[0].ScopesKnown, len(tenants))
	}
	for _, tenant := range tenants {
		if r := findRow(t, v, "tenants", "quota", tenant); r.PausedUntil == nil || r.PausedUntil.Sub(v.Now) < 9*time.Minute {
			t.Errorf("status of %s under the provider's pause: %+v", tenant, r)
		}
	}
	if out := mustCLI(t, f.args("resume", "tenants", "--timeout", "30s")...); !strings.Contains(out, "resumed tenants") {
		t.Errorf("resume said %q", out)
	}
	for _, tenant := range append([]string{""}, tenants...) {
		if r := f.reserve(t, "https://api.tenants.test/x", tenant); !r.Allowed {
			t.Errorf("tenant %q after resume tenants on a cluster: %+v, want admitted", tenant, r.Result)
		}
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"redis://u:secret@h:6379/0":       "redis://u:xxxxx@h:6379/0",
		"rediss://:p@a:1,rediss://:q@b:2": "rediss://:xxxxx@a:1,rediss://:xxxxx@b:2",
		"h:6379":                          "h:6379",
		"redis://h:6379":                  "redis://h:6379",
		"redis://u:se cret@h%zz:1":        "(a URL that does not parse)",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
