package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// statusPageHTML is the page --serve serves: its CSS and script are
// inline, so it needs nothing from elsewhere.
//
//go:embed status_page.html
var statusPageHTML string

var statusPageTemplate = template.Must(template.New("status").Parse(statusPageHTML))

// serveAddr checks a --serve address and makes a bare port (":8080")
// listen on loopback only: the page shows tenants' names and usage.
func serveAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", usagef("--serve %q: want [HOST]:PORT, e.g. :8080", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// serveStatus serves the status page on addr until ctx ends.
func serveStatus(ctx context.Context, addr string, w *watcher, interval time.Duration, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--serve: %w", err)
	}
	page := newStatusPage(w, interval)
	host, _, _ := net.SplitHostPort(addr)
	page.loopback = isLoopback(host)
	srv := &http.Server{Handler: page, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "throttle status: serving http://%s/ until interrupted\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}

// statusPage serves the page at / and the state it shows, as --json
// writes it, at /status.json. However many pages poll it, it reads the
// store at most once per half interval.
type statusPage struct {
	w        *watcher
	interval time.Duration
	page     []byte
	// loopback, when the page listens on loopback only, refuses requests
	// not addressed to a loopback name, so that a web page whose name a
	// DNS rebinding points at 127.0.0.1 cannot read the status.
	loopback bool

	mu   sync.Mutex // serializes refreshes: the watcher is not safe for concurrent use
	last []byte     // the last answer of /status.json
	code int        // and its status
	at   time.Time  // when it was read
}

func newStatusPage(w *watcher, interval time.Duration) *statusPage {
	var b bytes.Buffer
	// The template is fixed and its one value a number: it cannot fail.
	_ = statusPageTemplate.Execute(&b, struct{ IntervalMS int64 }{interval.Milliseconds()})
	return &statusPage{w: w, interval: interval, page: b.Bytes()}
}

func (s *statusPage) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	h := rw.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "+
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	if s.loopback && !isLoopback(hostOnly(r.Host)) {
		http.Error(rw, "this page answers only requests addressed to localhost or a loopback address", http.StatusMisdirectedRequest)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(rw, "read-only: GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "/":
		h.Set("Content-Type", "text/html; charset=utf-8")
		_, _ = rw.Write(s.page)
	case "/status.json":
		body, code := s.state(r.Context())
		h.Set("Content-Type", "application/json")
		rw.WriteHeader(code)
		_, _ = rw.Write(body)
	default:
		http.NotFound(rw, r)
	}
}

// state returns the JSON of a refresh and its status: 200, or 503 with
// the error in the document's "error" when the store did not answer.
func (s *statusPage) state(ctx context.Context) ([]byte, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil && time.Since(s.at) < s.interval/2 {
		return s.last, s.code
	}
	// A tab closed mid-read must not cut the read the other tabs share.
	v, err := s.w.refresh(context.WithoutCancel(ctx))
	code := http.StatusOK
	if err != nil {
		v, code = &view{Error: err.Error(), Prefix: s.w.e.store.Prefix()}, http.StatusServiceUnavailable
	}
	var b bytes.Buffer
	if err := renderJSON(&b, v); err != nil {
		return []byte(`{"error":"encoding the status failed"}`), http.StatusInternalServerError
	}
	s.last, s.code, s.at = b.Bytes(), code, time.Now()
	return s.last, s.code
}

// isLoopback reports whether host (no port) is "localhost" or a loopback
// IP address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostOnly is the host of a Host header, without its port.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}
