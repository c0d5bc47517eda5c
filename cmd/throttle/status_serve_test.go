package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestServeAddr(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		":8080": "127.0.0.1:8080", "127.0.0.1:0": "127.0.0.1:0", "0.0.0.0:80": "0.0.0.0:80",
		"[::1]:8080": "[::1]:8080", "localhost:8080": "localhost:8080",
		"8080": "", "": "", "host:": "",
	} {
		got, err := serveAddr(in)
		if want == "" {
			if err == nil {
				t.Errorf("serveAddr(%q) = %q, want a usage error", in, got)
			}
		} else if got != want || err != nil {
			t.Errorf("serveAddr(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
}

// pageServer serves f's status page on a test server.
func pageServer(t *testing.T, f *fixture) (*statusPage, *httptest.Server) {
	t.Helper()
	sf := storeFlags{redis: f.url, config: validFile, prefix: f.prefix, timeout: 5 * time.Second}
	e, err := sf.open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	w, err := newWatcher(e, nil, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	page := newStatusPage(w, time.Second)
	srv := httptest.NewServer(page)
	t.Cleanup(srv.Close)
	return page, srv
}

func get(t *testing.T, url, host string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// TestStatusPage checks the page --serve serves without a browser: a
// self-contained read-only HTML page, and the JSON it polls, which holds
// the state in Redis.
func TestStatusPage(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	for i := 0; i < 3; i++ {
		f.reserve(t, "https://api.acme.test/x", "")
	}
	mustCLI(t, f.args("pause", "acme", "--for", "10m", "--reason", "vendor incident")...)
	noteRefusals(t, f, "acme", "daily", 4)
	page, srv := pageServer(t, f)

	resp, body := get(t, srv.URL+"/", "")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("GET /: Content-Security-Policy %q", csp)
	}
	if !strings.Contains(body, `data-interval-ms="1000"`) || !strings.Contains(body, "<script>") || !strings.Contains(body, "status.json") {
		t.Errorf("GET /: the page lacks its interval, script or JSON endpoint:\n%s", body)
	}
	// Nothing from elsewhere: no src or href attributes, no URLs.
	if m := regexp.MustCompile(`(?i)\b(src|href)\s*=|https?://|@import|url\(`).FindString(body); m != "" {
		t.Errorf("GET /: the page loads something (%q): it must be self-contained", m)
	}

	resp, body = get(t, srv.URL+"/status.json", "")
	var v view
	if err := json.Unmarshal([]byte(body), &v); resp.StatusCode != 200 || err != nil {
		t.Fatalf("GET /status.json: %d, %v\n%s", resp.StatusCode, err, body)
	}
	if r := findRow(t, v, "acme", "daily", ""); r.Used != 3 || r.Remaining != 97 || r.Published != "100/day" || r.Effective != "100/day" {
		t.Errorf("acme daily in /status.json: %+v", r)
	}
	if r := findRow(t, v, "mixed", "global", ""); r.Published != "100/s" || r.Effective != "50/s" || r.Exists {
		t.Errorf("mixed global in /status.json: %+v, want published 100/s, effective 50/s at 50%% headroom, no state", r)
	}
	if len(v.Pauses) != 1 || v.Pauses[0].Provider != "acme" || v.Pauses[0].Holds != holdsEvery ||
		!strings.HasPrefix(v.Pauses[0].Reason, "throttle pause") || !strings.HasSuffix(v.Pauses[0].Reason, ": vendor incident") ||
		v.Pauses[0].SetAt == nil || v.Pauses[0].Until.Sub(*v.Pauses[0].SetAt) != 10*time.Minute {
		t.Errorf("pauses in /status.json: %+v, want acme's, set for 10m with its reason", v.Pauses)
	}
	if len(v.Refusals) != 1 || v.Refusals[0].Provider != "acme" || v.Refusals[0].Limit != "daily" ||
		v.Refusals[0].Last5Min != 4 || v.Refusals[0].LastHour != 4 || v.Refusals[0].RetryAfterMS != 3000 || v.Refusals[0].Last == nil {
		t.Errorf("refusals in /status.json: %+v, want acme's daily, 4, told 3s", v.Refusals)
	}

	for _, m := range []string{"POST", "DELETE"} {
		req, _ := http.NewRequest(m, srv.URL+"/status.json", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d, want 405: the page is read-only", m, resp.StatusCode)
		}
	}
	if resp, _ := get(t, srv.URL+"/nosuch", ""); resp.StatusCode != 404 {
		t.Errorf("GET /nosuch: %d", resp.StatusCode)
	}

	// On loopback, only requests addressed to a loopback name: a name
	// rebound to 127.0.0.1 by a web page's DNS is refused.
	page.loopback = true
	if resp, _ := get(t, srv.URL+"/status.json", "evil.example:80"); resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("Host evil.example on loopback: %d, want 421", resp.StatusCode)
	}
	for _, host := range []string{"localhost:8080", "127.0.0.1", "[::1]:80"} {
		if resp, _ := get(t, srv.URL+"/", host); resp.StatusCode != 200 {
			t.Errorf("Host %s on loopback: %d, want 200", host, resp.StatusCode)
		}
	}
}

// TestStatusServe runs status --serve until its context ends: it says
// where it serves, and stops cleanly.
func TestStatusServe(t *testing.T) {
	t.Parallel()
	f := startFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	code, _, errOut := cli(ctx, f.args("status", "--serve", "127.0.0.1:0")...)
	if code != exitOK || !regexp.MustCompile(`serving http://127\.0\.0\.1:\d+/`).MatchString(errOut) {
		t.Errorf("status --serve: exit %d, %s", code, errOut)
	}
	for _, args := range [][]string{
		{"status", "--serve", ":8080", "--json"},
		{"status", "--serve", ":8080", "--watch"},
		{"status", "--serve", "8080"},
	} {
		if code, _, errOut := cli(context.Background(), f.args(args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
}

// noteRefusals records n refusals of provider's limit in f's Redis, as a
// process of the fleet does (redisstore.RefusalLog).
func noteRefusals(t *testing.T, f *fixture, provider, limit string, n int) {
	t.Helper()
	log, err := f.store.NewRefusalLog(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		log.NoteRefusal(provider, limit, 3*time.Second)
	}
	if err := log.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
