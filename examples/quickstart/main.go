// Command quickstart sends 50 concurrent requests through the throttle to a
// fake vendor that allows 10 requests per second and answers 429 beyond
// that, and shows that the vendor never had to refuse one: the throttle
// made each request wait for its own slot instead.
//
//	go run ./examples/quickstart
//
// It needs no network and no Redis: the fake vendor runs in this process
// (package throttletest) and the quota state lives in memory, which
// throttles this one process. With REDIS_URL set (e.g.
// redis://localhost:6379/0) the state lives in Redis instead, as it would
// for a fleet.
//
// It exits 1 if the vendor answered any request with a 429, so it doubles
// as a smoke test.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

const (
	// requests is how many requests are fired at once.
	requests = 50
	// vendorRate is the fake vendor's limit, per second.
	vendorRate = 10
)

// config is the throttle's configuration, as a service would keep it in a
// providers.yaml. ${VENDOR_HOST} is expanded when it is loaded: the fake
// vendor listens on a port picked at start.
//
// The limit is the vendor's published one, 10/s. headroom: 90% makes the
// throttle use 9/s (burst 9): the margin absorbs the few milliseconds
// between the slot the store hands out and the moment the request reaches
// the vendor, so the vendor never sees more than it allows.
const config = `
version: 1
providers:
  fake-vendor:
    hosts: ["${VENDOR_HOST}"]
    on_limit: wait    # wait for a slot rather than fail
    max_wait: 10s     # but never longer than this
    headroom: 90%
    limits:
      - {name: peak, limit: 10/s}
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run starts the fake vendor, sends the requests through the throttle
// while it reports progress on stdout, and prints the summary. It returns
// an error if anything went wrong, the vendor's 429s included.
func run(ctx context.Context, stdout io.Writer) error {
	return runWith(ctx, stdout, os.Getenv("REDIS_URL"))
}

// runWith is run with the Redis URL given: "" for the memory store.
func runWith(ctx context.Context, stdout io.Writer, redisURL string) error {
	vendor := throttletest.NewVendor(throttletest.Options{
		Enforcer: throttletest.GCRA(vendorRate, time.Second, vendorRate),
		Signal:   throttletest.RetryAfterSeconds,
	})
	defer vendor.Close()

	cfg, err := providers.Load("quickstart.yaml", []byte(config),
		providers.WithLookupEnv(func(name string) (string, bool) {
			if name == "VENDOR_HOST" {
				return vendor.Host(), true
			}
			return os.LookupEnv(name)
		}))
	if err != nil {
		return err
	}

	stats := &stats{}
	opts := []throttle.Option{
		throttle.WithRegistry(providers.NewRegistry(cfg)),
		throttle.WithObserver(stats),
	}
	// Without WithStore the quota state is in this process's memory: it
	// throttles this process alone. Redis shares it with a fleet.
	storeName := "memory, this process only"
	if url := redisURL; url != "" {
		store, closeRedis, err := openRedis(ctx, url)
		if err != nil {
			return err
		}
		defer closeRedis()
		opts = append(opts, throttle.WithStore(store))
		storeName = "redis " + redactURL(url)
	}
	client, err := throttle.NewClient(opts...)
	if err != nil {
		return err
	}

	fmt.Fprintf(stdout, "fake vendor at %s allows %d requests/s and answers 429 beyond that\n", vendor.URL, vendorRate)
	fmt.Fprintf(stdout, "sending %d requests at once through the throttle (store: %s)\n\n", requests, storeName)

	start := time.Now()
	progress := startProgress(stdout, isTerminal(stdout), stats, start)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stats.record(send(ctx, client, fmt.Sprintf("%s/v1/items/%d", vendor.URL, i)))
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	progress.stop()

	_, throttled := vendor.Counts()
	waits := stats.sortedWaits()
	tw := tabwriter.NewWriter(stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "sent\t%d of %d\n", stats.ok.Load(), requests)
	fmt.Fprintf(tw, "waited\tp50 %v, max %v\n",
		percentile(waits, 50).Round(10*time.Millisecond), percentile(waits, 100).Round(10*time.Millisecond))
	fmt.Fprintf(tw, "refused\t%d\n", stats.refused.Load())
	fmt.Fprintf(tw, "vendor 429s\t%d\n", throttled)
	fmt.Fprintf(tw, "elapsed\t%v\n", elapsed.Round(10*time.Millisecond))
	if err := tw.Flush(); err != nil {
		return err
	}

	switch {
	case throttled > 0:
		return fmt.Errorf("the vendor throttled %d requests: the throttle let through more than the vendor allows", throttled)
	case stats.failed.Load() > 0:
		return fmt.Errorf("%d requests failed; first error: %v", stats.failed.Load(), stats.firstError())
	case stats.refused.Load() > 0:
		return fmt.Errorf("the throttle refused %d requests", stats.refused.Load())
	}
	fmt.Fprintf(stdout, "\nThe throttle spread the requests over %v, within the vendor's %d/s: it refused none.\n",
		elapsed.Round(100*time.Millisecond), vendorRate)
	return nil
}

// outcome is what happened to one request.
type outcome struct {
	status int
	err    error
}

// send makes one GET and reads the whole response.
func send(ctx context.Context, client *http.Client, url string) outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return outcome{err: err}
	}
	resp, err := client.Do(req)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return outcome{err: err}
	}
	return outcome{status: resp.StatusCode}
}

// stats counts outcomes and, as the transport's Observer, collects the wait
// of every request and how many are waiting right now.
type stats struct {
	ok, refused, failed, waiting atomic.Int64

	mu       sync.Mutex
	waits    []time.Duration
	firstErr error
}

// Observe records the wait of each admitted request.
func (s *stats) Observe(_ context.Context, e throttle.Event) {
	switch e.Kind {
	case throttle.Decided:
		s.mu.Lock()
		s.waits = append(s.waits, e.Wait)
		s.mu.Unlock()
		if e.Wait > 0 {
			s.waiting.Add(1)
		}
	case throttle.Waited, throttle.Cancelled:
		s.waiting.Add(-1)
	}
}

func (s *stats) record(o outcome) {
	switch {
	case o.err == nil && o.status == http.StatusOK:
		s.ok.Add(1)
		return
	case errors.Is(o.err, throttle.ErrLimited):
		s.refused.Add(1)
	default:
		s.failed.Add(1)
	}
	err := o.err
	if err == nil {
		err = fmt.Errorf("status %d", o.status)
	}
	s.mu.Lock()
	if s.firstErr == nil {
		s.firstErr = err
	}
	s.mu.Unlock()
}

func (s *stats) firstError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstErr
}

func (s *stats) sortedWaits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := slices.Clone(s.waits)
	slices.Sort(w)
	return w
}

// percentile returns the p-th percentile (nearest rank) of sorted.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (p*len(sorted) + 99) / 100
	return sorted[max(i, 1)-1]
}

// progress redraws one status line while the requests run: in place with a
// carriage return on a terminal, as a plain line every second otherwise
// (a log file or a pipe gets no control characters).
type progress struct {
	done chan struct{}
	wg   sync.WaitGroup
	line func(final bool)
}

func startProgress(w io.Writer, tty bool, s *stats, start time.Time) *progress {
	p := &progress{done: make(chan struct{})}
	width := 0
	p.line = func(final bool) {
		sent := s.ok.Load() + s.refused.Load() + s.failed.Load()
		bar := strings.Repeat("#", int(sent)*20/requests) + strings.Repeat(".", 20-int(sent)*20/requests)
		text := fmt.Sprintf("[%s] %2d/%d done, %2d waiting for a slot, %4.1fs",
			bar, sent, requests, s.waiting.Load(), time.Since(start).Seconds())
		if !tty {
			fmt.Fprintln(w, text)
			return
		}
		pad := max(width-len(text), 0)
		width = len(text)
		fmt.Fprintf(w, "\r%s%s", text, strings.Repeat(" ", pad))
		if final {
			fmt.Fprintln(w)
		}
	}
	every := time.Second
	if tty {
		every = 100 * time.Millisecond
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				p.line(false)
			case <-p.done:
				p.line(true)
				return
			}
		}
	}()
	return p
}

// stop draws the final line and stops the redraws.
func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
}

// isTerminal reports whether w is a terminal (a character device), where a
// carriage return redraws a line in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// openRedis connects to the Redis at url and returns a store on it. Each
// run uses keys of its own (the prefix holds the start time), so that a
// previous run's reservations, still in Redis, do not slow this one down.
func openRedis(ctx context.Context, url string) (*redisstore.Store, func(), error) {
	ropts, err := redis.ParseURL(url)
	if err != nil {
		return nil, nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	// A plain dial first: it fails fast, where a client would retry.
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, ropts.Network, ropts.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("REDIS_URL is set but Redis at %s is not reachable: %w", redactURL(url), err)
	}
	_ = conn.Close()
	// No client retries: one re-sent after a lost reply would charge twice.
	ropts.MaxRetries = -1
	rdb := redis.NewClient(ropts)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("REDIS_URL is set but Redis at %s does not answer: %w", redactURL(url), err)
	}
	store, err := redisstore.New(rdb, redisstore.Options{
		Prefix: fmt.Sprintf("throttle-quickstart:%d:", time.Now().UnixNano()),
	})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	return store, func() { _ = rdb.Close() }, nil
}

// redactURL hides a password in a Redis URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}
