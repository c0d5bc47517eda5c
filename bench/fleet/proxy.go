package fleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

// ScenarioProxy names the proxy scenario (-scenarios proxy).
const ScenarioProxy = "proxy"

// ProxyOptions configures RunProxy.
type ProxyOptions struct {
	// Duration is the length of each of its three phases; zero means 4s.
	Duration time.Duration
	// Concurrency is the number of goroutines of the throughput phases;
	// zero means 64.
	Concurrency int
	// Log, when set, is told what runs.
	Log io.Writer
}

// ProxyResult is what the proxy scenario measured, the same requests sent
// by a Go client straight through throttle's client and through a
// "throttle proxy" process.
type ProxyResult struct {
	Duration    time.Duration `json:"duration"`
	Concurrency int           `json:"concurrency"`
	Direct      PathResult    `json:"direct"`
	Proxy       PathResult    `json:"proxy"`
	// ProxyCPU is the proxy process's user+sys time per request it
	// served, over the whole scenario.
	ProxyCPU time.Duration `json:"proxy_cpu"`
}

// PathResult is one path's figures.
type PathResult struct {
	// Latency of one request at a time, the two paths interleaved.
	P50      time.Duration `json:"p50"`
	P99      time.Duration `json:"p99"`
	Requests int           `json:"requests"`
	// RPS is the completed requests per second with Concurrency
	// goroutines in a closed loop.
	RPS    float64 `json:"rps"`
	Errors int64   `json:"errors"`
}

// RunProxy builds cmd/throttle, starts a redis-server and "throttle proxy"
// on loopback, and a fake vendor whose provider limit never binds (every
// request still makes its reservation: one Redis round trip), and then
// measures the same request loop direct and through the proxy: latency one
// request at a time, interleaved, and throughput with Concurrency
// goroutines per path.
func RunProxy(ctx context.Context, opts ProxyOptions) (*ProxyResult, error) {
	if opts.Duration <= 0 {
		opts.Duration = 4 * time.Second
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 64
	}
	logf := func(format string, args ...any) {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, format+"\n", args...)
		}
	}
	dir, err := os.MkdirTemp("", "fleetbench-proxy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	logf("== %s: building cmd/throttle", ScenarioProxy)
	bin, err := buildThrottle(ctx, dir)
	if err != nil {
		return nil, err
	}
	srv, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	v := throttletest.NewVendor(throttletest.Options{MaxArrivals: 1})
	defer v.Close()
	yaml := fmt.Sprintf("providers:\n  vendor:\n    hosts: [%q]\n    limits: [{name: peak, limit: 1000000/s}]\n", v.Host())
	cfgPath := filepath.Join(dir, "providers.yaml")
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	const prefix = "bench:proxy:"
	p, err := startProxy(bin, "--redis", "redis://"+srv.addr, "--config", cfgPath, "--prefix", prefix,
		"--listen", "127.0.0.1:0", "--insecure-upstream-http")
	if err != nil {
		return nil, err
	}
	defer p.kill()

	cfg, err := providers.Load("providers.yaml", []byte(yaml))
	if err != nil {
		return nil, err
	}
	rc := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true})
	defer rc.Close()
	store, err := redisstore.New(rc, redisstore.Options{Prefix: prefix})
	if err != nil {
		return nil, err
	}
	conns := func() *http.Transport {
		return &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}
	}
	t, err := throttle.New(throttle.WithStore(store), throttle.WithRegistry(providers.NewRegistry(cfg)), throttle.WithBase(conns()))
	if err != nil {
		return nil, err
	}
	paths := [2]path{
		{client: t.Client(), url: v.URL + "/x"},
		{client: &http.Client{Transport: conns()}, url: p.url + "/" + v.Host() + "/x"},
	}
	res := &ProxyResult{Duration: opts.Duration, Concurrency: opts.Concurrency}

	// Warm up: connections, the script in Redis, the proxy's pools.
	for i := range paths {
		paths[i].loop(ctx, opts.Concurrency, time.Now().Add(300*time.Millisecond), nil)
	}
	logf("== %s: latency, one request at a time, direct and proxied in turn (%v)", ScenarioProxy, opts.Duration)
	var lat [2][]time.Duration
	end := time.Now().Add(opts.Duration)
	for time.Now().Before(end) && ctx.Err() == nil {
		for i := range paths {
			t0 := time.Now()
			if paths[i].send(ctx) {
				lat[i] = append(lat[i], time.Since(t0))
			}
		}
	}
	for i, r := range []*PathResult{&res.Direct, &res.Proxy} {
		r.Requests = len(lat[i])
		r.P50, r.P99 = percentile(lat[i], 0.50), percentile(lat[i], 0.99)
		logf("== %s: throughput %s, %d goroutines (%v)", ScenarioProxy, [...]string{"direct", "through the proxy"}[i], opts.Concurrency, opts.Duration)
		var n atomic.Int64
		t0 := time.Now()
		paths[i].loop(ctx, opts.Concurrency, t0.Add(opts.Duration), &n)
		r.RPS = float64(n.Load()) / time.Since(t0).Seconds()
		r.Errors = paths[i].errors.Load()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if res.Direct.Errors+res.Proxy.Errors > 0 {
		return nil, fmt.Errorf("%d direct and %d proxied requests failed; first: %v", res.Direct.Errors, res.Proxy.Errors,
			errors.Join(paths[0].firstError(), paths[1].firstError()))
	}
	cpu, err := p.stop()
	if err != nil {
		return nil, err
	}
	if n := paths[1].sent.Load(); n > 0 {
		res.ProxyCPU = cpu / time.Duration(n)
	}
	return res, nil
}

// path is one way to the vendor.
type path struct {
	client *http.Client
	url    string
	sent   atomic.Int64
	errors atomic.Int64
	mu     sync.Mutex
	first  error
}

// send sends one request and reads the answer; it reports success.
func (p *path) send(ctx context.Context) bool {
	p.sent.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return p.fail(err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return ctx.Err() == nil && p.fail(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: status %d", p.url, resp.StatusCode)
	}
	if err != nil {
		return p.fail(err)
	}
	return true
}

func (p *path) fail(err error) bool {
	p.errors.Add(1)
	p.mu.Lock()
	if p.first == nil {
		p.first = err
	}
	p.mu.Unlock()
	return false
}

func (p *path) firstError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first
}

// loop sends with n goroutines in a closed loop until end, counting
// successes in done (when set).
func (p *path) loop(ctx context.Context, n int, end time.Time, done *atomic.Int64) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				if p.send(ctx) && done != nil {
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// buildThrottle builds cmd/throttle of the module this harness measures
// (the bench module's replace points at it) into dir. cmd/throttle is a
// module of its own, so it is built from its directory.
func buildThrottle(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/fleetquota/throttle").Output()
	if err != nil {
		return "", fmt.Errorf("locating the throttle module (run from bench/): %w", err)
	}
	bin, err := filepath.Abs(filepath.Join(dir, "throttle"))
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(strings.TrimSpace(string(out)), "cmd", "throttle")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/throttle: %w\n%s", err, out)
	}
	return bin, nil
}

// proxyProc is a running "throttle proxy".
type proxyProc struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
	log  *strings.Builder
	mu   sync.Mutex
}

var listeningRE = regexp.MustCompile(`listening on (http://\S+),`)

// startProxy starts "throttle proxy args..." and waits until it listens.
func startProxy(bin string, args ...string) (*proxyProc, error) {
	cmd := exec.Command(bin, append([]string{"proxy"}, args...)...)
	cmd.SysProcAttr = childAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting throttle proxy: %w", err)
	}
	p := &proxyProc{cmd: cmd, done: make(chan struct{}), log: &strings.Builder{}}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	select {
	case p.url = <-addr:
		return p, nil
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return nil, fmt.Errorf("throttle proxy did not start listening:\n%s", p.log)
}

// stop sends SIGTERM, waits for the proxy to drain and exit, and returns
// its CPU time.
func (p *proxyProc) stop() (time.Duration, error) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		p.kill()
		return 0, errors.New("throttle proxy did not stop within a minute of SIGTERM")
	}
	st := p.cmd.ProcessState
	if !st.Success() {
		p.mu.Lock()
		defer p.mu.Unlock()
		return 0, fmt.Errorf("throttle proxy: %v\n%s", st, p.log)
	}
	return st.UserTime() + st.SystemTime(), nil
}

func (p *proxyProc) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
