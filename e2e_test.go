package throttle_test

// End-to-end tests: requests go through throttle.Transport and its
// retrying client, over real loopback HTTP, to fake vendors that enforce
// their own limits and answer the way real vendors do
// (package throttletest). The assertions are on what the vendor saw.
//
// Real time runs here, so no assertion depends on how fast the machine
// is: the throttle runs at 80-90% of the vendor's rate, with a burst
// smaller than the vendor's by at least the number of requests in flight
// (see TestE2EThrottleKeepsTheVendorFromThrottling), so that no
// scheduling can make it exceed the vendor's limit; delays are checked as
// lower bounds (a retry must not come before the vendor's delay), never
// as upper bounds; "busy" leaves out the time the process was not
// scheduled; and where a vendor's own clock would race the test, the
// vendor's clock stands still until the moment that matters.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

// e2eTransport returns a Transport for the providers in yaml (with
// "HOST" replaced by host) and its retrying client. Everything is closed
// when the test ends.
func e2eTransport(t testing.TB, yaml, host string, opts ...throttle.Option) (*throttle.Transport, *http.Client) {
	t.Helper()
	cfg, err := providers.Load("e2e.yaml", []byte(strings.ReplaceAll(yaml, "HOST", host)))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	base := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64}
	opts = append([]throttle.Option{
		throttle.WithRegistry(providers.NewRegistry(cfg)),
		throttle.WithBase(base),
	}, opts...)
	tr, err := throttle.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(base.CloseIdleConnections)
	return tr, tr.Client()
}

// e2eVendor starts a fake vendor, closed when the test ends.
func e2eVendor(t testing.TB, opts throttletest.Options) *throttletest.Vendor {
	t.Helper()
	v := throttletest.NewVendor(opts)
	t.Cleanup(v.Close)
	return v
}

// e2eGet sends a GET through client and returns the status and body; a
// transport error fails the test.
func e2eGet(t testing.TB, ctx context.Context, client *http.Client, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := e2eDo(ctx, client, "GET", url, "")
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func e2eDo(ctx context.Context, client *http.Client, method, url, body string) (*http.Response, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	return client.Do(req)
}

// e2eLoad keeps client busy: workers goroutines send GETs to url, each as
// soon as its previous one returned, for d. prepare, if set, adapts each
// request (a tenant's context and header). Errors other than the end of
// the run fail the test. It returns when every goroutine has stopped,
// with how long the process was stalled meanwhile (see e2eStalled).
func e2eLoad(t testing.TB, client *http.Client, url string, workers int, d time.Duration, prepare func(worker int, req *http.Request) *http.Request) (stalled time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	stalls := e2eStalled(ctx)
	var wg sync.WaitGroup
	var reported atomic.Int32
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if prepare != nil {
					req = prepare(w, req)
				}
				resp, err := client.Do(req)
				if err != nil {
					// A request cut short by the end of the run, or
					// refused because its slot is past it, ends the
					// worker; anything else is a failure.
					if errors.Is(err, context.DeadlineExceeded) {
						return
					}
					if ctx.Err() == nil && reported.Add(1) <= 5 {
						t.Errorf("worker %d: %v", w, err)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	cancel()
	return <-stalls
}

// e2eStalled measures, until ctx ends, how long this process could not
// run: a goroutine sleeps 2ms at a time and counts every wake-up more
// than 20ms late as a stall. Other processes share the CPUs (tests of
// other packages run in parallel), and nobody keeps a vendor busy while
// not scheduled, so the busy checks leave that time out.
func e2eStalled(ctx context.Context) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	go func() {
		var stalled time.Duration
		const tick, late = 2 * time.Millisecond, 20 * time.Millisecond
		timer := time.NewTimer(tick)
		defer timer.Stop()
		last := time.Now()
		for {
			select {
			case <-ctx.Done():
				out <- stalled
				return
			case now := <-timer.C:
				if gap := now.Sub(last); gap > late {
					stalled += gap - tick
				}
				last = time.Now()
				timer.Reset(tick)
			}
		}
	}()
	return out
}

// e2eBusy checks that the vendor served at least share of what a limit of
// rate per period with burst allowed over the span of its arrivals, less
// the time the process was stalled: the client kept it busy. share is
// generous, so that a slow machine cannot flip it.
func e2eBusy(t testing.TB, v *throttletest.Vendor, rate int, period time.Duration, burst int, share float64, stalled time.Duration) {
	t.Helper()
	var first, last time.Time
	served := 0
	for _, a := range v.Arrivals() {
		if a.Throttled {
			continue
		}
		if served == 0 {
			first = a.At
		}
		last = a.At
		served++
	}
	span := max(last.Sub(first)-stalled, 0)
	allowed := float64(burst) + float64(rate)*float64(span)/float64(period)
	if float64(served) < share*allowed {
		t.Errorf("the vendor served %d requests in %v (of which the process was stalled %v); its limit allowed %.0f: want at least %.0f%% of it",
			served, last.Sub(first), stalled, allowed, share*100)
	}
}

// TestE2EThrottleKeepsTheVendorFromThrottling: a vendor enforcing its own
// limit never has to answer 429 when the throttle is configured slightly
// below it, however hard the client pushes, and the client still uses
// most of the vendor's limit.
//
// Zero 429s is a guarantee here, not a likelihood, whatever the
// scheduler does: requests reach the vendor no earlier than their slots,
// so in any interval the vendor sees at most the throttle's burst, its
// rate times the interval, and the requests that had slots before the
// interval but were still in flight (a waiter that wakes late, on a
// starved CPU, sends at once): at most one per worker. So each case keeps
// the vendor's burst >= the throttle's burst + workers.
func TestE2EThrottleKeepsTheVendorFromThrottling(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		vendor   throttletest.Enforcer
		signal   throttletest.Signal
		provider string // the throttle's headroom and limits
		// the vendor's limit, for the busy check, and the share of it the
		// throttle is expected to use at least
		rate   int
		period time.Duration
		burst  int
		share  float64
		// the most requests the vendor may see in any second
		maxIn int
		// goroutines sending
		workers int
	}{
		{
			// 20/s burst 5 (at most 24 in any second); the throttle runs
			// at headroom 90%: 18/s burst 4.
			name: "gcra", vendor: throttletest.GCRA(20, time.Second, 5), signal: throttletest.RetryAfterSeconds,
			provider: "headroom: 90%\n    limits: [{name: peak, limit: 20/s, burst: 5}]",
			// One worker keeps 18/s busy (a request takes a millisecond
			// or two) and is all the burst's margin allows.
			rate: 20, period: time.Second, burst: 5, share: 0.7, maxIn: 24, workers: 1,
		},
		{
			// 20 per fixed second; the throttle's rate + burst is 85% of
			// it, and with two workers no sliding second sees more than
			// 20 either.
			name: "window", vendor: throttletest.Window(20, time.Second), signal: throttletest.RetryAfterDate,
			provider: "limits: [{name: peak, limit: 15/s burst 2}]",
			rate:     20, period: time.Second, share: 0.6, maxIn: 20, workers: 2,
		},
		{
			// Shopify REST: a bucket of 40 leaking 2/s; the throttle fills
			// 90% of the bucket and leaks as fast.
			name: "leaky-bucket", vendor: throttletest.LeakyBucket(40, 2), signal: throttletest.RetryAfterDecimal,
			provider: "limits: [{name: rest, limit: 2/s burst 36, scope: host}]",
			rate:     2, period: time.Second, burst: 40, share: 0.7, maxIn: 42, workers: 4,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			v := e2eVendor(t, throttletest.Options{Enforcer: c.vendor, Signal: c.signal})
			_, client := e2eTransport(t, `
providers:
  vendor:
    hosts: ["HOST"]
    max_wait: 10s
    `+c.provider+"\n", v.Host())
			stalled := e2eLoad(t, client, v.URL+"/v1/items", c.workers, 2500*time.Millisecond, nil)
			served, throttled := v.Counts()
			t.Logf("served %d, throttled %d, at most %d in a second; stalled %v", served, throttled, v.MaxIn(time.Second), stalled)
			if throttled != 0 {
				t.Errorf("the vendor throttled %d of %d requests, want none", throttled, served+throttled)
			}
			if got := v.MaxIn(time.Second); got > c.maxIn {
				t.Errorf("the vendor saw %d requests in a second, more than its limit allows (%d)", got, c.maxIn)
			}
			e2eBusy(t, v, c.rate, c.period, c.burst, c.share, stalled)
		})
	}
}

// TestE2EGitHub403PausesTheScopeFleetWide: GitHub's primary limit answers
// 403 with x-ratelimit-remaining: 0 and the reset as an epoch. With the
// provider's signals saying so (as config/providers.yaml models GitHub),
// the transport recognises it as throttled, pauses the business's scope
// in the shared store (another transport of the fleet is held back too,
// other businesses are not), and the client retries after the reset.
func TestE2EGitHub403PausesTheScopeFleetWide(t *testing.T) {
	t.Parallel()
	v := e2eVendor(t, throttletest.Options{Signal: throttletest.GitHub403, RetryAfter: 1500 * time.Millisecond})
	const yaml = `
providers:
  github:
    hosts: ["HOST"]
    keys: per_tenant
    on_limit: wait
    max_wait: 10s
    signals:
      throttled:
        - {status: 429}
        - {status: 403, header: X-RateLimit-Remaining, header_value: "0"}
        - {status: 403, body_contains: secondary rate limit}
      delay_headers: [X-RateLimit-Reset]
      max_delay: 1h
    limits:
      - {name: core, limit: 4500/h burst 500, scope: business}
`
	// Two transports of a fleet, each with its own Redis client and store.
	srv := redistest.Start(t)
	storeA, err := redisstore.New(srv.Client(t), redisstore.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	storeB, err := redisstore.New(srv.Client(t), redisstore.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	paused := make(chan struct{}, 1)
	_, clientA := e2eTransport(t, yaml, v.Host(), throttle.WithStore(storeA),
		throttle.WithObserver(observerFunc(func(e throttle.Event) {
			if e.Kind == throttle.Paused {
				select {
				case paused <- struct{}{}:
				default:
				}
			}
		})))
	_, clientB := e2eTransport(t, yaml, v.Host(), throttle.WithStore(storeB))

	acme := throttle.WithBusiness(context.Background(), "acme")
	v.ThrottleNext(1) // acme's token is exhausted by someone else
	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := e2eDo(acme, clientA, "GET", v.URL+"/repos/o/r", "")
		if err != nil {
			done <- result{err: err}
			return
		}
		resp.Body.Close()
		done <- result{status: resp.StatusCode}
	}()

	select {
	case <-paused:
	case r := <-done:
		t.Fatalf("the request returned (%d, %v) without pausing the scope", r.status, r.err)
	}
	// While A waits for the reset, B (another transport on the same
	// store) is held back for acme, and refused at once when it will not
	// wait...
	_, err = e2eDo(throttle.WithMaxWait(acme, 0), clientB, "GET", v.URL+"/user", "")
	var le *throttle.LimitError
	if !errors.As(err, &le) || le.Limit != "pause" || le.RetryAfter <= 0 {
		t.Errorf("B for acme during the pause: got %v, want a *LimitError by the pause", err)
	}
	// ...but not for another business: the pause is acme's.
	globex := throttle.WithMaxWait(throttle.WithBusiness(context.Background(), "globex"), 0)
	if status, _, _ := e2eGet(t, globex, clientB, v.URL+"/user"); status != 200 {
		t.Errorf("B for globex during acme's pause: status %d, want 200", status)
	}

	r := <-done
	if r.err != nil || r.status != 200 {
		t.Fatalf("A: got (%d, %v), want 200 after the retry", r.status, r.err)
	}
	arr := v.Arrivals()
	var hit, retry *throttletest.Arrival
	for i := range arr {
		switch a := &arr[i]; {
		case a.Throttled:
			hit = a
		case hit != nil && a.Path == "/repos/o/r":
			retry = a
		}
	}
	if hit == nil || retry == nil {
		t.Fatalf("arrivals %+v: want a 403 and a retry of /repos/o/r", arr)
	}
	// The vendor's reset is its delay rounded up to the next second.
	reset := hit.At.Add(1500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	if retry.At.Before(reset) {
		t.Errorf("retried at %v, before the vendor's reset %v", retry.At.Format(time.StampMicro), reset.Format(time.StampMicro))
	}
	if served, throttled := v.Counts(); served != 2 || throttled != 1 {
		t.Errorf("vendor served %d, throttled %d; want 2 and 1", served, throttled)
	}
}

// observerFunc adapts a function to throttle.Observer.
type observerFunc func(throttle.Event)

func (f observerFunc) Observe(_ context.Context, e throttle.Event) { f(e) }

// TestE2EShopifyDecimalRetryAfter: Shopify's REST bucket answers 429
// with Retry-After: 2.0, a decimal go-retryablehttp alone cannot read.
// The retry must wait the two seconds (a retry sooner would only drain
// the bucket again).
func TestE2EShopifyDecimalRetryAfter(t *testing.T) {
	t.Parallel()
	// The vendor's clock stands still until the transport has seen the
	// 429, so that the bucket cannot leak between filling it and the
	// request, however slowly the machine runs.
	start := time.Now()
	var running atomic.Bool
	clock := func() time.Time {
		if running.Load() {
			return time.Now()
		}
		return start
	}
	v := e2eVendor(t, throttletest.Options{Enforcer: throttletest.LeakyBucket(40, 2),
		Signal: throttletest.RetryAfterDecimal, RetryAfter: 2 * time.Second, Clock: clock})
	_, client := e2eTransport(t, `
providers:
  shopify:
    hosts: ["HOST"]
    signals:
      throttled: [{status: 429}]
      max_delay: 1m
    routes:
      - name: rest
        path: /admin/**
        limits: [{name: rest, limit: 2/s burst 40, scope: host}]
`, v.Host(), throttle.WithRetries(3, 10*time.Millisecond, 50*time.Millisecond),
		throttle.WithObserver(observerFunc(func(e throttle.Event) {
			if e.Kind == throttle.UpstreamThrottled {
				running.Store(true)
			}
		})))

	// Another app of the same store fills the bucket, around the throttle.
	for i := 0; i < 40; i++ {
		resp, err := v.Client().Get(v.URL + "/admin/api/2026-01/shop.json")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	status, h, _ := e2eGet(t, context.Background(), client, v.URL+"/admin/api/2026-01/orders.json")
	if status != 200 {
		t.Fatalf("status %d, want 200 after the retry", status)
	}
	if got := h.Get("X-Shopify-Shop-Api-Call-Limit"); !strings.HasSuffix(got, "/40") {
		t.Errorf("X-Shopify-Shop-Api-Call-Limit = %q, want n/40", got)
	}
	var hit, retry time.Time
	for _, a := range v.Arrivals() {
		if a.Path != "/admin/api/2026-01/orders.json" {
			continue
		}
		if a.Throttled && hit.IsZero() {
			hit = a.At
		} else if !a.Throttled {
			retry = a.At
		}
	}
	if hit.IsZero() || retry.IsZero() {
		t.Fatalf("arrivals %+v: want a 429 then a served retry", v.Arrivals())
	}
	// With the decimal unread the backoff would retry within 50ms.
	if gap := retry.Sub(hit); gap < 2*time.Second {
		t.Errorf("retried %v after the 429, want at least the 2.0 s the vendor asked for", gap)
	}
	if _, throttled := v.Counts(); throttled != 1 {
		t.Errorf("the vendor throttled %d requests, want 1", throttled)
	}
}

// TestE2ERetryAfterHTTPDate: a Retry-After given as an HTTP-date is
// honoured: the retry comes at or after that date.
func TestE2ERetryAfterHTTPDate(t *testing.T) {
	t.Parallel()
	// The vendor's clock stands still until the transport has seen the
	// 429, so that the vendor's slot cannot come before the request,
	// however slowly the machine runs.
	start := time.Now()
	var running atomic.Bool
	clock := func() time.Time {
		if running.Load() {
			return time.Now()
		}
		return start
	}
	v := e2eVendor(t, throttletest.Options{Enforcer: throttletest.GCRA(1, 1500*time.Millisecond, 1),
		Signal: throttletest.RetryAfterDate, Clock: clock})
	_, client := e2eTransport(t, `
providers:
  vendor:
    hosts: ["HOST"]
    limits: [{name: peak, limit: 100/s}]
`, v.Host(), throttle.WithRetries(3, 10*time.Millisecond, 50*time.Millisecond),
		throttle.WithObserver(observerFunc(func(e throttle.Event) {
			if e.Kind == throttle.UpstreamThrottled {
				running.Store(true)
			}
		})))
	// Someone else takes the vendor's only slot, around the throttle.
	resp, err := v.Client().Get(v.URL + "/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	if status, _, _ := e2eGet(t, context.Background(), client, v.URL+"/x"); status != 200 {
		t.Fatalf("status %d, want 200 after the retry", status)
	}
	var other, hit, retry time.Time
	for _, a := range v.Arrivals() {
		switch {
		case a.Path == "/other":
			other = a.At
		case a.Path != "/x":
		case a.Throttled && hit.IsZero():
			hit = a.At
		case !a.Throttled:
			retry = a.At
		}
	}
	if hit.IsZero() || retry.IsZero() {
		t.Fatalf("arrivals %+v: want a 429 then a served retry", v.Arrivals())
	}
	// The date is the vendor's next slot, 1.5 s after the other
	// request, rounded up to a second.
	date := other.Add(1500 * time.Millisecond)
	if d := date.Truncate(time.Second); !d.Equal(date) {
		date = d.Add(time.Second)
	}
	if retry.Before(date) {
		t.Errorf("retried at %v, before the Retry-After date %v", retry.Format(time.StampMicro), date.Format(time.StampMicro))
	}
}

// TestE2EInsufficientQuotaIsNotRetried: OpenAI's 429 insufficient_quota
// is billing, not a rate limit: the caller gets it at once, with its
// body, it is not retried, and nothing is paused.
func TestE2EInsufficientQuotaIsNotRetried(t *testing.T) {
	t.Parallel()
	const body = `{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","code":"insufficient_quota"}}`
	v := e2eVendor(t, throttletest.Options{ThrottleBody: body})
	obs := &e2eEvents{}
	_, client := e2eTransport(t, `
providers:
  openai:
    hosts: ["HOST"]
    signals:
      throttled: [{status: 429}]
      ignore: [{status: 429, body_contains: insufficient_quota}]
      delay_headers: [Retry-After-Ms, X-Ratelimit-Reset-Requests, X-Ratelimit-Reset-Tokens]
      max_delay: 10m
    limits: [{name: rpm, limit: 450/min burst 50, scope: "label:model"}]
`, v.Host(), throttle.WithObserver(obs), throttle.WithRetries(3, 10*time.Millisecond, 50*time.Millisecond))

	v.ThrottleNext(1)
	ctx := throttle.WithLabel(context.Background(), "model", "gpt-x")
	status, _, got := e2eGet(t, ctx, client, v.URL+"/v1/chat/completions")
	if status != http.StatusTooManyRequests || got != body {
		t.Errorf("got %d %q, want the 429 with its body whole", status, got)
	}
	if served, throttled := v.Counts(); served != 0 || throttled != 1 {
		t.Errorf("vendor served %d, throttled %d; want one request, not retried", served, throttled)
	}
	// Not paused: the next request goes at once.
	if status, _, _ := e2eGet(t, throttle.WithMaxWait(ctx, 0), client, v.URL+"/v1/chat/completions"); status != 200 {
		t.Errorf("the next request: status %d, want 200", status)
	}
	for _, k := range obs.kinds() {
		if k == throttle.Paused || k == throttle.UpstreamThrottled {
			t.Errorf("insufficient_quota produced a %v event", k)
		}
	}
}

// e2eEvents records the kinds of the events it observes.
type e2eEvents struct {
	mu sync.Mutex
	k  []throttle.EventKind
}

func (o *e2eEvents) Observe(_ context.Context, e throttle.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.k = append(o.k, e.Kind)
}

func (o *e2eEvents) kinds() []throttle.EventKind {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]throttle.EventKind(nil), o.k...)
}

// e2eShortDelays is a provider whose vendor delays are capped at 50ms,
// so that retries are quick.
const e2eShortDelays = `
providers:
  vendor:
    hosts: ["HOST"]
    signals:
      throttled: [{status: 429}]
      max_delay: 50ms
    limits: [{name: peak, limit: 100/s}]
`

// TestE2ERetriesExhaustedReturnTheLast429: when every retry is throttled
// too, the caller gets the vendor's last 429 response, readable, and no
// error.
func TestE2ERetriesExhaustedReturnTheLast429(t *testing.T) {
	t.Parallel()
	v := e2eVendor(t, throttletest.Options{})
	_, client := e2eTransport(t, e2eShortDelays, v.Host(), throttle.WithRetries(2, time.Millisecond, 10*time.Millisecond))
	v.ThrottleNext(100)
	resp, err := e2eDo(context.Background(), client, "GET", v.URL+"/x", "")
	if err != nil {
		t.Fatalf("got error %v, want the last 429 response", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || err != nil || !strings.Contains(string(b), "rate_limited") ||
		resp.Header.Get("Retry-After") == "" {
		t.Errorf("got %d %q (read error %v), Retry-After %q; want the vendor's 429 whole",
			resp.StatusCode, b, err, resp.Header.Get("Retry-After"))
	}
	if _, throttled := v.Counts(); throttled != 3 {
		t.Errorf("the vendor saw %d attempts, want 3 (the first and 2 retries)", throttled)
	}
}

// TestE2EPostBodyIsReplayedOnRetry: a throttled POST is retried (a
// throttled request was not processed) with its body whole, every time.
func TestE2EPostBodyIsReplayedOnRetry(t *testing.T) {
	t.Parallel()
	v := e2eVendor(t, throttletest.Options{RecordBodies: true})
	_, client := e2eTransport(t, e2eShortDelays, v.Host(), throttle.WithRetries(3, time.Millisecond, 10*time.Millisecond))
	v.ThrottleNext(2)
	payload := strings.Repeat("amount=100&currency=eur&", 100)[:2000]
	resp, err := e2eDo(context.Background(), client, "POST", v.URL+"/v1/charges", payload)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d, want 200 on the third attempt", resp.StatusCode)
	}
	arr := v.Arrivals()
	if len(arr) != 3 {
		t.Fatalf("the vendor saw %d attempts, want 3", len(arr))
	}
	for i, a := range arr {
		if a.Method != "POST" || string(a.Body) != payload {
			t.Errorf("attempt %d: %s with a %d-byte body, want POST with the %d-byte payload", i, a.Method, len(a.Body), len(payload))
		}
	}
}

// TestE2ERetryNeverSleepsPastTheDeadline: a Retry-After longer than the
// request's deadline is not slept: the caller gets the 429 at once. The
// same for the next request, held back by the pause the 429 set: it is
// refused at once, as past its deadline. (Were either to sleep, the
// context would end first and the test would see its error instead.)
func TestE2ERetryNeverSleepsPastTheDeadline(t *testing.T) {
	t.Parallel()
	v := e2eVendor(t, throttletest.Options{RetryAfter: time.Hour})
	_, client := e2eTransport(t, `
providers:
  vendor:
    hosts: ["HOST"]
    max_wait: 2h
    signals:
      throttled: [{status: 429}]
      max_delay: 2h
    limits: [{name: peak, limit: 100/s}]
`, v.Host())
	v.ThrottleNext(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := e2eDo(ctx, client, "GET", v.URL+"/x", "")
	if err != nil {
		t.Fatalf("got error %v, want the 429 response", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "3600" {
		t.Errorf("got %d, Retry-After %q; want the 429 with Retry-After: 3600", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if ctx.Err() != nil {
		t.Errorf("the context ended (%v) before the client returned: it slept", ctx.Err())
	}

	_, err = e2eDo(ctx, client, "GET", v.URL+"/x", "")
	var le *throttle.LimitError
	if !errors.As(err, &le) || !le.Deadline || le.Limit != "pause" || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("during the hour's pause: got %v, want a *LimitError by the pause, past the deadline", err)
	}
	if ctx.Err() != nil {
		t.Errorf("the context ended (%v) before the refusal: the transport slept", ctx.Err())
	}
	if served, throttled := v.Counts(); served != 0 || throttled != 1 {
		t.Errorf("vendor served %d, throttled %d; want only the one 429", served, throttled)
	}
}

// TestE2EVendorsAreToldApartByPort checks that host patterns with a port
// work the way these tests use them: two vendors on one address, told
// apart by port.
func TestE2EVendorsAreToldApartByPort(t *testing.T) {
	t.Parallel()
	a := e2eVendor(t, throttletest.Options{})
	b := e2eVendor(t, throttletest.Options{})
	_, client := e2eTransport(t, fmt.Sprintf(`
providers:
  a:
    hosts: ["%s"]
    on_limit: fail
    limits: [{name: peak, limit: 1/min, burst: 1}]
  b:
    hosts: ["%s"]
    on_limit: fail
    limits: [{name: peak, limit: 1/min, burst: 1}]
`, a.Host(), b.Host()), "")
	for _, v := range []*throttletest.Vendor{a, b} {
		if status, _, _ := e2eGet(t, context.Background(), client, v.URL); status != 200 {
			t.Errorf("%s: first request: status %d", v.Host(), status)
		}
		if _, err := e2eDo(context.Background(), client, "GET", v.URL, ""); !errors.Is(err, throttle.ErrLimited) {
			t.Errorf("%s: second request: got %v, want ErrLimited", v.Host(), err)
		}
	}
}

// TestE2ENewClientLeavesNoGoroutine: an *http.Client from NewClient
// gives no way to close anything, so NewClient must start no goroutine
// that outlives its requests. Not parallel, so that no other test starts
// goroutines meanwhile.
func TestE2ENewClientLeavesNoGoroutine(t *testing.T) {
	v := e2eVendor(t, throttletest.Options{})
	cfg, err := providers.Load("e2e.yaml", []byte(`
providers:
  vendor:
    hosts: ["`+v.Host()+`"]
    limits: [{name: peak, limit: 100/s}]
`))
	if err != nil {
		t.Fatal(err)
	}
	before := e2eGoroutines("github.com/fleetquota/throttle")
	func() {
		client, err := throttle.NewClient(throttle.WithRegistry(providers.NewRegistry(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Get(v.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		client.CloseIdleConnections()
	}()
	if after := e2eGoroutines("github.com/fleetquota/throttle"); after != before {
		t.Fatalf("goroutines in throttle's code: %d before NewClient and a request, %d after", before, after)
	}
}

// e2eGoroutines counts the goroutines whose stacks run code of pkg.
func e2eGoroutines(pkg string) int {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			count := 0
			for _, g := range strings.Split(string(buf[:n]), "\n\n") {
				if strings.Contains(g, pkg+"/quota") || strings.Contains(g, pkg+".(*Transport)") {
					count++
				}
			}
			return count
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestE2ERequestsWithoutLimitsHonourPauses: a request whose stack is
// empty (its provider's limits are all on routes it does not take) still
// waits for the provider's pause: a 429 on a routed request with
// Retry-After: 30 holds back an un-routed request too.
func TestE2ERequestsWithoutLimitsHonourPauses(t *testing.T) {
	t.Parallel()
	v := e2eVendor(t, throttletest.Options{RetryAfter: 30 * time.Second})
	_, client := e2eTransport(t, `
providers:
  vendor:
    hosts: ["HOST"]
    routes:
      - name: rest
        path: /admin/**
        limits: [{name: rest, limit: 2/s burst 40}]
`, v.Host(), throttle.WithRetries(0, time.Millisecond, time.Millisecond))
	v.ThrottleNext(1)
	if status, _, _ := e2eGet(t, context.Background(), client, v.URL+"/admin/orders.json"); status != http.StatusTooManyRequests {
		t.Fatalf("the throttled request: status %d, want the vendor's 429", status)
	}
	noWait := throttle.WithMaxWait(context.Background(), 0)
	_, err := e2eDo(noWait, client, "GET", v.URL+"/admin/products.json", "")
	var le *throttle.LimitError
	if !errors.As(err, &le) || le.Limit != "pause" {
		t.Fatalf("a routed request during the pause: got %v, want a *LimitError by the pause", err)
	}
	_, err = e2eDo(noWait, client, "GET", v.URL+"/oauth/access_scopes.json", "")
	if !errors.As(err, &le) || le.Limit != "pause" {
		t.Fatalf("an un-routed request during the pause: got %v, want a *LimitError by the pause", err)
	}
}
