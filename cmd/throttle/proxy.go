package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/proxy"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota/redisstore"
)

var proxyCmd = &command{
	name: "proxy",
	usage: `Usage: throttle proxy --redis URL [--config FILE] [--listen ADDR] [--route NAME=URL]...

Proxy is a sidecar that any language can send through: a reverse proxy that
throttles every request exactly as the Go transport does (one reservation,
wait or fail fast, vendor signals, fleet-wide pauses, retries through the
throttle), with the same configuration, Redis and key prefix, so that a
Python worker or a Node service draws from the same quota as the Go fleet.

	http://ADDR/<host>/<path>   forwarded to https://<host>/<path>
	http://ADDR/<name>/<path>   forwarded to URL/<path>, for --route name=URL
	http://LADDR/<path>         forwarded to URL/<path>, for --route LADDR=URL
	http://ADDR/healthz         200 {"status":"ok"} while Redis answers, else 503
	http://ADDR/metrics         Prometheus metrics

Only the hosts that a provider of the configuration claims are forwarded:
any other gets 403 (this is not an open proxy). The /<host>/ form always
uses https, except for loopback hosts with --insecure-upstream-http; a
route's URL names its scheme (http:// is for tests and development). A
route NAME is letters, digits, - and _; a route whose key is a listen
address (":8081", "127.0.0.1:8081") gets a listener of its own, for SDKs
that take a base URL without a path.

Per-request values come from request headers, which are stripped (with
every other Throttle-* header) before forwarding; a bad value is a 400:

	Throttle-Business: acme                 the value of business scopes
	Throttle-Label: class=batch, tier=gold  values of label:<name> scopes
	Throttle-Cost: 5                        the request's cost in its stack
	Throttle-Limit-Cost: tokens=1200        the cost in named limits
	Throttle-Max-Wait: 2s                   a shorter wait than max_wait (never a longer one)
	Throttle-Priority: batch                the request's priority class (one of the provider's)

They are the client's assertions: a cost header can raise the configured
cost but not lower it (unless --allow-lower-costs), a Throttle-Limit-Cost
name must be a limit of the request's stack, a Throttle-Priority class must
be one the provider declares (a provider without classes ignores it), and
--business binds every
request to one business. Keep the proxy where only trusted clients reach it.

A refusal is 429 with Retry-After (whole seconds), Throttle-Error: limited
and a JSON body: {"error":"limited","message":...,"provider":...,
"limit":...,"scope":...,"retry_after_ms":...}. Every answer the proxy makes
itself carries Throttle-Error (store_unavailable and overloaded 503, missing_scope and
bad_request 400, unknown_host 403, not_found 404, upstream_error 502,
upstream_timeout 504); a vendor's own answers, 429s included, come back as
they are, without it.

Retries wait within the request's max wait, counted once the proxy has it: a
retry that would start later is not made, and the vendor's answer goes back.
A request body of at most --max-retry-body bytes is held so that a retry
can send it again, up to --max-held-bodies bytes at once (then 503); a
larger one is streamed and sent once, never retried.
Event streams (text/event-stream) are passed on as each event arrives.

On SIGTERM or SIGINT the listeners close, and the requests in flight,
those waiting for a slot included, finish: for at most --drain-timeout,
after which they are cut off and the exit code is 1. Then the quota the
proxy took ahead (an "ahead" period) and did not use goes back to the
fleet, waiting for Redis at most twice --timeout (a second at least).
` + storeFlagsText + `
docs/proxy.md has the details: headers, timeouts, running it next to a service.
`,
}

func init() { proxyCmd.run = runProxy }

// routeFlags collects --route values.
type routeFlags []string

func (r *routeFlags) String() string     { return strings.Join(*r, " ") }
func (r *routeFlags) Set(s string) error { *r = append(*r, s); return nil }

type proxyFlags struct {
	store         storeFlags
	listen        string
	routes        routeFlags
	insecureHTTP  bool
	retries       int
	maxRetryBody  int64
	maxHeld       int64
	lowerCosts    bool
	business      string
	drain         time.Duration
	readHeader    time.Duration
	read, write   time.Duration
	idle          time.Duration
	upstreamReply time.Duration
}

func runProxy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseProxyFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	prefixes, listeners, err := parseRoutes(f.routes)
	if err != nil {
		return err
	}
	e, err := f.store.open(ctx)
	if err != nil {
		return err
	}
	defer e.close()
	log := slog.New(slog.NewTextHandler(stderr, nil))
	metrics := newProxyMetrics()
	upstream := proxy.NewUpstream(f.upstreamReply)
	defer upstream.CloseIdleConnections()
	refusals, err := e.store.NewRefusalLog(0)
	if err != nil {
		return err
	}
	defer closeRefusals(refusals, f.store.timeout, log)
	p, err := f.newProxy(e, prefixes, upstream, metrics, refusals, log)
	if err != nil {
		return err
	}
	var all []served
	defer func() {
		for _, s := range all {
			_ = s.ln.Close()
		}
	}()
	root := rootHandler(p, metrics.handler(), e, &f.store, log)
	if all, err = f.listenAll(root, describe(e.cfg, prefixes), p, listeners, log); err != nil {
		return err
	}
	// Once the listeners have drained, what the transport took ahead
	// goes back, before the Redis client closes (deferred above).
	giveBack := func() { closeAhead(p, max(2*f.store.timeout, time.Second), log) }
	return serve(ctx, all, f.drain, stderr, giveBack)
}

// closeAhead gives back the quota p took ahead and has not used (an
// "ahead" period in the configuration), waiting at most bound: with Redis
// down or far, a shutdown is not held up by it, and the slots not given
// back expire on their own within a period and a round trip.
func closeAhead(p io.Closer, bound time.Duration, log *slog.Logger) {
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			log.Warn("throttle proxy: the quota taken ahead was not given back", "error", err.Error())
		}
	case <-timer.C:
		// The calls in flight end on the store's own timeout; the
		// process exits meanwhile.
		log.Warn("throttle proxy: the quota taken ahead was not given back in time: it expires within a period", "waited", bound.String())
	}
}

// parseProxyFlags parses and checks the command line.
func parseProxyFlags(args []string, stdout, stderr io.Writer) (*proxyFlags, error) {
	f := new(proxyFlags)
	fs := newFlagSet(proxyCmd)
	f.store.timeout = redisstore.DefaultTimeout
	f.store.register(fs)
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "`address` to serve on (\":8080\" for every interface)")
	fs.Var(&f.routes, "route", "`NAME=URL` serves URL under /NAME/; ADDR=URL serves it on a listener of its own (repeatable)")
	fs.BoolVar(&f.insecureHTTP, "insecure-upstream-http", false, "reach loopback hosts of the /<host>/ form over plain http (tests, development)")
	fs.IntVar(&f.retries, "retries", 4, "retries after a vendor's throttle (or a 5xx or connection error of an idempotent request), within the request's max wait; 0 for none")
	fs.Int64Var(&f.maxRetryBody, "max-retry-body", proxy.DefaultMaxRetryBody, "largest request body held in memory for retries, in `bytes`; larger ones are sent once")
	fs.Int64Var(&f.maxHeld, "max-held-bodies", proxy.DefaultMaxHeldBodies, "bound on the `bytes` of request bodies held in memory at once; past it a request gets 503")
	fs.BoolVar(&f.lowerCosts, "allow-lower-costs", false, "let Throttle-Cost and Throttle-Limit-Cost set a cost below the configured one (by default they can only raise it)")
	fs.StringVar(&f.business, "business", "", "count every request for business `ID`; a client's Throttle-Business cannot change it")
	fs.DurationVar(&f.drain, "drain-timeout", 30*time.Second, "on SIGTERM, how long requests in flight may take to finish")
	fs.DurationVar(&f.readHeader, "read-header-timeout", 10*time.Second, "bound on reading a request's headers")
	fs.DurationVar(&f.read, "read-timeout", time.Minute, "bound on each read of a request body (a stalled upload); 0 for none")
	fs.DurationVar(&f.write, "write-timeout", time.Minute, "bound on each write of a response (a client that stopped reading); 0 for none")
	fs.DurationVar(&f.idle, "idle-timeout", 2*time.Minute, "how long an idle keep-alive connection is kept")
	fs.DurationVar(&f.upstreamReply, "upstream-header-timeout", 5*time.Minute, "bound on waiting for a vendor's response headers; 0 for none")
	pos, err := parse(proxyCmd, fs, args, stdout, stderr)
	if err != nil {
		return nil, err
	}
	if len(pos) > 0 {
		return nil, usagef("proxy takes no arguments, got %q", pos)
	}
	if f.retries < 0 || f.drain <= 0 || f.readHeader <= 0 || f.idle <= 0 || f.read < 0 || f.write < 0 || f.upstreamReply < 0 {
		return nil, usagef("--retries and the timeouts must not be negative; --drain-timeout, --read-header-timeout and --idle-timeout must be positive")
	}
	if f.maxHeld <= 0 || f.maxRetryBody > f.maxHeld {
		return nil, usagef("--max-held-bodies %d must be positive and at least --max-retry-body %d", f.maxHeld, f.maxRetryBody)
	}
	return f, nil
}

// newProxy makes the handler that throttles and forwards.
func (f *proxyFlags) newProxy(e *env, prefixes []proxy.Route, upstream http.RoundTripper, metrics *proxyMetrics,
	refusals throttle.RefusalRecorder, log *slog.Logger) (*proxy.Proxy, error) {
	p, err := proxy.New(proxy.Options{
		Registry: providers.NewRegistry(e.cfg),
		Throttle: []throttle.Option{
			throttle.WithStore(e.store),
			throttle.WithObserver(observers{metrics.observer, logObserver{throttle.SlogObserver(log)}, throttle.RefusalObserver(refusals)}),
		},
		Upstream:      upstream,
		Routes:        prefixes,
		LoopbackHTTP:  f.insecureHTTP,
		Retries:       f.retries,
		MaxRetryBody:  f.maxRetryBody,
		MaxHeldBodies: f.maxHeld,
		LowerCosts:    f.lowerCosts,
		Business:      f.business,
		Log:           log,
		Done:          metrics.done,
	})
	if err != nil {
		return nil, usagef("%v", err)
	}
	return p, nil
}

// rootHandler serves /healthz and /metrics on the main listener, and
// hands every other path to the proxy.
func rootHandler(p *proxy.Proxy, metrics http.Handler, e *env, store *storeFlags, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			health(w, r, e, store.redis, store.timeout, log)
		case "/metrics":
			metrics.ServeHTTP(w, r)
		default:
			p.ServeHTTP(w, r)
		}
	})
}

// served is one listener and its server.
type served struct {
	srv  *http.Server
	ln   net.Listener
	what string
}

// listenAll opens the main listener and one per route with a listener of
// its own. The caller closes the listeners of what it returns, also with
// an error.
func (f *proxyFlags) listenAll(root http.Handler, what string, p *proxy.Proxy, routes []proxy.Route, log *slog.Logger) ([]served, error) {
	var all []served
	listen := func(addr string, h http.Handler, what string) error {
		ln, err := net.Listen("tcp", addr)
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%w: another program (or another throttle proxy) listens on %s: stop it or choose another address", err, addr)
		}
		if err != nil {
			return err
		}
		srv := &http.Server{
			Handler:           proxy.Timeouts(h, f.read, f.write),
			ReadHeaderTimeout: f.readHeader,
			IdleTimeout:       f.idle,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		all = append(all, served{srv, ln, what})
		return nil
	}
	if err := listen(f.listen, root, what); err != nil {
		return all, err
	}
	for _, l := range routes {
		h, err := p.Upstream(l.URL)
		if err != nil {
			return all, usagef("--route %s=%s: %v", l.Name, l.URL, err)
		}
		if err := listen(l.Name, h, "forwarding every path to "+l.URL.String()); err != nil {
			return all, err
		}
	}
	return all, nil
}

// serve serves every listener until ctx is done or one fails, then drains:
// the requests in flight have drain to finish, after which they are cut
// off and serve returns an error. Then it calls stopped, which gives back
// what the throttle holds, as no request can use it any more.
func serve(ctx context.Context, all []served, drain time.Duration, stderr io.Writer, stopped func()) error {
	failed := make(chan error, len(all))
	for _, s := range all {
		fmt.Fprintf(stderr, "throttle proxy: listening on http://%s, %s\n", s.ln.Addr(), s.what)
		go func() {
			if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
				failed <- err
			}
		}()
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-failed:
	}
	fmt.Fprintf(stderr, "throttle proxy: draining: requests in flight have %v to finish\n", drain)
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	var wg sync.WaitGroup
	var cut atomic.Bool
	for _, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.srv.Shutdown(dctx); err != nil {
				_ = s.srv.Close()
				cut.Store(true)
			}
		}()
	}
	wg.Wait()
	stopped()
	if cut.Load() {
		serveErr = errors.Join(serveErr, fmt.Errorf("requests still in flight after --drain-timeout %v were cut off", drain))
	}
	if serveErr != nil {
		return serveErr
	}
	fmt.Fprintln(stderr, "throttle proxy: stopped")
	return nil
}

// parseRoutes splits --route values into path-prefix routes and routes on
// a listener of their own (Name holds the listen address).
func parseRoutes(values []string) (prefixes, listeners []proxy.Route, err error) {
	for _, v := range values {
		key, raw, ok := strings.Cut(v, "=")
		if !ok || key == "" || raw == "" {
			return nil, nil, usagef("--route %q: want NAME=URL or ADDR=URL", v)
		}
		u, err := url.Parse(raw)
		if err != nil {
			return nil, nil, usagef("--route %q: %v", v, urlError(err))
		}
		r := proxy.Route{Name: key, URL: u}
		if strings.Contains(key, ":") {
			listeners = append(listeners, r)
		} else {
			prefixes = append(prefixes, r)
		}
	}
	return prefixes, listeners, nil
}

// describe says what the main listener forwards to.
func describe(cfg *providers.Config, routes []proxy.Route) string {
	s := fmt.Sprintf("forwarding /<host>/<path> to the hosts of %d providers (%s)", len(cfg.Providers()), cfg.Name())
	for _, r := range routes {
		s += fmt.Sprintf(", /%s/ to %s", r.Name, r.URL)
	}
	return s
}

// health answers /healthz: whether Redis answers a PING in time. The
// client gets a short reason; the log, the address and the cause.
func health(w http.ResponseWriter, r *http.Request, e *env, spec string, timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	body := map[string]string{"status": "ok"}
	if err := e.client.Ping(ctx).Err(); err != nil {
		log.Warn("throttle proxy: /healthz: the quota store does not answer", "error", redisDown(r.Context(), e.client, spec, timeout, err))
		body = map[string]string{"status": "store_unavailable",
			"error": fmt.Sprintf("Redis did not answer a PING within %v; the proxy's log has the cause", timeout)}
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// observers tells every observer.
type observers []throttle.Observer

func (o observers) Observe(ctx context.Context, e throttle.Event) {
	for _, x := range o {
		x.Observe(ctx, e)
	}
}

// logObserver logs what an operator must hear about (the store failing,
// fallbacks, fleet-wide pauses); refusals and waits are the metrics'.
type logObserver struct{ next throttle.Observer }

func (o logObserver) Observe(ctx context.Context, e throttle.Event) {
	switch e.Kind {
	case throttle.StoreError, throttle.FellBack, throttle.Paused:
		o.next.Observe(ctx, e)
	}
}
