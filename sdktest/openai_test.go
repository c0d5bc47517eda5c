package sdktest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// openai-go (v3) retries MaxRetries times (default 2) when there is no
// response (any error of the HTTP client: a refusal by the throttle is
// one), on x-should-retry: true, and on 408, 409, 429 and 5xx unless
// x-should-retry: false. It waits retry-after-ms, else Retry-After, else
// 0.5 s doubling (capped by WithMaxRetryDelay). Its only exemption is an
// error type of its own internal package, which nothing outside can
// implement.

func openaiCompletion(w http.ResponseWriter, _ *http.Request) {
	openaiHeaders(w, 499)
	fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-5.4-mini",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
}

// openaiHeaders sets OpenAI's rate-limit headers, sent on every response.
func openaiHeaders(w http.ResponseWriter, remaining int) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Request-Id", "req_sdktest")
	h.Set("X-Ratelimit-Limit-Requests", "500")
	h.Set("X-Ratelimit-Remaining-Requests", fmt.Sprint(remaining))
	h.Set("X-Ratelimit-Reset-Requests", "120ms")
	h.Set("X-Ratelimit-Limit-Tokens", "200000")
	h.Set("X-Ratelimit-Remaining-Tokens", "199990")
	h.Set("X-Ratelimit-Reset-Tokens", "3ms")
}

// openaiRateLimited is OpenAI's answer when the requests-per-minute limit
// refuses: 429, the limit's state in x-ratelimit-*, the wait in
// retry-after-ms (finer than retry-after), x-should-retry, and error code
// rate_limit_exceeded.
func openaiRateLimited(w http.ResponseWriter, _ *http.Request) {
	openaiHeaders(w, 0)
	h := w.Header()
	h.Set("Retry-After-Ms", "120")
	h.Set("Retry-After", "1")
	h.Set("X-Should-Retry", "true")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprint(w, `{"error":{"message":"Rate limit reached for gpt-5.4-mini in organization org-sdktest on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.",`+
		`"type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
}

// openaiClient wires hc into openai-go as docs/sdks.md does, with
// retries retries of its own.
func openaiClient(hc *http.Client, retries int, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithAPIKey("sk-sdktest"),
		option.WithBaseURL("https://api.openai.com/v1/"),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(retries),
	}, opts...)...)
}

func complete(ctx context.Context, oc openai.Client) (*openai.ChatCompletion, error) {
	return oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT5_4Mini,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
}

func TestOpenAIRefusalReachesCallerOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, openaiCompletion), tinyLimits)
	oc := openaiClient(r.client, 0)
	if _, err := complete(failFast(), oc); err != nil {
		t.Fatalf("first request: %v", err)
	}
	_, err := complete(failFast(), oc)
	refusal(t, err)
	var ae *openai.Error
	if errors.As(err, &ae) {
		t.Errorf("a refusal came back as an *openai.Error: %v", ae)
	}
	r.want(t, counts{Admitted: 1, Refused: 1, Sent: 1, Seen: 1})
}

// With retries of its own openai-go asks the throttle again after a
// refusal: the reason docs/sdks.md sets WithMaxRetries(0).
func TestOpenAIOwnRetriesResendRefusals(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, openaiCompletion), tinyLimits)
	oc := openaiClient(r.client, 1, option.WithMaxRetryDelay(time.Millisecond))
	if _, err := complete(failFast(), oc); err != nil {
		t.Fatalf("first request: %v", err)
	}
	refusal(t, func() error { _, err := complete(failFast(), oc); return err }())
	r.want(t, counts{Admitted: 1, Refused: 2, Sent: 1, Seen: 1})
}

// The throttle's layer retries OpenAI's 429 after retry-after-ms.
func TestOpenAI429RetriedByThrottle(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, openaiRateLimited, openaiCompletion), nil, fastRetries)
	c, err := complete(t.Context(), openaiClient(r.client, 0))
	if err != nil || c.ID != "chatcmpl-1" {
		t.Fatalf("got %v, %v; want chatcmpl-1", c, err)
	}
	r.want(t, counts{Admitted: 2, Throttled: 1, Sent: 2, Seen: 2})
}

// When the throttle's retries run out the caller gets openai-go's
// *openai.Error 429 rate_limit_exceeded, after 1 + retries requests.
func TestOpenAI429ReachesCallerAsOpenAIError(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, openaiRateLimited), nil, fastRetries)
	_, err := complete(t.Context(), openaiClient(r.client, 0))
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusTooManyRequests || ae.Code != "rate_limit_exceeded" {
		t.Fatalf("got %v, want an *openai.Error 429 rate_limit_exceeded", err)
	}
	r.want(t, counts{Admitted: 2, Throttled: 2, Sent: 2, Seen: 2})
}

// With both layers retrying, their retries multiply: (1 + 1) x (1 + 1)
// requests for one call. docs/sdks.md turns openai-go's off.
func TestOpenAIRetriesNest(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, openaiRateLimited), nil, fastRetries)
	_, err := complete(t.Context(), openaiClient(r.client, 1))
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("got %v, want an *openai.Error 429", err)
	}
	r.want(t, counts{Admitted: 4, Throttled: 4, Sent: 4, Seen: 4})
}

// openaiInsufficientQuota is OpenAI's billing stop: a 429 whose error code
// is insufficient_quota. Waiting does not help.
func openaiInsufficientQuota(w http.ResponseWriter, _ *http.Request) {
	openaiHeaders(w, 499)
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprint(w, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.",`+
		`"type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
}

// OpenAI's insufficient_quota reaches the caller as the throttle's
// *throttle.QuotaError (errors.Is ErrQuotaExhausted), not as an
// *openai.Error: NewClient returns it in place of the response, and
// nobody retries or pauses on it.
func TestOpenAIInsufficientQuotaIsAQuotaError(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, openaiInsufficientQuota), nil, fastRetries)
	_, err := complete(t.Context(), openaiClient(r.client, 0))
	var qe *throttle.QuotaError
	if !errors.Is(err, throttle.ErrQuotaExhausted) || !errors.As(err, &qe) || qe.Provider != "openai" {
		t.Fatalf("got %v (%T), want a *throttle.QuotaError of openai under it", err, err)
	}
	var ae *openai.Error
	if errors.As(err, &ae) {
		t.Errorf("insufficient_quota came back as an *openai.Error: %v", ae)
	}
	r.want(t, counts{Admitted: 1, Sent: 1, Seen: 1})
}

// openaiShouldRetry is a 500 that OpenAI says to retry.
func openaiShouldRetry(w http.ResponseWriter, _ *http.Request) {
	openaiHeaders(w, 499)
	w.Header().Set("X-Should-Retry", "true")
	w.WriteHeader(http.StatusInternalServerError)
	fmt.Fprint(w, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`)
}

// With openai-go's retries off, the throttle still obeys x-should-retry:
// true, on a POST without an Idempotency-Key.
func TestOpenAIShouldRetryObeyedByThrottle(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, openaiShouldRetry, openaiCompletion), nil, fastRetries)
	c, err := complete(t.Context(), openaiClient(r.client, 0))
	if err != nil || c.ID != "chatcmpl-1" {
		t.Fatalf("got %v, %v; want chatcmpl-1 after the throttle's retry", c, err)
	}
	r.want(t, counts{Admitted: 2, Sent: 2, Seen: 2})
}
