package throttle_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/config"
	"github.com/fleetquota/throttle/throttletest"
)

// Signals that vendors put in 429 bodies and in the should-retry headers,
// end to end against fake vendors.

// e2eDiscord is a Discord-like provider whose keys are per bot (the
// X-Bot header), so that the provider's own pause is not a bot's.
const e2eDiscord = `
providers:
  discord:
    hosts: ["HOST"]
    keys: per_tenant
    signals:
      throttled: [{status: 429}]
      body: discord
      delay_headers: [X-RateLimit-Reset-After]
      max_delay: 2m
    limits: [{name: global, limit: 45/s burst 5, scope: "header:X-Bot"}]
`

// e2eSend sends one GET through the Transport alone (no retries), as bot
// (no X-Bot header when empty), with a max wait of zero, and returns the
// status or the error.
func e2eSend(t *testing.T, tr *throttle.Transport, url, bot string) (int, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(throttle.WithMaxWait(context.Background(), 0), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bot != "" {
		req.Header.Set("X-Bot", bot)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// pausedFor returns how long the pause that refused err has left; 0 when
// err is not a refusal by a pause.
func pausedFor(err error) time.Duration {
	var le *throttle.LimitError
	if errors.As(err, &le) && le.Limit == "pause" {
		return le.RetryAfter
	}
	return 0
}

// TestE2EDiscordGlobal429PausesTheProvider: Discord's body retry_after is
// the pause (the whole-second Retry-After is only its ceiling), and
// global: true pauses the provider's pause as well as the bot's, while a
// route's 429 pauses the bot alone.
func TestE2EDiscordGlobal429PausesTheProvider(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		body   string
		global bool
	}{
		{"global", `{"message":"You are being rate limited.","retry_after":64.57,"global":true}`, true},
		{"route", `{"message":"You are being rate limited.","retry_after":64.57,"global":false}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := e2eVendor(t, throttletest.Options{ThrottleBody: tc.body})
			tr, _ := e2eTransport(t, e2eDiscord, v.Host())
			url := v.URL + "/api/v10/channels/1/messages"
			v.ThrottleNext(1)
			if status, err := e2eSend(t, tr, url, "bot-a"); status != http.StatusTooManyRequests {
				t.Fatalf("got (%d, %v), want the 429", status, err)
			}
			// Fake vendor's Retry-After is 1 (DefaultForcedRetryAfter);
			// the body's 64.57 s decides.
			_, err := e2eSend(t, tr, url, "bot-a")
			if left := pausedFor(err); left <= 60*time.Second || left > 64570*time.Millisecond {
				t.Errorf("bot-a after its 429: %v, want paused for about 64.57s", err)
			}
			if status, err := e2eSend(t, tr, url, "bot-b"); status != http.StatusOK {
				t.Errorf("bot-b (its own tag and pause): (%d, %v), want 200", status, err)
			}
			_, err = e2eSend(t, tr, url, "")
			if left := pausedFor(err); tc.global != (left > 60*time.Second) {
				t.Errorf("a request in the provider's tag: %v; want paused: %v", err, tc.global)
			}
		})
	}
}

// TestE2EDiscordMalformedBody: a body that is not Discord's JSON is an
// event's error, the headers give the pause, never more than max_delay.
func TestE2EDiscordMalformedBody(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`<html>rate limited</html>`, `{"retry_after":-3}`, `{"retry_after":"64"}`, `{"retry_after":1e300,"global":true}`} {
		t.Run(body, func(t *testing.T) {
			t.Parallel()
			v := e2eVendor(t, throttletest.Options{ThrottleBody: body})
			var mu sync.Mutex
			var throttled []throttle.Event
			tr, _ := e2eTransport(t, e2eDiscord, v.Host(), throttle.WithObserver(observerFunc(func(e throttle.Event) {
				if e.Kind == throttle.UpstreamThrottled {
					mu.Lock()
					throttled = append(throttled, e)
					mu.Unlock()
				}
			})))
			url := v.URL + "/api/v10/channels/1/messages"
			v.ThrottleNext(1)
			if status, err := e2eSend(t, tr, url, "bot-a"); status != http.StatusTooManyRequests {
				t.Fatalf("got (%d, %v), want the 429", status, err)
			}
			_, err := e2eSend(t, tr, url, "bot-a")
			if left := pausedFor(err); left <= 0 || left > time.Second {
				t.Errorf("after the 429: %v, want paused for the Retry-After of 1s", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(throttled) != 1 || !errors.Is(throttled[0].Err, backoff.ErrMalformed) {
				t.Errorf("upstream_throttled events %+v, want one whose Err is malformed", throttled)
			}
		})
	}
}

// TestE2EOpenAIBillingStop: with body: openai, insufficient_quota is not
// retried and pauses nothing (the same model's next request, and other
// traffic, go at once); NewClient returns an error matching
// ErrQuotaExhausted with the vendor's body, the Transport the 429 itself.
func TestE2EOpenAIBillingStop(t *testing.T) {
	t.Parallel()
	const body = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	v := e2eVendor(t, throttletest.Options{ThrottleBody: body})
	obs := &e2eEvents{}
	tr, client := e2eTransport(t, `
providers:
  openai:
    hosts: ["HOST"]
    keys: per_tenant
    signals:
      throttled: [{status: 429}]
      body: openai
      delay_headers: [Retry-After-Ms, X-Ratelimit-Reset-Requests, X-Ratelimit-Reset-Tokens]
    limits: [{name: rpm, limit: 450/min burst 50, scope: "label:model"}]
`, v.Host(), throttle.WithObserver(obs), throttle.WithRetries(3, 10*time.Millisecond, 50*time.Millisecond))
	url := v.URL + "/v1/chat/completions"
	ctx := throttle.WithMaxWait(throttle.WithLabel(context.Background(), "model", "gpt-x"), 0)

	v.ThrottleNext(1)
	resp, err := e2eDo(ctx, client, "POST", url, `{"model":"gpt-x"}`)
	if resp != nil {
		resp.Body.Close()
	}
	var qe *throttle.QuotaError
	if !errors.Is(err, throttle.ErrQuotaExhausted) || !errors.As(err, &qe) || qe.Provider != "openai" ||
		qe.StatusCode != http.StatusTooManyRequests || string(qe.Body) != body {
		t.Fatalf("NewClient: (%v, %v), want a *QuotaError matching ErrQuotaExhausted with the vendor's body", resp, err)
	}
	if strings.Contains(err.Error(), "exceeded your current quota") {
		t.Errorf("the error %q repeats the vendor's body", err)
	}
	if served, throttled := v.Counts(); served != 0 || throttled != 1 {
		t.Errorf("vendor served %d, throttled %d; want one request, not retried", served, throttled)
	}
	if status, _, _ := e2eGet(t, ctx, client, url); status != http.StatusOK {
		t.Errorf("the same model's next request: status %d, want 200 at once", status)
	}

	// The Transport alone returns the response, as a RoundTripper must.
	v.ThrottleNext(1)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err = tr.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("Transport: (%v, %v), want the 429 response", resp, err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != body {
		t.Errorf("Transport: body %q, want the vendor's", b)
	}
	resp.Body.Close()
	for _, k := range obs.kinds() {
		if k == throttle.Paused || k == throttle.UpstreamThrottled {
			t.Errorf("a billing stop produced a %v event", k)
		}
	}
}

// TestE2EShouldRetryBothWays: Stripe-Should-Retry true retries a POST's
// 409 that NewClient would not; X-Should-Retry false stops the retry of a
// GET's 503 that it would.
func TestE2EShouldRetryBothWays(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch {
		case r.URL.Path == "/v1/charges" && n == 1:
			w.Header().Set("Stripe-Should-Retry", "true")
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"error":{"code":"lock_timeout"}}`)
		case r.URL.Path == "/v1/charges":
			io.WriteString(w, `{"id":"ch_1"}`)
		default:
			w.Header().Set("X-Should-Retry", "false")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	_, client := e2eTransport(t, e2eShortDelays, strings.TrimPrefix(srv.URL, "http://"),
		throttle.WithRetries(3, time.Millisecond, 5*time.Millisecond))

	resp, err := e2eDo(context.Background(), client, "POST", srv.URL+"/v1/charges", "amount=100")
	if err != nil || resp.StatusCode != http.StatusOK || calls.Load() != 2 {
		t.Fatalf("POST: (%v, %v) after %d calls, want 200 after one retry", resp, err, calls.Load())
	}
	resp.Body.Close()
	calls.Store(0)
	status, _, _ := e2eGet(t, context.Background(), client, srv.URL+"/v1/balance")
	if status != http.StatusServiceUnavailable || calls.Load() != 1 {
		t.Errorf("GET: %d after %d calls, want the 503 at once, not retried", status, calls.Load())
	}
}

// TestE2EGitHubSecondaryLimitPausesAMinute: GitHub's secondary rate limit
// answers 403 without Retry-After while x-ratelimit-remaining is not 0;
// its docs say to wait at least a minute then, and the x-ratelimit-reset
// it sends is the primary window's, here 5 s away. The shipped catalog's
// github provider pauses the token for the minute, not until that reset.
func TestE2EGitHubSecondaryLimitPausesAMinute(t *testing.T) {
	t.Parallel()
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("x-ratelimit-limit", "5000")
		h.Set("x-ratelimit-remaining", "4321")
		h.Set("x-ratelimit-used", "679")
		h.Set("x-ratelimit-reset", strconv.FormatInt(time.Now().Add(5*time.Second).Unix(), 10))
		h.Set("x-ratelimit-resource", "core")
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`)
	}))
	t.Cleanup(vendor.Close)
	catalog := string(config.Providers())
	const hosts = "hosts: [api.github.com]"
	if strings.Count(catalog, hosts) != 1 {
		t.Fatalf("the catalog has %d lines %q, want the github provider's one", strings.Count(catalog, hosts), hosts)
	}
	tr, _ := e2eTransport(t, strings.Replace(catalog, hosts, `hosts: ["HOST"]`, 1), strings.TrimPrefix(vendor.URL, "http://"))
	send := func() (int, error) {
		ctx := throttle.WithMaxWait(throttle.WithBusiness(context.Background(), "acme"), 0)
		req, err := http.NewRequestWithContext(ctx, "GET", vendor.URL+"/repos/o/r", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if status, err := send(); status != http.StatusForbidden {
		t.Fatalf("first request: (%d, %v), want GitHub's 403", status, err)
	}
	// The minute less the time since the 403: a busy machine takes
	// milliseconds here, never seconds.
	_, err := send()
	if left := pausedFor(err); left < 50*time.Second || left > time.Minute {
		t.Errorf("after the secondary limit's 403: %v, want the token paused for a minute", err)
	}
}
