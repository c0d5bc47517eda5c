package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// DefaultMaxRetryBody is Options.MaxRetryBody when it is zero.
const DefaultMaxRetryBody = 1 << 20

// DefaultMaxHeldBodies is Options.MaxHeldBodies when it is zero: 64
// bodies of the largest size held for retries, thousands of ordinary API
// calls.
const DefaultMaxHeldBodies = 64 << 20

// Options configures a Proxy.
type Options struct {
	// Registry resolves a request's host to its provider; only hosts it
	// claims are forwarded. Required. The transport uses it too.
	Registry *providers.Registry
	// Throttle are the transport's options: throttle.WithStore (the
	// fleet's redisstore), WithObserver. New adds WithRegistry and
	// WithBase last. WithRetries has no effect: see Retries.
	Throttle []throttle.Option
	// Retries is the most retries after a vendor's throttle (or a 5xx or
	// connection error of an idempotent request), as throttle.NewClient
	// makes them, within the request's hold: every wait, for a slot or
	// before a retry, ends within the max wait of the request (the
	// provider's max_wait, or a shorter Throttle-Max-Wait) from when the
	// proxy has the request (its headers and any body it holds), and a
	// retry that would start later is not made. Zero means none.
	Retries int
	// retryWaitMin and retryWaitMax bound the exponential backoff between
	// retries where the vendor names no delay; zero means
	// throttle.DefaultRetryWaitMin and DefaultRetryWaitMax.
	retryWaitMin, retryWaitMax time.Duration
	// Upstream sends the throttled requests to the vendors. Nil means
	// NewUpstream(0).
	Upstream http.RoundTripper
	// Routes are base URLs served under a path prefix: /<Name>/<path> is
	// forwarded to URL + /<path>.
	Routes []Route
	// LoopbackHTTP makes the /<host>/<path> form reach loopback hosts
	// (localhost, 127.0.0.0/8, ::1) over plain http; every other host is
	// reached over https whatever it says. For tests and development.
	LoopbackHTTP bool
	// MaxRetryBody is the largest request body held in memory so that a
	// retry can send it again; a larger body is streamed and sent once,
	// without retries. Zero means DefaultMaxRetryBody; negative, never
	// hold a body (no request with a body is retried).
	MaxRetryBody int64
	// MaxHeldBodies bounds the bytes of the bodies held in memory at once
	// (each at most MaxRetryBody): a request whose body would pass it
	// gets a 503 (overloaded) with Retry-After. Zero means
	// DefaultMaxHeldBodies; negative, no bound.
	MaxHeldBodies int64
	// LowerCosts lets the Throttle-Cost and Throttle-Limit-Cost headers
	// set a cost below the configured one (a route's cost or costs, else
	// 1). By default a header can only raise a cost: a lower one counts
	// as the configured one, so that a client cannot spend less of the
	// quota than the operator priced its request at.
	LowerCosts bool
	// Business, when set, is the business of every request, whatever
	// the client says: a Throttle-Business with another value is a 400.
	// It binds the proxy to one tenant, so that a per-business limit
	// holds against a client that would name a new tenant per request.
	Business string
	// Log receives what goes wrong; nil means slog.Default().
	Log *slog.Logger
	// Done, when set, is told the provider ("" when none matched) and the
	// status of every request answered, 499 when the client went away
	// first. It must be fast and safe for concurrent use (metrics).
	Done func(provider string, status int)
}

// A Route is a base URL served under a path prefix or a listener of its
// own.
type Route struct {
	// Name is the path prefix: /<Name>/... Letters, digits, "-" and "_".
	Name string
	// URL is the base: scheme (http or https), host, and an optional path
	// that forwarded paths are appended to.
	URL *url.URL
}

// A Proxy forwards requests to the hosts of configured providers through
// one throttle.Transport. It is an http.Handler for the /<route>/<path>
// and /<host>/<path> forms; Upstream gives the handler of a route served
// on its own listener.
type Proxy struct {
	reg          *providers.Registry
	routes       map[string]*url.URL
	loopbackHTTP bool
	maxBody      int64
	held         budget // the bytes of bodies held in memory
	trust        trust
	log          *slog.Logger
	done         func(string, int)
	rp           *httputil.ReverseProxy
	t            *throttle.Transport
}

// errUsage is wrapped by New's and Upstream's errors about bad options.
var errUsage = errors.New("proxy")

// New returns a Proxy.
func New(opts Options) (*Proxy, error) {
	if opts.Registry == nil {
		return nil, fmt.Errorf("%w: Options.Registry is required", errUsage)
	}
	p := &Proxy{
		reg:          opts.Registry,
		routes:       map[string]*url.URL{},
		loopbackHTTP: opts.LoopbackHTTP,
		maxBody:      opts.MaxRetryBody,
		trust:        trust{lowerCosts: opts.LowerCosts, business: opts.Business},
		log:          opts.Log,
		done:         opts.Done,
	}
	if len(opts.Business) > maxValueLen {
		return nil, fmt.Errorf("%w: Options.Business is %d bytes long, at most %d allowed", errUsage, len(opts.Business), maxValueLen)
	}
	if p.maxBody == 0 {
		p.maxBody = DefaultMaxRetryBody
	}
	p.held.max = opts.MaxHeldBodies
	if p.held.max == 0 {
		p.held.max = DefaultMaxHeldBodies
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	for _, r := range opts.Routes {
		if !validRouteName(r.Name) {
			return nil, fmt.Errorf("%w: route name %q: want letters, digits, - and _ (a name with a dot would read as a host)", errUsage, r.Name)
		}
		if _, dup := p.routes[r.Name]; dup {
			return nil, fmt.Errorf("%w: route %q given twice", errUsage, r.Name)
		}
		if err := p.checkUpstream(r.URL); err != nil {
			return nil, fmt.Errorf("route %s: %w", r.Name, err)
		}
		p.routes[r.Name] = r.URL
	}
	upstream := opts.Upstream
	if upstream == nil {
		upstream = NewUpstream(0)
	}
	topts := append(append([]throttle.Option(nil), opts.Throttle...),
		throttle.WithRegistry(opts.Registry), throttle.WithBase(upstream))
	t, err := throttle.New(topts...)
	if err != nil {
		return nil, err
	}
	if opts.Retries < 0 || opts.retryWaitMin < 0 || opts.retryWaitMax < 0 {
		return nil, fmt.Errorf("%w: Options.Retries, retryWaitMin and retryWaitMax must not be negative", errUsage)
	}
	retry := &retrier{next: t, max: opts.Retries, min: opts.retryWaitMin, cap: opts.retryWaitMax,
		policy: &backoff.Policy{SignalsFor: p.signalsFor}}
	if retry.min == 0 {
		retry.min = throttle.DefaultRetryWaitMin
	}
	if retry.cap == 0 {
		retry.cap = max(throttle.DefaultRetryWaitMax, retry.min)
	}
	p.t = t
	p.rp = &httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      dispatch{retrying: retry, once: t},
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
		ErrorLog:       slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	return p, nil
}

// Close gives back the quota the proxy's Transport took ahead and has not
// used (throttle.Transport.Close), so that the rest of the fleet gets it
// at once instead of after a period. Call it once the proxy serves no
// more requests; it waits for the store's calls, each bounded by the
// store's timeout. A request after Close is still throttled, decided by
// the store.
func (p *Proxy) Close() error {
	return p.t.Close()
}

// NewUpstream returns the transport that sends to vendors: http's default
// settings with more idle connections per host (every client's requests
// to one vendor go through it), the bodies passed through as they come
// (no transparent gzip), and headerTimeout, when positive, as the longest
// wait for a response's headers. It honours $HTTPS_PROXY.
func NewUpstream(headerTimeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: headerTimeout,
		DisableCompression:    true,
	}
}

// Upstream returns a handler that forwards every request it gets to u
// (base URL plus the request's path), for a route on a listener of its
// own. u's host must be claimed by a provider.
func (p *Proxy) Upstream(u *url.URL) (http.Handler, error) {
	if err := p.checkUpstream(u); err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.originForm(w, r) {
			return
		}
		p.forward(w, r, target(u, r.URL.EscapedPath(), r.URL.RawQuery), mount{base: u})
	}), nil
}

// checkUpstream checks a route's base URL.
func (p *Proxy) checkUpstream(u *url.URL) error {
	if u == nil {
		return fmt.Errorf("%w: no URL", errUsage)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: %s: want an http:// or https:// URL", errUsage, u.Redacted())
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%w: %s: want scheme://host[:port][/path], without user, query or fragment", errUsage, u.Redacted())
	}
	if _, ok := p.resolve(&http.Request{Method: http.MethodGet, URL: u, Host: u.Host}); !ok {
		return fmt.Errorf("%w: %s: no provider in the configuration claims host %q", errUsage, u.Redacted(), u.Host)
	}
	return nil
}

// resolve returns the provider that claims req's host and the route req
// matches, as configured (without the request's headers).
func (p *Proxy) resolve(req *http.Request) (providers.Resolution, bool) {
	res, ok, _ := p.reg.Resolve(req, providers.Input{})
	return res, ok
}

// signalsFor returns the throttling signals of req's provider, or nil.
func (p *Proxy) signalsFor(req *http.Request) *backoff.Signals {
	if res, ok := p.resolve(req); ok {
		return &res.Provider.Signals
	}
	return nil
}

// ServeHTTP forwards /<route>/<path> to the route's base URL and
// /<host>/<path> to https://<host>/<path>.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.originForm(w, r) {
		return
	}
	first, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	rest = "/" + rest
	if first == "" {
		p.fail(w, r, "", http.StatusNotFound, codeNotFound,
			"send http://<proxy>/<host>/<path> (for https://<host>/<path>) or http://<proxy>/<route>/<path>", nil)
		return
	}
	if u, ok := p.routes[first]; ok {
		p.forward(w, r, target(u, rest, r.URL.RawQuery), mount{prefix: "/" + first, base: u})
		return
	}
	host, ok := parseHost(first)
	if !ok {
		p.fail(w, r, "", http.StatusBadRequest, codeBadRequest,
			fmt.Sprintf("%s is neither a route nor a host[:port]: send http://<proxy>/<host>/<path>", quote(first)), nil)
		return
	}
	p.forward(w, r, target(&url.URL{Scheme: p.scheme(host), Host: host}, rest, r.URL.RawQuery), mount{})
}

// originForm refuses what a forward proxy would get: CONNECT and requests
// for an absolute URL.
func (p *Proxy) originForm(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodConnect || r.URL.Host != "" || r.URL.Scheme != "" {
		p.fail(w, r, "", http.StatusBadRequest, codeBadRequest,
			"this is not a forward proxy (no CONNECT, no absolute URLs): send http://<proxy>/<host>/<path>", nil)
		return false
	}
	return true
}

// target is the outbound URL: base, its path joined with the request's
// escaped path, and the query.
func target(base *url.URL, escapedPath, rawQuery string) *url.URL {
	u := &url.URL{Scheme: base.Scheme, Host: base.Host, RawQuery: rawQuery}
	joined := strings.TrimSuffix(base.EscapedPath(), "/") + escapedPath
	if p, err := url.PathUnescape(joined); err == nil {
		u.Path, u.RawPath = p, joined
	} else {
		u.Path = joined
	}
	return u
}

// scheme is the scheme of the /<host>/ form for host.
func (p *Proxy) scheme(host string) string {
	if p.loopbackHTTP && loopback(host) {
		return "http"
	}
	return "https"
}

// mount is where a request came in: under a route's base URL, at a path
// prefix ("/name") or on a listener of its own (""), or in the /<host>/
// form (base nil).
type mount struct {
	prefix string
	base   *url.URL
}

// reqInfo travels in the request's context from ServeHTTP to the reverse
// proxy's hooks.
type reqInfo struct {
	out      *url.URL
	mount    mount
	front    string // the Host the client addressed the proxy by
	provider string
	status   int
	once     bool // the body is streamed: no retries
	// deadline is when the request's hold ends: no wait, for a slot or
	// before a retry, lasts past it.
	deadline time.Time
	held     int64 // bytes of the body held in memory
}

type infoKey struct{}

func infoFrom(ctx context.Context) *reqInfo {
	i, _ := ctx.Value(infoKey{}).(*reqInfo)
	return i
}

// forward throttles and sends r to out.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, out *url.URL, m mount) {
	probe := &http.Request{Method: r.Method, URL: out, Host: out.Host, Header: r.Header}
	res, ok := p.resolve(probe)
	if !ok {
		p.fail(w, r, "", http.StatusForbidden, codeUnknownHost,
			fmt.Sprintf("no provider in the configuration claims host %s: the proxy forwards only to configured providers' hosts", quote(out.Host)),
			func(a *answer) { a.Host = out.Host })
		return
	}
	prov := res.Provider
	vals, err := parseHeaders(r.Header)
	if err == nil {
		err = vals.fit(res, p.trust)
	}
	if err != nil {
		p.fail(w, r, prov.Name, http.StatusBadRequest, codeBadRequest, err.Error(), nil)
		return
	}
	info := &reqInfo{out: out, mount: m, front: r.Host, provider: prov.Name}
	defer func() { p.held.give(info.held) }()
	if err := p.holdBody(r, info); err != nil {
		if errors.Is(err, errOverloaded) {
			w.Header().Set("Retry-After", "1")
			p.fail(w, r, prov.Name, http.StatusServiceUnavailable, codeOverloaded, err.Error(), nil)
			return
		}
		p.fail(w, r, prov.Name, http.StatusBadRequest, codeBadRequest, "reading the request body: "+err.Error(), nil)
		return
	}
	// The hold starts once the proxy has the request: a slow upload is
	// the client's time, not a wait the proxy imposes.
	hold := prov.MaxWait
	if vals.hasMaxWait {
		hold = min(hold, vals.maxWait)
	}
	info.deadline = time.Now().Add(hold)
	// No protocol upgrades (WebSocket): Upgrade is a hop-by-hop header
	// and is dropped, so the reverse proxy sends a plain request.
	r.Header.Del("Upgrade")
	ctx := vals.apply(context.WithValue(r.Context(), infoKey{}, info), prov.MaxWait)
	// Deferred: the reverse proxy aborts the handler with a panic when
	// the response cannot be copied to the client.
	defer func() { p.report(info.provider, info.status) }()
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// holdBody reads a body of at most MaxRetryBody bytes into memory, so
// that retries can send it again; a larger one is left to stream once.
func (p *Proxy) holdBody(r *http.Request, info *reqInfo) error {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	if p.maxBody < 0 || r.ContentLength > p.maxBody {
		info.once = true
		return nil
	}
	// A body of unknown length may take up to the largest size; what it
	// does not use is given back once it is read.
	want := r.ContentLength
	if want < 0 {
		want = p.maxBody
	}
	if !p.held.take(want) {
		return fmt.Errorf("%w: the request bodies held in memory are at the proxy's bound of %d bytes (--max-held-bodies): retry shortly",
			errOverloaded, p.held.max)
	}
	info.held = want
	buf, err := io.ReadAll(io.LimitReader(r.Body, p.maxBody+1))
	if err != nil {
		return err
	}
	if n := min(int64(len(buf)), p.maxBody); n < want {
		p.held.give(want - n)
		info.held = n
	}
	if int64(len(buf)) > p.maxBody {
		// Longer than it may be held (a chunked body): what was read is
		// sent first, then the rest as it comes.
		info.once = true
		r.Body = readCloser{io.MultiReader(bytes.NewReader(buf), r.Body), r.Body}
		return nil
	}
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(buf))
	// The retrying client sends each attempt a fresh copy from GetBody
	// and sends a body without one only once.
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	r.ContentLength, r.TransferEncoding = int64(len(buf)), nil
	return nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// errOverloaded is wrapped when the bodies held in memory are at their
// bound.
var errOverloaded = errors.New("overloaded")

// budget counts bytes held against a bound; max < 0 means none.
type budget struct {
	max  int64
	used atomic.Int64
}

// take counts n bytes held, if the bound allows them.
func (b *budget) take(n int64) bool {
	if b.used.Add(n) > b.max && b.max >= 0 {
		b.used.Add(-n)
		return false
	}
	return true
}

// give counts n bytes no longer held.
func (b *budget) give(n int64) { b.used.Add(-n) }

// dispatch sends a request through the retrying client, or once through
// the bare transport when its body could not be held for a retry.
type dispatch struct{ retrying, once http.RoundTripper }

func (d dispatch) RoundTrip(req *http.Request) (*http.Response, error) {
	if i := infoFrom(req.Context()); i != nil && i.once {
		return d.once.RoundTrip(req)
	}
	return d.retrying.RoundTrip(req)
}

// rewrite makes the outbound request: the target URL, its host as Host,
// no Throttle-* headers. The reverse proxy has already removed the
// hop-by-hop headers and Forwarded/X-Forwarded-*, and sets none: the
// vendor sees the proxy as the client.
func rewrite(pr *httputil.ProxyRequest) {
	info := infoFrom(pr.In.Context())
	u := *info.out
	pr.Out.URL = &u
	pr.Out.Host = ""
	pr.Out.RequestURI = "" // the retrying layer sends with an http.Client, which refuses one
	for name := range pr.Out.Header {
		if isThrottleHeader(name) {
			delete(pr.Out.Header, name)
		}
	}
}

// modifyResponse records the status, points a redirect back through the
// proxy, and drops a Throttle-Error header a vendor might send, so that the
// header always means the proxy answered.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	resp.Header.Del(HeaderError)
	if resp.Request == nil {
		return nil
	}
	info := infoFrom(resp.Request.Context())
	if info == nil {
		return nil
	}
	info.status = resp.StatusCode
	if loc := resp.Header.Get("Location"); loc != "" {
		resp.Header.Set("Location", p.relocate(loc, resp.Request.URL, info))
	}
	return nil
}

// relocate rewrites a redirect's Location so that the client follows it
// through the proxy, and so through the throttle, where the proxy can
// forward it: under the route the request came through, or else in the
// /<host>/ form to a host a provider claims (not on a route's own
// listener, which has no such form). Any other Location is made absolute
// (a relative one is relative to the vendor's URL) and left to the client.
func (p *Proxy) relocate(loc string, out *url.URL, info *reqInfo) string {
	u, err := out.Parse(loc)
	if err != nil || u.Host == "" || u.User != nil {
		return loc
	}
	front := "http://" + info.front
	tail := ""
	if u.RawQuery != "" || u.ForceQuery {
		tail = "?" + u.RawQuery
	}
	if u.Fragment != "" {
		tail += "#" + u.EscapedFragment()
	}
	if b := info.mount.base; b != nil && u.Scheme == b.Scheme && strings.EqualFold(u.Host, b.Host) {
		bp, ep := strings.TrimSuffix(b.EscapedPath(), "/"), u.EscapedPath()
		if ep == bp || strings.HasPrefix(ep, bp+"/") {
			return front + info.mount.prefix + strings.TrimPrefix(ep, bp) + tail
		}
	}
	hostForm := info.mount.base == nil || info.mount.prefix != ""
	if _, claimed := p.resolve(&http.Request{Method: http.MethodGet, URL: u, Host: u.Host}); hostForm && claimed && u.Scheme == p.scheme(u.Host) {
		return front + "/" + strings.ToLower(u.Host) + u.EscapedPath() + tail
	}
	return u.String()
}

// errorHandler answers a request the transport did not send, or whose
// sending failed.
func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	info := infoFrom(r.Context())
	prov := ""
	if info != nil {
		prov = info.provider
	}
	var le *throttle.LimitError
	switch {
	case r.Context().Err() != nil:
		// The client went away (while waiting for a slot, its slot was
		// given back); nobody reads an answer.
		if info != nil {
			info.status = statusClientGone
		}
		return
	case errors.As(err, &le):
		p.refuse(w, r, le)
	case errors.Is(err, throttle.ErrStoreUnavailable):
		w.Header().Set("Retry-After", "1")
		p.fail(w, r, prov, http.StatusServiceUnavailable, codeStoreUnavailable,
			"the quota store is unavailable and the provider fails closed", nil)
	case errors.Is(err, providers.ErrMissingScope):
		p.fail(w, r, prov, http.StatusBadRequest, codeMissingScope, trimPrefix(err), nil)
	case errors.Is(err, quota.ErrInvalid), errors.Is(err, providers.ErrUnknownClass):
		p.fail(w, r, prov, http.StatusBadRequest, codeBadRequest, trimPrefix(err), nil)
	case isTimeout(err):
		p.fail(w, r, prov, http.StatusGatewayTimeout, codeUpstreamTimeout, "the vendor did not answer in time", nil)
	default:
		p.log.Warn("throttle proxy: upstream request failed", "provider", prov, "error", err)
		p.fail(w, r, prov, http.StatusBadGateway, codeUpstreamError, upstreamReason(err), nil)
	}
}

// upstreamReason says why a request to the vendor failed, for the client:
// what kind of failure and what to do, without the addresses (of the
// vendor's servers, of the DNS server) that the error holds and the
// proxy's log keeps.
func upstreamReason(err error) string {
	var (
		dns    *net.DNSError
		cert   *tls.CertificateVerificationError
		record tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, http.ErrSchemeMismatch) || errors.As(err, &record) && string(record.RecordHeader[:]) == "HTTP/":
		return "the vendor answered plain HTTP to HTTPS: the /<host>/ form is https; for a local test vendor, start the proxy with --insecure-upstream-http"
	case errors.As(err, &dns):
		return "the vendor's host name did not resolve; the proxy's log has the details"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the vendor refused the connection; the proxy's log has the details"
	case errors.As(err, &cert):
		return "the vendor's TLS certificate was not accepted; the proxy's log has the details"
	default:
		return "the request to the vendor failed; the proxy's log has the details"
	}
}

// refuse answers a request the throttle refused: 429, Retry-After in
// whole seconds (rounded up), and the details in the body.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, le *throttle.LimitError) {
	secs := int64((le.RetryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	scope := le.Scope
	p.write(w, http.StatusTooManyRequests, &answer{
		Error:        codeLimited,
		Message:      le.Error(),
		Provider:     le.Provider,
		Limit:        le.Limit,
		Scope:        &scope,
		RetryAfterMS: max(le.RetryAfter.Milliseconds(), 1),
	})
	infoFrom(r.Context()).status = http.StatusTooManyRequests
}

func (p *Proxy) report(provider string, status int) {
	if p.done != nil {
		p.done(provider, status)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// trimPrefix drops the "throttle: " the transport's errors start with.
func trimPrefix(err error) string {
	return strings.TrimPrefix(err.Error(), "throttle: ")
}

// parseHost checks the host[:port] of the /<host>/<path> form and returns
// it lower-cased.
func parseHost(s string) (string, bool) {
	if s == "" || len(s) > 262 || strings.ContainsAny(s, "%@") {
		return "", false
	}
	host, port := s, ""
	if h, pt, err := net.SplitHostPort(s); err == nil {
		host, port = h, pt
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return "", false
		}
	} else if strings.Contains(s, ":") {
		return "", false
	}
	if ip := net.ParseIP(host); ip == nil {
		if len(host) > 253 {
			return "", false
		}
		for _, label := range strings.Split(strings.TrimSuffix(host, "."), ".") {
			if label == "" || len(label) > 63 || label[0] == '-' {
				return "", false
			}
			for i := 0; i < len(label); i++ {
				c := label[i]
				if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
					return "", false
				}
			}
		}
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]" // IPv6 goes back in brackets
	}
	if port != "" {
		host += ":" + port
	}
	return strings.ToLower(host), true
}

// loopback reports whether host[:port] names this machine.
func loopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func validRouteName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
