package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

// output is an io.Writer, safe for concurrent use, that a test can wait on.
type output struct {
	mu      sync.Mutex
	buf     strings.Builder
	changed chan struct{} // closed and replaced on every write
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	close(o.changed)
	o.changed = make(chan struct{})
	return len(p), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor waits until the output matches re, or the command exits.
func (o *output) waitFor(t *testing.T, re *regexp.Regexp, exited <-chan int) []string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		o.mu.Lock()
		m := re.FindStringSubmatch(o.buf.String())
		changed := o.changed
		o.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-changed:
		case code := <-exited:
			t.Fatalf("throttle proxy exited %d before printing %v:\n%s", code, re, o)
		case <-deadline:
			t.Fatalf("throttle proxy never printed %v:\n%s", re, o)
		}
	}
}

// proxyRun is a "throttle proxy" running in this process.
type proxyRun struct {
	addrs  []string // "http://127.0.0.1:port" of each listener, the main one first
	stderr *output
	cancel context.CancelFunc
	exited chan int
	code   int
	once   sync.Once
}

var listening = regexp.MustCompile(`listening on (http://\S+),`)

// startProxy runs "throttle proxy --listen 127.0.0.1:0 args..." and waits
// until it listens on listeners addresses. It is stopped at cleanup.
func startProxy(t *testing.T, listeners int, args ...string) *proxyRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &proxyRun{stderr: newOutput(), cancel: cancel, exited: make(chan int, 1)}
	// A long --timeout: on a loaded machine under -race a Redis call can
	// take longer than the default 200ms, which would fail it closed.
	args = append([]string{"proxy", "--listen", "127.0.0.1:0", "--timeout", "5s"}, args...)
	go func() { r.exited <- run(ctx, args, io.Discard, r.stderr) }()
	t.Cleanup(func() { r.stop() })
	re := regexp.MustCompile(strings.Repeat(`(?s)listening on http://\S+,.*`, listeners-1) + `listening on http://\S+,[^\n]*\n`)
	r.stderr.waitFor(t, re, r.exited)
	for _, m := range listening.FindAllStringSubmatch(r.stderr.String(), -1) {
		r.addrs = append(r.addrs, m[1])
	}
	return r
}

// stop sends the shutdown signal and returns the exit code.
func (r *proxyRun) stop() int {
	r.once.Do(func() {
		r.cancel()
		r.code = <-r.exited
	})
	return r.code
}

// writeConfig writes a providers file and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// leakCheck wraps a vendor handler: it counts requests that arrive with a
// Throttle-* header, which the proxy must strip.
type leakCheck struct {
	leaked atomic.Int64
	next   http.Handler
}

func (l *leakCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for name := range r.Header {
		if strings.HasPrefix(name, "Throttle-") {
			l.leaked.Add(1)
		}
	}
	if l.next != nil {
		l.next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"ok":true,"path":%q}`, r.URL.Path)
}

// need returns the path of a client program the tests run; a missing one
// fails the test, with how to install it.
func need(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: the proxy's end-to-end tests send through it (Debian: apt-get install -y python3-requests curl; make test installs them when run as root)", name)
	}
	return path
}

// pythonWithRequests returns a python3 that can import requests: the one
// on PATH (a version manager's may have its own packages), else Debian's
// /usr/bin/python3, which python3-requests serves.
func pythonWithRequests(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		out, err := exec.Command(path, "-c", "import requests").CombinedOutput()
		if err == nil {
			return path
		}
		tried = append(tried, fmt.Sprintf("%s: %v %s", path, err, bytes.TrimSpace(out)))
	}
	t.Fatalf("no python3 can import requests (Debian: apt-get install -y python3-requests; make test installs it when run as root); tried %q", tried)
	return ""
}

// The proxy serves clients in other languages: Python's requests and
// curl, through one Redis-backed quota; the vendor never sees a
// Throttle-* header.
func TestProxyPythonAndCurl(t *testing.T) {
	t.Parallel()
	python, curl := pythonWithRequests(t), need(t, "curl")
	check := &leakCheck{}
	v := throttletest.NewVendor(throttletest.Options{Handler: check, RecordBodies: true})
	defer v.Close()
	cfg := writeConfig(t, fmt.Sprintf(`
providers:
  vendor:
    hosts: [%q]
    on_limit: fail
    limits: [{name: per-tenant, limit: 2/min, scope: business}]
`, v.Host()))
	redisSrv := redistest.Start(t)
	p := startProxy(t, 1, "--redis", "redis://"+redisSrv.Addr, "--config", cfg,
		"--insecure-upstream-http", "--route", "vendor="+v.URL)

	// Python: two charges go, the third is refused by the proxy.
	script := `
import sys, requests
base = sys.argv[1]
s = requests.Session()
rs = [s.post(base + "/v1/charges", json={"amount": i}, headers={"Throttle-Business": "acme"}) for i in range(3)]
for r in rs[:2]:
    assert r.status_code == 200, (r.status_code, r.text)
    assert r.json()["path"] == "/v1/charges", r.text
r = rs[2]
assert r.status_code == 429, (r.status_code, r.text)
assert r.headers["Throttle-Error"] == "limited", r.headers
assert int(r.headers["Retry-After"]) >= 1, r.headers
b = r.json()
print(b["error"], b["provider"], b["limit"], b["scope"], b["retry_after_ms"] > 0)
`
	out, err := exec.Command(python, "-c", script, p.addrs[0]+"/vendor").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "limited vendor per-tenant acme True" {
		t.Errorf("python: %v\n%s", err, out)
	}

	// curl, in the /<host>/<path> form: another tenant goes; an unclaimed
	// host is refused.
	out, err = exec.Command(curl, "-sS", "-i", "-H", "Throttle-Business: globex",
		p.addrs[0]+"/"+v.Host()+"/v1/items?page=2").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "HTTP/1.1 200") || !strings.Contains(string(out), `{"ok":true,"path":"/v1/items"}`) {
		t.Errorf("curl: %v\n%s", err, out)
	}
	out, err = exec.Command(curl, "-sS", "-i", p.addrs[0]+"/example.com/").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "HTTP/1.1 403") || !strings.Contains(string(out), "Throttle-Error: unknown_host") {
		t.Errorf("curl to an unclaimed host: %v\n%s", err, out)
	}

	arrivals := v.Arrivals()
	if len(arrivals) != 3 || string(arrivals[0].Body) != `{"amount": 0}` || string(arrivals[1].Body) != `{"amount": 1}` {
		t.Errorf("vendor saw %d requests (%+v), want the 2 charges with their bodies and curl's", len(arrivals), arrivals)
	}
	if n := check.leaked.Load(); n != 0 {
		t.Errorf("vendor saw %d requests with Throttle-* headers", n)
	}
}

// Two proxies and a Go transport on one Redis draw from one quota: the
// vendor, which enforces its own limit, never throttles any of them.
func TestProxyFleetSharesOneQuotaWithGo(t *testing.T) {
	t.Parallel()
	// The vendor allows 50/s with a burst of 20; the fleet is configured
	// at 40/s, burst 5, leaving room for arrival jitter. Three sources at
	// 40/s each, were they not sharing, would be throttled at once.
	v := throttletest.NewVendor(throttletest.Options{Enforcer: throttletest.GCRA(50, time.Second, 20)})
	defer v.Close()
	yaml := fmt.Sprintf(`
providers:
  vendor:
    hosts: [%q]
    max_wait: 20s
    limits: [{name: peak, limit: 40/s burst 5}]
`, v.Host())
	cfg := writeConfig(t, yaml)
	redisSrv := redistest.Start(t)
	const prefix = "fleet:"
	args := []string{"--redis", "redis://" + redisSrv.Addr, "--config", cfg, "--prefix", prefix, "--insecure-upstream-http"}
	a, b := startProxy(t, 1, args...), startProxy(t, 1, args...)

	pcfg, err := providers.LoadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The proxies' long --timeout (startProxy), for the same reason.
	store, err := redisstore.New(redisSrv.Client(t), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	goClient, err := throttle.NewClient(throttle.WithStore(store), throttle.WithRegistry(providers.NewRegistry(pcfg)))
	if err != nil {
		t.Fatal(err)
	}

	sources := []struct {
		client *http.Client
		url    string
	}{
		{http.DefaultClient, a.addrs[0] + "/" + v.Host() + "/x"},
		{http.DefaultClient, b.addrs[0] + "/" + v.Host() + "/x"},
		{goClient, v.URL + "/x"},
	}
	const perSource, workers = 20, 4
	var wg sync.WaitGroup
	var bad atomic.Int64
	var firstErr sync.Once
	for _, s := range sources {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perSource / workers {
					resp, err := s.client.Get(s.url)
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							err = fmt.Errorf("status %d", resp.StatusCode)
						}
					}
					if err != nil {
						bad.Add(1)
						firstErr.Do(func() { t.Errorf("%s: %v", s.url, err) })
					}
				}
			}()
		}
	}
	wg.Wait()
	served, throttled := v.Counts()
	if throttled != 0 || served != len(sources)*perSource || bad.Load() != 0 {
		t.Errorf("vendor served %d and throttled %d; %d requests failed: want %d served, 0 throttled",
			served, throttled, bad.Load(), len(sources)*perSource)
	}
}

// A vendor's 429 through one proxy pauses the provider for the whole fleet:
// the other proxy refuses at once, naming the pause, and sends nothing.
func TestProxyVendorThrottlePausesTheFleet(t *testing.T) {
	t.Parallel()
	v := throttletest.NewVendor(throttletest.Options{RetryAfter: time.Minute})
	defer v.Close()
	cfg := writeConfig(t, fmt.Sprintf("providers:\n  vendor:\n    hosts: [%q]\n    on_limit: fail\n    limits: [{name: peak, limit: 100/s}]\n", v.Host()))
	redisSrv := redistest.Start(t)
	args := []string{"--redis", "redis://" + redisSrv.Addr, "--config", cfg, "--insecure-upstream-http", "--retries", "0"}
	a, b := startProxy(t, 1, args...), startProxy(t, 1, args...)
	v.ThrottleNext(1)
	get := func(base string) (*http.Response, map[string]any) {
		t.Helper()
		resp, err := http.Get(base + "/" + v.Host() + "/x")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp, body
	}
	if resp, _ := get(a.addrs[0]); resp.StatusCode != 429 || resp.Header.Get("Throttle-Error") != "" || resp.Header.Get("Retry-After") != "60" {
		t.Fatalf("through A: %d (Throttle-Error %q, Retry-After %q), want the vendor's own 429",
			resp.StatusCode, resp.Header.Get("Throttle-Error"), resp.Header.Get("Retry-After"))
	}
	resp, body := get(b.addrs[0])
	if resp.StatusCode != 429 || resp.Header.Get("Throttle-Error") != "limited" || body["limit"] != "pause" {
		t.Errorf("through B: %d %v, want the proxy's 429 naming the pause", resp.StatusCode, body)
	}
	if served, throttled := v.Counts(); served != 0 || throttled != 1 {
		t.Errorf("vendor served %d and throttled %d, want only A's request", served, throttled)
	}
}

// On the shutdown signal the proxy stops listening and lets a request in
// flight finish before it exits 0.
func TestProxyDrainsRequestsInFlight(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	v := throttletest.NewVendor(throttletest.Options{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		io.WriteString(w, "late")
	})})
	defer v.Close()
	cfg := writeConfig(t, fmt.Sprintf("providers:\n  vendor:\n    hosts: [%q]\n    limits: [{name: peak, limit: 10/s}]\n", v.Host()))
	redisSrv := redistest.Start(t)
	p := startProxy(t, 1, "--redis", "redis://"+redisSrv.Addr, "--config", cfg, "--insecure-upstream-http")

	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.Get(p.addrs[0] + "/" + v.Host() + "/slow")
		if err != nil {
			done <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{resp.StatusCode, string(b), err}
	}()
	<-arrived
	p.cancel()
	p.stderr.waitFor(t, regexp.MustCompile(`draining`), p.exited)
	close(release)
	if r := <-done; r.err != nil || r.status != 200 || r.body != "late" {
		t.Errorf("request in flight during shutdown: %d %q %v, want 200 late", r.status, r.body, r.err)
	}
	if code := p.stop(); code != exitOK || !strings.Contains(p.stderr.String(), "stopped") {
		t.Errorf("exit %d, want 0 and \"stopped\":\n%s", code, p.stderr)
	}
}

// A request still in flight after --drain-timeout is cut off, and the exit
// code says so.
func TestProxyDrainTimeoutCutsOff(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	v := throttletest.NewVendor(throttletest.Options{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
	})})
	defer v.Close()
	defer close(release) // before v.Close, which waits for the handler
	cfg := writeConfig(t, fmt.Sprintf("providers:\n  vendor:\n    hosts: [%q]\n    limits: [{name: peak, limit: 10/s}]\n", v.Host()))
	redisSrv := redistest.Start(t)
	p := startProxy(t, 1, "--redis", "redis://"+redisSrv.Addr, "--config", cfg,
		"--insecure-upstream-http", "--drain-timeout", "100ms")
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Get(p.addrs[0] + "/" + v.Host() + "/stuck")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	if code := p.stop(); code != exitFailure || !strings.Contains(p.stderr.String(), "cut off") {
		t.Errorf("exit %d, want 1 and \"cut off\":\n%s", code, p.stderr)
	}
	if err := <-errc; err == nil {
		t.Error("the request cut off at the drain timeout got an answer")
	}
}

func TestProxyHealthMetricsAndOwnPortRoutes(t *testing.T) {
	t.Parallel()
	v := throttletest.NewVendor(throttletest.Options{})
	defer v.Close()
	cfg := writeConfig(t, fmt.Sprintf("providers:\n  vendor:\n    hosts: [%q]\n    limits: [{name: peak, limit: 10/s}]\n", v.Host()))
	redisSrv := redistest.Start(t)
	p := startProxy(t, 2, "--redis", "redis://"+redisSrv.Addr, "--config", cfg,
		"--route", "127.0.0.1:0="+v.URL+"/base")

	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	if status, body := get(p.addrs[1] + "/items"); status != 200 {
		t.Errorf("own-port route: %d %s", status, body)
	}
	if a := v.Arrivals(); len(a) != 1 || a[0].Path != "/base/items" {
		t.Errorf("vendor saw %+v, want /base/items", a)
	}
	// Without --insecure-upstream-http the /<host>/ form is https, which
	// the fake vendor does not speak.
	if status, body := get(p.addrs[0] + "/" + v.Host() + "/items"); status != 502 || !strings.Contains(body, "--insecure-upstream-http") {
		t.Errorf("host form to an http vendor without --insecure-upstream-http: %d %s, want 502 naming the flag", status, body)
	}
	_, metrics := get(p.addrs[0] + "/metrics")
	for _, want := range []string{`throttle_proxy_requests_total{code="200",provider="vendor"} 1`,
		`throttle_events_total{class="",event="decided",limit="",provider="vendor"} 2`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, metrics)
		}
	}
	status, body := get(p.addrs[0] + "/healthz")
	var h map[string]string
	if status != 200 || json.Unmarshal([]byte(body), &h) != nil || h["status"] != "ok" {
		t.Errorf("/healthz: %d %s", status, body)
	}
	redisSrv.Stop(t)
	status, body = get(p.addrs[0] + "/healthz")
	if status != 503 || !strings.Contains(body, "store_unavailable") || strings.Contains(body, redisSrv.Addr) {
		t.Errorf("/healthz with Redis down: %d %s, want 503 store_unavailable without Redis's address", status, body)
	}
	// The cause and the address are in the log.
	p.stderr.waitFor(t, regexp.MustCompile(`/healthz.*`+regexp.QuoteMeta(redisSrv.Addr)+`.*connection refused`), p.exited)
}

// A Redis that does not answer at start is named with the cause and what
// to check, not as "context deadline exceeded".
func TestProxyStartNamesTheDeadRedis(t *testing.T) {
	t.Parallel()
	redisSrv := redistest.Start(t)
	redisSrv.Stop(t)
	code, _, errOut := cli(context.Background(), "proxy", "--redis", "redis://"+redisSrv.Addr)
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	for _, want := range []string{redisSrv.Addr, "connection refused", "check that Redis runs there"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q lacks %q", errOut, want)
		}
	}
}

func TestProxyUsageErrors(t *testing.T) {
	t.Parallel()
	redisSrv := redistest.Start(t)
	url := "redis://" + redisSrv.Addr
	for _, args := range [][]string{
		{"proxy"}, // no --redis
		{"proxy", "--redis", url, "extra"},
		{"proxy", "--redis", url, "--route", "github"},
		{"proxy", "--redis", url, "--route", "github=https://unclaimed.example"},
		{"proxy", "--redis", url, "--route", "git.hub=https://api.github.com"},
		{"proxy", "--redis", url, "--route", "github=ftp://api.github.com"},
		{"proxy", "--redis", url, "--drain-timeout", "0s"},
		{"proxy", "--redis", url, "--retries", "-1"},
		{"proxy", "--redis", url, "--max-held-bodies", "0"},
		{"proxy", "--redis", url, "--max-held-bodies", "1000", "--max-retry-body", "2000"},
	} {
		code, _, errOut := cli(context.Background(), args...)
		if code != exitUsage || errOut == "" {
			t.Errorf("%q: exit %d (%s), want %d with a message", args, code, errOut, exitUsage)
		}
	}
}

// --business and --allow-lower-costs reach the proxy: a made-up tenant is
// refused, and a lower cost counts only with the flag.
func TestProxyTrustFlags(t *testing.T) {
	t.Parallel()
	v := throttletest.NewVendor(throttletest.Options{})
	defer v.Close()
	cfg := writeConfig(t, fmt.Sprintf(`
providers:
  vendor:
    hosts: [%q]
    on_limit: fail
    limits: [{name: daily, limit: 10/day, scope: business}]
    routes: [{name: search, path: /search, cost: 5}]
`, v.Host()))
	redisSrv := redistest.Start(t)
	args := []string{"--redis", "redis://" + redisSrv.Addr, "--config", cfg, "--insecure-upstream-http", "--business", "acme"}
	strict, lenient := startProxy(t, 1, args...), startProxy(t, 1, append(args, "--prefix", "lenient:", "--allow-lower-costs")...)
	get := func(base string, header ...string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/"+v.Host()+"/search", nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(strict.addrs[0], "Throttle-Business", "made-up"); got != 400 {
		t.Errorf("a made-up business through --business acme: %d, want 400", got)
	}
	var strictOK, lenientOK int
	for range 4 {
		if get(strict.addrs[0], "Throttle-Cost", "1") == 200 {
			strictOK++
		}
		if get(lenient.addrs[0], "Throttle-Cost", "1") == 200 {
			lenientOK++
		}
	}
	if strictOK != 2 || lenientOK != 4 {
		t.Errorf("Throttle-Cost 1 on a cost-5 route, quota 10: %d and %d of 4 admitted, want 2 without --allow-lower-costs and 4 with it",
			strictOK, lenientOK)
	}
}

// A listen address in use says so, and what to do.
func TestProxyListenAddressInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	redisSrv := redistest.Start(t)
	code, _, errOut := cli(context.Background(), "proxy", "--redis", "redis://"+redisSrv.Addr, "--listen", ln.Addr().String())
	if code != exitFailure || !strings.Contains(errOut, "another program") || !strings.Contains(errOut, ln.Addr().String()) {
		t.Errorf("exit %d, stderr %q: want %d naming the address and what to do", code, errOut, exitFailure)
	}
}
