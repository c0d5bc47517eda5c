package backoff_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fleetquota/throttle/backoff"
	"github.com/hashicorp/go-retryablehttp"
)

func ExampleClassify() {
	now := time.Date(2026, time.November, 21, 6, 0, 0, 0, time.UTC)
	// Shopify's 429, with its decimal Retry-After.
	resp := &http.Response{
		StatusCode: http.StatusTooManyRequests,
		Header:     http.Header{"Retry-After": {"2.0"}},
		Body:       io.NopCloser(strings.NewReader(`{"errors":"Exceeded 2 calls per second for api client."}`)),
	}
	v := backoff.Classify(resp, nil, now)
	fmt.Println(v.Throttled, v.Delay, v.Source)
	// Output: true 2s Retry-After
}

func ExampleClassify_ignore() {
	now := time.Date(2026, time.November, 21, 6, 0, 0, 0, time.UTC)
	openai := &backoff.Signals{
		Body:         backoff.BodyOpenAI,
		DelayHeaders: []string{"x-ratelimit-reset-requests"},
	}
	billing := &http.Response{
		StatusCode: 429,
		Header:     http.Header{},
		Body:       io.NopCloser(strings.NewReader(`{"error":{"code":"insufficient_quota"}}`)),
	}
	v := backoff.Classify(billing, openai, now)
	fmt.Printf("billing: throttled %v, ignored %v, quota exhausted %v\n", v.Throttled, v.Ignored, v.QuotaExhausted)

	limited := &http.Response{
		StatusCode: 429,
		Header:     http.Header{"X-Ratelimit-Reset-Requests": {"6m0s"}},
		Body:       io.NopCloser(strings.NewReader(`{"error":{"code":"rate_limit_exceeded"}}`)),
	}
	v = backoff.Classify(limited, openai, now)
	fmt.Printf("rate: throttled %v, delay %v from %s\n", v.Throttled, v.Delay, v.Source)

	// The body is still there for the caller.
	body, _ := io.ReadAll(billing.Body)
	fmt.Println(string(body))
	// Output:
	// billing: throttled false, ignored true, quota exhausted true
	// rate: throttled true, delay 6m0s from x-ratelimit-reset-requests
	// {"error":{"code":"insufficient_quota"}}
}

func ExamplePolicy() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "created")
	}))
	defer srv.Close()

	p := &backoff.Policy{
		// One provider here; in the throttle Transport, the registry
		// finds the request's provider. MaxDelay keeps the example fast.
		SignalsFor: func(*http.Request) *backoff.Signals {
			return &backoff.Signals{MaxDelay: 10 * time.Millisecond}
		},
	}
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.CheckRetry = p.CheckRetry
	c.Backoff = p.Backoff
	c.ErrorHandler = backoff.PassthroughErrorHandler

	// A POST is retried after a 429: the server did not process it.
	resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("order"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", calls.Load(), "calls")
	// Output: 200 created after 2 calls
}
