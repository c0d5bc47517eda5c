package backoff

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// response builds a response with a status, headers given as name/value
// pairs, and a body.
func response(status int, body string, kv ...string) *http.Response {
	h := make(http.Header)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &http.Response{
		StatusCode: status,
		Header:     h,
		Body:       io.NopCloser(strings.NewReader(body)),
	}
}

var (
	github = &Signals{Rules: []Rule{
		{Status: 429},
		{Status: 403, Header: "x-ratelimit-remaining", HeaderValue: "0"},
		{Status: 403, BodyContains: "secondary rate limit"},
	}}
	// githubDefault is the catalog's github signals: GitHub's rules and
	// its one-minute wait when no header names a delay.
	githubDefault = &Signals{Rules: github.Rules, DefaultDelay: time.Minute, MaxDelay: time.Hour}
	salesforce    = &Signals{Rules: []Rule{{Status: 403, BodyContains: "REQUEST_LIMIT_EXCEEDED"}}}
	openai        = &Signals{
		Ignore:       []Rule{{Status: 429, BodyContains: "insufficient_quota"}},
		DelayHeaders: []string{"x-ratelimit-reset-requests"},
	}
	anthropic = &Signals{DelayHeaders: []string{"anthropic-ratelimit-requests-reset"}}
	stripe    = &Signals{Rules: []Rule{{Status: 429, Header: "Stripe-Rate-Limited-Reason"}}}
)

func TestClassify(t *testing.T) {
	t.Parallel()
	epoch := strconv.FormatInt(now.Unix(), 10)
	in := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	cases := []struct {
		name string
		resp *http.Response
		sig  *Signals
		want Verdict
	}{
		{"nil response", nil, nil, Verdict{}},
		{"200", response(200, "ok"), nil, Verdict{}},
		{"429 without delay", response(429, ""), nil, Verdict{Throttled: true, retryable: true}},
		{"Shopify decimal Retry-After", response(429, "", "Retry-After", "2.0"), nil,
			Verdict{Throttled: true, retryable: true, Delay: 2 * time.Second, Source: "Retry-After"}},
		{"Notion integer Retry-After", response(429, `{"code":"rate_limited"}`, "Retry-After", "1"), nil,
			Verdict{Throttled: true, retryable: true, Delay: time.Second, Source: "Retry-After"}},
		{"Discord: Retry-After before Reset-After", response(429, `{"retry_after": 64.57}`,
			"Retry-After", "65", "X-RateLimit-Reset-After", "64.57", "X-RateLimit-Reset", epoch+".570"), nil,
			Verdict{Throttled: true, retryable: true, Delay: 65 * time.Second, Source: "Retry-After"}},
		{"Discord: Reset-After alone", response(429, "", "X-RateLimit-Reset-After", "64.57"), nil,
			Verdict{Throttled: true, retryable: true, Delay: 64570 * time.Millisecond, Source: "X-RateLimit-Reset-After"}},
		{"GitHub primary: 403, remaining 0, epoch reset", response(403, `{"message":"API rate limit exceeded"}`,
			"x-ratelimit-remaining", "0", "x-ratelimit-reset", in(5*time.Minute)), github,
			Verdict{Throttled: true, retryable: true, Delay: 5 * time.Minute, Source: "X-RateLimit-Reset"}},
		{"GitHub: reset an hour away is capped", response(403, "",
			"x-ratelimit-remaining", "0", "x-ratelimit-reset", in(time.Hour)), github,
			Verdict{Throttled: true, retryable: true, Delay: DefaultMaxDelay, Source: "X-RateLimit-Reset"}},
		{"GitHub secondary: body, retry-after", response(403, `{"message":"You have exceeded a secondary rate limit"}`,
			"retry-after", "60"), github,
			Verdict{Throttled: true, retryable: true, Delay: time.Minute, Source: "Retry-After"}},
		// docs.github.com rate-limits-for-the-rest-api, "Exceeding the
		// rate limit": with no retry-after and x-ratelimit-remaining not 0,
		// wait at least a minute; the reset is the primary window's, not
		// the secondary limit's, and may be seconds away.
		{"GitHub secondary: remaining left, reset is not the delay", response(403,
			`{"message":"You have exceeded a secondary rate limit"}`,
			"x-ratelimit-remaining", "4321", "x-ratelimit-reset", in(10*time.Second)), githubDefault,
			Verdict{Throttled: true, retryable: true, Delay: time.Minute, Source: "default_delay"}},
		{"GitHub secondary: remaining 0, the reset", response(403,
			`{"message":"You have exceeded a secondary rate limit"}`,
			"x-ratelimit-remaining", "0", "x-ratelimit-reset", in(5*time.Minute)), githubDefault,
			Verdict{Throttled: true, retryable: true, Delay: 5 * time.Minute, Source: "X-RateLimit-Reset"}},
		{"Discord: Reset-After with requests left is not the delay", response(429, "",
			"X-RateLimit-Remaining", "3", "X-RateLimit-Reset-After", "64.57"), nil,
			Verdict{Throttled: true, retryable: true}},
		{"GitHub 403 that is not a throttle", response(403, `{"message":"Resource not accessible"}`,
			"x-ratelimit-remaining", "4999", "x-ratelimit-reset", in(time.Hour)), github, Verdict{}},
		{"GitHub 200: reset is not a delay", response(200, "",
			"x-ratelimit-remaining", "0", "x-ratelimit-reset", in(time.Hour)), github, Verdict{}},
		{"Salesforce 403 body", response(403, `[{"errorCode":"REQUEST_LIMIT_EXCEEDED","message":"TotalRequests Limit exceeded."}]`,
			"Sforce-Limit-Info", "api-usage=5000/5000"), salesforce, Verdict{Throttled: true, retryable: true}},
		{"Salesforce other 403", response(403, `[{"errorCode":"INSUFFICIENT_ACCESS"}]`), salesforce, Verdict{}},
		{"Rules replace the default 429", response(429, "", "Retry-After", "5"), salesforce,
			Verdict{Delay: 5 * time.Second, Source: "Retry-After"}},
		{"OpenAI insufficient_quota is ignored", response(429,
			`{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}`, "retry-after", "20"), openai,
			Verdict{Ignored: true}},
		{"OpenAI rate limit: configured header first", response(429, `{"error":{"code":"rate_limit_exceeded"}}`,
			"x-ratelimit-reset-requests", "6m0s", "retry-after-ms", "1500", "retry-after", "2"), openai,
			Verdict{Throttled: true, retryable: true, Delay: 6 * time.Minute, Source: "x-ratelimit-reset-requests"}},
		{"OpenAI: retry-after-ms before retry-after", response(429, "",
			"retry-after-ms", "1500", "retry-after", "2"), nil,
			Verdict{Throttled: true, retryable: true, Delay: 1500 * time.Millisecond, Source: "retry-after-ms"}},
		{"retry-after-ms named in DelayHeaders is milliseconds", response(429, "",
			"retry-after-ms", "120", "retry-after", "1"), &Signals{DelayHeaders: []string{"Retry-After-Ms", "x-ratelimit-reset-requests"}},
			Verdict{Throttled: true, retryable: true, Delay: 120 * time.Millisecond, Source: "Retry-After-Ms"}},
		{"OpenAI: bad configured header falls through", response(429, "",
			"x-ratelimit-reset-requests", "soon", "retry-after", "2"), openai,
			Verdict{Throttled: true, retryable: true, Delay: 2 * time.Second, Source: "Retry-After"}},
		{"Anthropic RFC 3339 reset", response(429, "",
			"anthropic-ratelimit-requests-reset", "2026-11-21T06:00:42Z"), anthropic,
			Verdict{Throttled: true, retryable: true, Delay: 42 * time.Second, Source: "anthropic-ratelimit-requests-reset"}},
		{"Zendesk seconds-until X-RateLimit-Reset", response(429, "", "X-RateLimit-Reset", "45"), nil,
			Verdict{Throttled: true, retryable: true, Delay: 45 * time.Second, Source: "X-RateLimit-Reset"}},
		{"Zendesk ratelimit-reset", response(429, "", "ratelimit-reset", "12"), nil,
			Verdict{Throttled: true, retryable: true, Delay: 12 * time.Second, Source: "RateLimit-Reset"}},
		{"SendGrid epoch", response(429, "", "X-RateLimit-Reset", in(90*time.Second)), nil,
			Verdict{Throttled: true, retryable: true, Delay: 90 * time.Second, Source: "X-RateLimit-Reset"}},
		{"stale epoch is no delay", response(429, "", "X-RateLimit-Reset", in(-time.Second)), nil,
			Verdict{Throttled: true, retryable: true}},
		{"IETF RateLimit", response(429, "", "RateLimit", `"default";r=0;t=30`,
			"RateLimit-Policy", `"default";q=100;w=60`), nil,
			Verdict{Throttled: true, retryable: true, Delay: 30 * time.Second, Source: "RateLimit"}},
		{"IETF RateLimit on two lines", response(429, "", "RateLimit", `"burst";r=5;t=1`, "RateLimit", `"daily";r=0;t=300`), nil,
			Verdict{Throttled: true, retryable: true, Delay: 300 * time.Second, Source: "RateLimit"}},
		{"Retry-After beats RateLimit", response(429, "", "RateLimit", `"default";r=0;t=30`, "Retry-After", "3"), nil,
			Verdict{Throttled: true, retryable: true, Delay: 3 * time.Second, Source: "Retry-After"}},
		{"malformed RateLimit ignored", response(429, "", "RateLimit", `"default";r=0;t=`), nil,
			Verdict{Throttled: true, retryable: true}},
		{"older draft RateLimit", response(429, "", "RateLimit", "limit=100, remaining=0, reset=30"), nil,
			Verdict{Throttled: true, retryable: true, Delay: 30 * time.Second, Source: "RateLimit"}},
		{"Stripe header of any value", response(429, "", "Stripe-Rate-Limited-Reason", "global-rate"), stripe,
			Verdict{Throttled: true, retryable: true}},
		{"Stripe lock_timeout is not a rate limit", response(429, `{"error":{"code":"lock_timeout"}}`), stripe, Verdict{}},
		{"header value trimmed, any case", response(403, "", "X-RateLimit-Remaining", " 0 "),
			&Signals{Rules: []Rule{{Status: 403, Header: "x-ratelimit-remaining", HeaderValue: "0"}}},
			Verdict{Throttled: true, retryable: true}},
		{"header value case-insensitive", response(429, "", "X-Reason", "RATE"),
			&Signals{Rules: []Rule{{Status: 429, Header: "x-reason", HeaderValue: " rate "}}},
			Verdict{Throttled: true, retryable: true}},
		{"rule with status 0 matches nothing", response(429, ""), &Signals{Rules: []Rule{{}}}, Verdict{}},
		{"503 Retry-After is read though not throttled", response(503, "", "Retry-After", "7"), nil,
			Verdict{Delay: 7 * time.Second, Source: "Retry-After"}},
		{"503 X-RateLimit-Reset is not read", response(503, "", "X-RateLimit-Reset", "7"), nil, Verdict{}},
		{"huge Retry-After capped", response(429, "", "Retry-After", "99999999999999999999"), nil,
			Verdict{Throttled: true, retryable: true, Delay: DefaultMaxDelay, Source: "Retry-After"}},
		{"custom MaxDelay", response(429, "", "Retry-After", "120"), &Signals{MaxDelay: 30 * time.Second},
			Verdict{Throttled: true, retryable: true, Delay: 30 * time.Second, Source: "Retry-After"}},
		{"negative MaxDelay ignores vendor delays", response(429, "", "Retry-After", "120"), &Signals{MaxDelay: -1},
			Verdict{Throttled: true, retryable: true}},
		{"negative Retry-After", response(429, "", "Retry-After", "-1"), nil, Verdict{Throttled: true, retryable: true}},
		{"nil header map", &http.Response{StatusCode: 429}, nil, Verdict{Throttled: true, retryable: true}},
		// An explicit zero is "retry now", told from no delay by Source.
		{"Retry-After: 0 is now", response(429, "", "Retry-After", "0"), nil,
			Verdict{Throttled: true, retryable: true, Source: "Retry-After"}},
		{"Retry-After: 0.0 is now", response(429, "", "Retry-After", "0.0"), nil,
			Verdict{Throttled: true, retryable: true, Source: "Retry-After"}},
		{"retry-after-ms: 0 is now", response(429, "", "retry-after-ms", "0", "Retry-After", "0"), nil,
			Verdict{Throttled: true, retryable: true, Source: "retry-after-ms"}},
		{"Retry-After: 0 beats default_delay", response(429, "", "Retry-After", "0"), &Signals{DefaultDelay: time.Minute},
			Verdict{Throttled: true, retryable: true, Source: "Retry-After"}},
		{"a positive delay beats Retry-After: 0", response(429, "", "Retry-After", "0", "X-RateLimit-Reset-After", "5"), nil,
			Verdict{Throttled: true, retryable: true, Delay: 5 * time.Second, Source: "X-RateLimit-Reset-After"}},
		{"retry-after-ms: 0 then a positive Retry-After", response(429, "", "retry-after-ms", "0", "Retry-After", "2"), nil,
			Verdict{Throttled: true, retryable: true, Delay: 2 * time.Second, Source: "Retry-After"}},
		{"503 Retry-After: 0 is now", response(503, "", "Retry-After", "0"), nil, Verdict{Source: "Retry-After"}},
		{"a past Retry-After date is no delay", response(429, "", "Retry-After", now.Add(-time.Minute).UTC().Format(http.TimeFormat)), nil,
			Verdict{Throttled: true, retryable: true}},
		{"negative MaxDelay ignores Retry-After: 0", response(429, "", "Retry-After", "0"), &Signals{MaxDelay: -1, DefaultDelay: time.Second},
			Verdict{Throttled: true, retryable: true, Delay: time.Second, Source: "default_delay"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Classify(tc.resp, tc.sig, now); got != tc.want {
				t.Errorf("Classify = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// closeRecorder records whether the original body was closed.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestClassifyRestoresBody(t *testing.T) {
	t.Parallel()
	big := `[{"errorCode":"REQUEST_LIMIT_EXCEEDED"}]` + strings.Repeat("x", 3*MaxBodyPeek)
	for _, body := range []string{"", "REQUEST_LIMIT_EXCEEDED", big, big[:MaxBodyPeek], big[:MaxBodyPeek+1]} {
		orig := &closeRecorder{Reader: strings.NewReader(body)}
		resp := &http.Response{StatusCode: 403, Body: orig}
		v := Classify(resp, salesforce, now)
		if want := strings.Contains(body, "REQUEST_LIMIT_EXCEEDED"); v.Throttled != want {
			t.Errorf("len %d: Throttled = %v, want %v", len(body), v.Throttled, want)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil || string(got) != body {
			t.Errorf("len %d: read back %d bytes, %v; want the whole body", len(body), len(got), err)
		}
		if err := resp.Body.Close(); err != nil || !orig.closed {
			t.Errorf("len %d: Close = %v, original closed = %v", len(body), err, orig.closed)
		}
	}
}

func TestClassifyBodyBeyondPeek(t *testing.T) {
	t.Parallel()
	body := strings.Repeat(" ", MaxBodyPeek) + "REQUEST_LIMIT_EXCEEDED"
	resp := response(403, body)
	if v := Classify(resp, salesforce, now); v.Throttled {
		t.Errorf("marker after %d bytes matched: %+v", MaxBodyPeek, v)
	}
	if got, _ := io.ReadAll(resp.Body); string(got) != body {
		t.Errorf("body not restored: %d bytes, want %d", len(got), len(body))
	}
}

// failAfter yields data, then fails with err.
type failAfter struct {
	data []byte
	err  error
}

func (f *failAfter) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestClassifyBodyReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset")
	resp := &http.Response{StatusCode: 403, Body: io.NopCloser(&failAfter{data: []byte("REQUEST_LIMIT"), err: boom})}
	if v := Classify(resp, salesforce, now); v.Throttled {
		t.Errorf("partial body matched: %+v", v)
	}
	got, err := io.ReadAll(resp.Body)
	if string(got) != "REQUEST_LIMIT" || !errors.Is(err, boom) {
		t.Errorf("read back %q, %v; want the bytes read, then the same error", got, err)
	}
}

func TestClassifyReadsBodyOnlyWhenStatusMatches(t *testing.T) {
	t.Parallel()
	resp := response(200, "REQUEST_LIMIT_EXCEEDED")
	body := resp.Body
	Classify(resp, salesforce, now)
	if resp.Body != body {
		t.Error("body of a 200 replaced by a 403 rule")
	}
	resp = response(403, "x")
	body = resp.Body
	Classify(resp, github, now) // GitHub's body rule is for 403 too
	if resp.Body == body {
		t.Error("body of a 403 not peeked for a 403 body rule")
	}
	Classify(resp, nil, now)
	if resp.Body == body {
		t.Error("body lost its wrapper")
	}
}

func TestClassifyTwiceAfterDrain(t *testing.T) {
	t.Parallel()
	// retryablehttp drains and closes the body between CheckRetry and
	// Backoff; the second Classify must see the same verdict.
	body := `[{"errorCode":"REQUEST_LIMIT_EXCEEDED"}]`
	resp := response(403, body, "Retry-After", "3")
	first := Classify(resp, salesforce, now)
	b := resp.Body
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	second := Classify(resp, salesforce, now)
	if first != second || !second.Throttled {
		t.Errorf("second Classify = %+v, first %+v", second, first)
	}
	if resp.Body != b {
		t.Error("second Classify wrapped the body again")
	}
	// And a fresh read of an unread, classified body still gives it all.
	resp = response(403, body)
	Classify(resp, salesforce, now)
	Classify(resp, salesforce, now)
	if got, _ := io.ReadAll(resp.Body); !bytes.Equal(got, []byte(body)) {
		t.Errorf("after two Classify calls read %q", got)
	}
}

func TestSignalsValidate(t *testing.T) {
	t.Parallel()
	var nilSig *Signals
	for _, s := range []*Signals{nilSig, {}, github, salesforce, openai, anthropic, stripe, {MaxDelay: -1}} {
		if err := s.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", s, err)
		}
	}
	bad := &Signals{
		Rules:        []Rule{{Status: 0}, {Status: 429, HeaderValue: "0"}, {Status: 403, Header: "bad header"}},
		Ignore:       []Rule{{Status: 600}, {Status: 429, BodyContains: strings.Repeat("x", MaxBodyPeek+1)}},
		DelayHeaders: []string{"ok", "", "x:y"},
	}
	err := bad.Validate()
	if !errors.Is(err, ErrInvalidSignals) {
		t.Fatalf("Validate = %v, want ErrInvalidSignals", err)
	}
	for _, want := range []string{"Rules[0].Status", "Rules[1].HeaderValue", "Rules[2].Header",
		"Ignore[0].Status", "Ignore[1].BodyContains", "DelayHeaders[1]", "DelayHeaders[2]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error lacks %s:\n%v", want, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 7 {
		t.Errorf("Validate reported %d problems, want 7:\n%v", n, err)
	}
}

// GitHub: a secondary rate limit 403 without Retry-After or reset headers
// means "wait at least one minute"; with a header, the header wins.
func TestClassifyDefaultDelay(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	sig := &Signals{
		Rules:        []Rule{{Status: 403, BodyContains: "secondary rate limit"}},
		DefaultDelay: time.Minute,
		MaxDelay:     30 * time.Second,
	}
	resp := &http.Response{StatusCode: 403, Header: http.Header{},
		Body: io.NopCloser(strings.NewReader(`{"message":"You have exceeded a secondary rate limit"}`))}
	v := Classify(resp, sig, now)
	if !v.Throttled || v.Delay != 30*time.Second || v.Source != "default_delay" {
		t.Errorf("no header: got %+v, want throttled with the default delay capped at MaxDelay (30s)", v)
	}
	resp = &http.Response{StatusCode: 403, Header: http.Header{"Retry-After": {"7"}},
		Body: io.NopCloser(strings.NewReader("secondary rate limit"))}
	if v := Classify(resp, sig, now); v.Delay != 7*time.Second {
		t.Errorf("with Retry-After: 7: got %+v, want 7s", v)
	}
	resp = &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}
	if v := Classify(resp, sig, now); v.Delay != 0 || v.Throttled {
		t.Errorf("a 200: got %+v, want no delay", v)
	}
	if err := (&Signals{DefaultDelay: -time.Second}).Validate(); !errors.Is(err, ErrInvalidSignals) {
		t.Errorf("negative DefaultDelay: Validate() = %v, want ErrInvalidSignals", err)
	}
}
