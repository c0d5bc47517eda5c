package sdktest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// anthropic-sdk-go (v2) retries MaxRetries times (default 2) when there
// is no response (any error of the HTTP client: a refusal by the
// throttle is one), and on 408, 409, 429 and 5xx, x-should-retry
// overriding the status. It waits retry-after-ms, else Retry-After, else
// 0.5 s doubling up to 8 s. Methods that are not safe to repeat (creates
// of the beta agent APIs) retry only a 429 or a connection net/http
// tried and failed to open: those never retry a refusal. Messages.New
// is not one of them.

// anthropicHeaders sets Anthropic's rate-limit headers, sent on every
// response: the requests limit's state, its reset as an RFC 3339 time in
// whole seconds, and the input tokens' state.
func anthropicHeaders(w http.ResponseWriter, remaining int, reset time.Time) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Request-Id", "req_sdktest")
	h.Set("Anthropic-Ratelimit-Requests-Limit", "50")
	h.Set("Anthropic-Ratelimit-Requests-Remaining", fmt.Sprint(remaining))
	h.Set("Anthropic-Ratelimit-Requests-Reset", reset.UTC().Format(time.RFC3339))
	h.Set("Anthropic-Ratelimit-Input-Tokens-Limit", "30000")
	h.Set("Anthropic-Ratelimit-Input-Tokens-Remaining", "29990")
	h.Set("Anthropic-Ratelimit-Input-Tokens-Reset", reset.UTC().Format(time.RFC3339))
}

// nextSecond is the next whole second: Anthropic's resets are RFC 3339
// times to the second.
func nextSecond() time.Time { return time.Now().Truncate(time.Second).Add(time.Second) }

func anthropicMessage(w http.ResponseWriter, _ *http.Request) {
	anthropicHeaders(w, 49, nextSecond())
	fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-5-5",`+
		`"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
}

// anthropicRateLimited is Anthropic's answer when the requests-per-minute
// limit refuses: 429 rate_limit_error, retry-after in seconds, the
// limit's reset in anthropic-ratelimit-requests-reset, and
// x-should-retry.
func anthropicRateLimited(w http.ResponseWriter, _ *http.Request) {
	anthropicHeaders(w, 0, nextSecond())
	h := w.Header()
	h.Set("Retry-After", "1")
	h.Set("X-Should-Retry", "true")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50 requests per minute."},"request_id":"req_sdktest"}`)
}

// anthropicClient wires hc into anthropic-sdk-go as docs/sdks.md does,
// with retries retries of its own.
func anthropicClient(hc *http.Client, retries int) anthropic.Client {
	return anthropic.NewClient(
		option.WithAPIKey("sk-ant-sdktest"),
		option.WithBaseURL("https://api.anthropic.com/"),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(retries),
	)
}

func message(ctx context.Context, ac anthropic.Client) (*anthropic.Message, error) {
	return ac.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeHaiku5_5,
		MaxTokens: 16,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
}

func TestAnthropicRefusalReachesCallerOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, anthropicMessage), tinyLimits)
	ac := anthropicClient(r.client, 0)
	if _, err := message(failFast(), ac); err != nil {
		t.Fatalf("first request: %v", err)
	}
	_, err := message(failFast(), ac)
	refusal(t, err)
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		t.Errorf("a refusal came back as an *anthropic.Error: %v", ae)
	}
	r.want(t, counts{Admitted: 1, Refused: 1, Sent: 1, Seen: 1})
}

// With retries of its own anthropic-sdk-go asks the throttle again after
// a refusal (after 0.5 s less jitter): the reason docs/sdks.md sets
// WithMaxRetries(0).
func TestAnthropicOwnRetriesResendRefusals(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, anthropicMessage), tinyLimits)
	ac := anthropicClient(r.client, 1)
	if _, err := message(failFast(), ac); err != nil {
		t.Fatalf("first request: %v", err)
	}
	refusal(t, func() error { _, err := message(failFast(), ac); return err }())
	r.want(t, counts{Admitted: 1, Refused: 2, Sent: 1, Seen: 1})
}

// The throttle's layer retries Anthropic's 429 at the requests limit's
// reset.
func TestAnthropic429RetriedByThrottle(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, anthropicRateLimited, anthropicMessage), nil, fastRetries)
	m, err := message(t.Context(), anthropicClient(r.client, 0))
	if err != nil || m.ID != "msg_1" {
		t.Fatalf("got %v, %v; want msg_1", m, err)
	}
	r.want(t, counts{Admitted: 2, Throttled: 1, Sent: 2, Seen: 2})
}

// When the throttle's retries run out the caller gets the SDK's
// *anthropic.Error 429 rate_limit_error, after 1 + retries requests.
func TestAnthropic429ReachesCallerAsAnthropicError(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, anthropicRateLimited), nil, fastRetries)
	_, err := message(t.Context(), anthropicClient(r.client, 0))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusTooManyRequests || ae.Type() != "rate_limit_error" {
		t.Fatalf("got %v, want an *anthropic.Error 429 rate_limit_error", err)
	}
	r.want(t, counts{Admitted: 2, Throttled: 2, Sent: 2, Seen: 2})
}

// anthropicShouldRetry is a 529 overloaded_error that Anthropic says to
// retry.
func anthropicShouldRetry(w http.ResponseWriter, _ *http.Request) {
	anthropicHeaders(w, 49, nextSecond())
	w.Header().Set("X-Should-Retry", "true")
	w.WriteHeader(529)
	fmt.Fprint(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_sdktest"}`)
}

// With anthropic-sdk-go's retries off, the throttle still obeys
// x-should-retry: true, on a POST without an Idempotency-Key.
func TestAnthropicShouldRetryObeyedByThrottle(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, anthropicShouldRetry, anthropicMessage), nil, fastRetries)
	m, err := message(t.Context(), anthropicClient(r.client, 0))
	if err != nil || m.ID != "msg_1" {
		t.Fatalf("got %v, %v; want msg_1 after the throttle's retry", m, err)
	}
	r.want(t, counts{Admitted: 2, Sent: 2, Seen: 2})
}
