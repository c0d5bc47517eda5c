package backoff

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Tests of the signals that bodies and the should-retry headers carry:
// Classify with Signals.Body and shouldRetry, and Policy obeying them.

var (
	discord  = &Signals{Body: BodyDiscord, DelayHeaders: []string{"X-RateLimit-Reset-After"}, MaxDelay: 2 * time.Minute}
	openaiV2 = &Signals{Body: BodyOpenAI, DelayHeaders: []string{"x-ratelimit-reset-requests"}}
)

func TestClassifyDiscordBody(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		resp    *http.Response
		sig     *Signals
		delay   time.Duration
		source  string
		global  bool
		wantErr bool
	}{
		{"body alone gives the delay", response(429, `{"message":"You are being rate limited.","retry_after":2.5,"global":false}`), discord,
			2500 * time.Millisecond, sourceDiscordBody, false, false},
		{"global in the body", response(429, `{"retry_after":0.75,"global":true}`), discord,
			750 * time.Millisecond, sourceDiscordBody, true, false},
		{"body before a route's Reset-After", response(429, `{"retry_after":64.57,"global":true}`,
			"Retry-After", "65", "X-RateLimit-Reset-After", "1.2"), discord,
			64570 * time.Millisecond, sourceDiscordBody, true, false},
		{"X-RateLimit-Global header", response(429, `{"retry_after":1}`, "X-RateLimit-Global", "true"), discord,
			time.Second, sourceDiscordBody, true, false},
		{"X-RateLimit-Scope: global", response(429, ``, "X-RateLimit-Scope", "global", "Retry-After", "3"), discord,
			3 * time.Second, "Retry-After", true, false},
		{"X-RateLimit-Scope: shared is not global", response(429, `{"retry_after":1,"global":false}`, "X-RateLimit-Scope", "shared"), discord,
			time.Second, sourceDiscordBody, false, false},
		{"capped at max_delay", response(429, `{"retry_after":86400,"global":true}`), discord,
			2 * time.Minute, sourceDiscordBody, true, false},
		{"zero retry_after: the headers decide", response(429, `{"retry_after":0}`, "X-RateLimit-Reset-After", "0.5"), discord,
			500 * time.Millisecond, "X-RateLimit-Reset-After", false, false},
		{"negative retry_after: malformed, headers decide", response(429, `{"retry_after":-5,"global":true}`, "Retry-After", "2"), discord,
			2 * time.Second, "Retry-After", true, true},
		{"retry_after of more than a year: malformed", response(429, `{"retry_after":1e300}`), discord,
			0, "", false, true},
		{"retry_after not a number: malformed", response(429, `{"retry_after":"soon"}`, "Retry-After", "1"), discord,
			time.Second, "Retry-After", false, true},
		{"body not JSON: malformed", response(429, `<html>429</html>`), discord,
			0, "", false, true},
		{"body cut at the peek: malformed", response(429, `{"retry_after":1,"pad":"`+strings.Repeat("x", MaxBodyPeek)+`"}`), discord,
			0, "", false, true},
		{"vendor delays not trusted", response(429, `{"retry_after":5,"global":true}`), &Signals{Body: BodyDiscord, MaxDelay: -1},
			0, "", true, false},
		{"without Body the body is not read", response(429, `{"retry_after":5,"global":true}`), nil,
			0, "", false, false},
		{"not throttled: body unread", response(200, `{"retry_after":5,"global":true}`), discord,
			0, "", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := Classify(tc.resp, tc.sig, now)
			if v.Delay != tc.delay || v.Source != tc.source || v.Global != tc.global {
				t.Errorf("got delay %v from %q, global %v; want %v from %q, global %v", v.Delay, v.Source, v.Global, tc.delay, tc.source, tc.global)
			}
			if tc.wantErr != (v.Err != nil) || (v.Err != nil && !errors.Is(v.Err, ErrMalformed)) {
				t.Errorf("Err = %v, want malformed: %v", v.Err, tc.wantErr)
			}
			if v.Delay < 0 || v.Delay > 2*time.Minute {
				t.Errorf("delay %v beyond max_delay", v.Delay)
			}
		})
	}
}

func TestClassifyOpenAIBillingStop(t *testing.T) {
	t.Parallel()
	billing := `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	cases := []struct {
		name     string
		resp     *http.Response
		sig      *Signals
		want     Verdict
		wantBody string
	}{
		{"billing stop", response(429, billing, "Retry-After", "20", "X-Should-Retry", "true"), openaiV2,
			Verdict{Ignored: true, QuotaExhausted: true}, billing},
		{"rate limit", response(429, `{"error":{"message":"Rate limit reached: insufficient_quota is not this","code":"rate_limit_exceeded"}}`,
			"X-Ratelimit-Reset-Requests", "1s"), openaiV2,
			Verdict{Throttled: true, retryable: true, Delay: time.Second, Source: "x-ratelimit-reset-requests"}, ""},
		{"not JSON", response(429, `insufficient_quota`), openaiV2, Verdict{Throttled: true, retryable: true}, ""},
		{"a 400 is not a 429", response(400, billing), openaiV2, Verdict{}, ""},
		{"without Body, the ignore rule only", response(429, billing), openai, Verdict{Ignored: true}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.resp, tc.sig, now); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if tc.wantBody != "" {
				if b := readAll(t, tc.resp); b != tc.wantBody {
					t.Errorf("body after Classify: %q", b)
				}
			}
		})
	}
}

func TestClassifyShouldRetry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		resp *http.Response
		sig  *Signals
		want Verdict
	}{
		{"409 lock with true", response(409, "", "Stripe-Should-Retry", "true"), nil, Verdict{retryable: true, retrySaid: true}},
		{"429 with false: throttled, not retryable", response(429, "", "Stripe-Should-Retry", "false", "Retry-After", "1"), nil,
			Verdict{Throttled: true, retrySaid: true, Delay: time.Second, Source: "Retry-After"}},
		{"x-should-retry false on a 500", response(500, "", "x-should-retry", "false"), nil, Verdict{retrySaid: true}},
		{"true on a success is no retry", response(200, "", "X-Should-Retry", "TRUE"), nil, Verdict{retrySaid: true}},
		{"disagreeing: false wins", response(503, "", "Stripe-Should-Retry", "true", "X-Should-Retry", "false"), nil, Verdict{retrySaid: true}},
		{"another value says nothing", response(503, "", "X-Should-Retry", "maybe"), nil, Verdict{}},
		{"an ignored response stays ignored", response(429, "insufficient_quota", "X-Should-Retry", "true"), openai, Verdict{Ignored: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.resp, tc.sig, now); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCheckRetryShouldRetry(t *testing.T) {
	t.Parallel()
	billing := `{"error":{"code":"insufficient_quota"}}`
	cases := []struct {
		name string
		resp *http.Response
		sig  *Signals
		want bool
	}{
		// What the policy alone would not retry, the vendor's true retries.
		{"POST 409 lock_timeout, Stripe-Should-Retry true", reqResponse("POST", "", 409, "", "Stripe-Should-Retry", "true"), nil, true},
		{"POST 503, X-Should-Retry true", reqResponse("POST", "", 503, "", "X-Should-Retry", "true"), nil, true},
		{"GET 400, X-Should-Retry true", reqResponse("GET", "", 400, "", "X-Should-Retry", "true"), nil, true},
		{"POST 409 without the header", reqResponse("POST", "", 409, ""), nil, false},
		// What the policy alone would retry, the vendor's false stops.
		{"GET 503, X-Should-Retry false", reqResponse("GET", "", 503, "", "X-Should-Retry", "false"), nil, false},
		{"POST 429, Stripe-Should-Retry false", reqResponse("POST", "", 429, "", "Stripe-Should-Retry", "false"), nil, false},
		{"GET 503 without the header", reqResponse("GET", "", 503, ""), nil, true},
		// Neither a success nor a billing stop is sent again.
		{"GET 200, X-Should-Retry true", reqResponse("GET", "", 200, "", "X-Should-Retry", "true"), nil, false},
		{"billing stop with X-Should-Retry true", reqResponse("POST", "", 429, billing, "X-Should-Retry", "true"), openaiV2, false},
		{"billing stop", reqResponse("POST", "", 429, billing, "Retry-After", "1"), openaiV2, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fixedPolicy(tc.sig).CheckRetry(context.Background(), tc.resp, nil)
			if err != nil || got != tc.want {
				t.Errorf("CheckRetry = (%v, %v), want %v", got, err, tc.want)
			}
		})
	}
}

func TestValidateBody(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"", BodyDiscord, BodyOpenAI} {
		if err := (&Signals{Body: b}).Validate(); err != nil {
			t.Errorf("Body %q: %v", b, err)
		}
	}
	err := (&Signals{Body: "slack"}).Validate()
	if !errors.Is(err, ErrInvalidSignals) || !strings.Contains(err.Error(), `Body: "slack" is not a body format`) {
		t.Errorf("Body slack: %v", err)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
