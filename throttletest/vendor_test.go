package throttletest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// stepClock is a clock a test moves by hand.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// t0 is a whole second, half a minute into a minute and an hour.
var t0 = time.Date(2026, 6, 1, 12, 0, 30, 0, time.UTC)

// step is one request of a time-stepped table: advance the clock, send,
// check the status and some headers.
type step struct {
	advance time.Duration
	status  int
	headers map[string]string // "" checks that the header is absent
}

func run(t *testing.T, opts Options, steps []step) *Vendor {
	t.Helper()
	clock := &stepClock{t: t0}
	opts.Clock = clock.Now
	v := NewVendor(opts)
	t.Cleanup(v.Close)
	for i, s := range steps {
		clock.Advance(s.advance)
		resp, err := v.Client().Get(v.URL + "/x")
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != s.status {
			t.Errorf("step %d (at +%v): status %d, want %d", i, clock.Now().Sub(t0), resp.StatusCode, s.status)
		}
		for k, want := range s.headers {
			if got := resp.Header.Get(k); got != want {
				t.Errorf("step %d (at +%v): %s = %q, want %q", i, clock.Now().Sub(t0), k, got, want)
			}
		}
	}
	return v
}

func repeat(n int, s step) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func concat(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var (
	ok  = step{status: 200, headers: map[string]string{"Retry-After": ""}}
	hit = http.StatusTooManyRequests
)

func TestGCRA(t *testing.T) {
	t.Parallel()
	// 2/s burst 3: T = 500ms, tolerance 1.5s.
	v := run(t, Options{Enforcer: GCRA(2, time.Second, 3)}, concat(
		repeat(3, ok),
		[]step{
			{status: hit, headers: map[string]string{"Retry-After": "1"}}, // next slot in 500ms, rounded up
			{advance: 499 * time.Millisecond, status: hit},
			{advance: time.Millisecond, status: 200},
			{status: hit},
			{advance: 500 * time.Millisecond, status: 200},
			{advance: 10 * time.Second, status: 200}, // idle: the whole burst is back
		},
		repeat(2, ok),
		[]step{{status: hit}},
	))
	if served, throttled := v.Counts(); served != 8 || throttled != 4 {
		t.Errorf("Counts() = %d, %d; want 8, 4", served, throttled)
	}
	if got := v.MaxIn(time.Second); got != 4 {
		t.Errorf("MaxIn(1s) = %d, want 4 (3 at t0, 1 at +500ms)", got)
	}
}

func TestGCRAWithBurstOneSpacesRequests(t *testing.T) {
	t.Parallel()
	// 10/s burst 1: one every 100ms, never two closer.
	steps := []step{ok}
	for i := 0; i < 5; i++ {
		steps = append(steps,
			step{advance: 99 * time.Millisecond, status: hit},
			step{advance: time.Millisecond, status: 200})
	}
	v := run(t, Options{Enforcer: GCRA(10, time.Second, 1)}, steps)
	if got := v.MaxIn(100 * time.Millisecond); got != 1 {
		t.Errorf("MaxIn(100ms) = %d, want 1", got)
	}
}

func TestWindow(t *testing.T) {
	t.Parallel()
	// 3 per minute; t0 is half a minute into its window.
	run(t, Options{Enforcer: Window(3, time.Minute)}, concat(
		repeat(3, ok),
		[]step{
			{status: hit, headers: map[string]string{"Retry-After": "30"}},
			{advance: 29*time.Second + 999*time.Millisecond, status: hit, headers: map[string]string{"Retry-After": "1"}},
			{advance: time.Millisecond, status: 200}, // 12:01:00, a new window
			ok, ok,
			{status: hit, headers: map[string]string{"Retry-After": "60"}},
		},
	))
}

// TestWindowCounters: with Counters, a window vendor that asks for a retry
// in a second sends its counters on every response, and the reset of the
// throttled one is still the window's end.
func TestWindowCounters(t *testing.T) {
	t.Parallel()
	end := fmt.Sprint(t0.Truncate(time.Minute).Add(time.Minute).Unix())
	counters := func(remaining, used string) map[string]string {
		return map[string]string{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": remaining,
			"X-RateLimit-Used": used, "X-RateLimit-Reset": end, "X-RateLimit-Resource": "core"}
	}
	hitHeaders := counters("0", "2")
	hitHeaders["Retry-After"] = "1"
	run(t, Options{Enforcer: Window(2, time.Minute), RetryAfter: time.Second, Counters: true}, []step{
		{status: 200, headers: counters("1", "1")},
		{status: 200, headers: counters("0", "2")},
		{status: hit, headers: hitHeaders},
	})
}

func TestLeakyBucketShopify(t *testing.T) {
	t.Parallel()
	var steps []step
	for i := 1; i <= 40; i++ {
		steps = append(steps, step{status: 200, headers: map[string]string{
			"X-Shopify-Shop-Api-Call-Limit": fmt.Sprintf("%d/40", i)}})
	}
	steps = append(steps,
		step{status: hit, headers: map[string]string{"Retry-After": "0.5", "X-Shopify-Shop-Api-Call-Limit": "40/40"}},
		step{advance: 499 * time.Millisecond, status: hit},
		step{advance: time.Millisecond, status: 200, headers: map[string]string{"X-Shopify-Shop-Api-Call-Limit": "40/40"}},
		step{status: hit},
		step{advance: 5 * time.Second, status: 200, headers: map[string]string{"X-Shopify-Shop-Api-Call-Limit": "31/40"}},
		step{advance: time.Minute, status: 200, headers: map[string]string{"X-Shopify-Shop-Api-Call-Limit": "1/40"}},
	)
	run(t, Options{Enforcer: LeakyBucket(40, 2), Signal: RetryAfterDecimal}, steps)
}

func TestFixedRetryAfterDecimal(t *testing.T) {
	t.Parallel()
	run(t, Options{Enforcer: LeakyBucket(2, 2), Signal: RetryAfterDecimal, RetryAfter: 2 * time.Second}, []step{
		ok, ok,
		{status: hit, headers: map[string]string{"Retry-After": "2.0", "X-Shopify-Shop-Api-Call-Limit": "2/2"}},
	})
}

func TestRetryAfterDate(t *testing.T) {
	t.Parallel()
	run(t, Options{Enforcer: GCRA(1, time.Second, 1), Signal: RetryAfterDate}, []step{
		ok,
		{advance: 200 * time.Millisecond, status: hit, headers: map[string]string{
			// 800ms away, rounded up to the second: t0+1s.
			"Retry-After": "Mon, 01 Jun 2026 12:00:31 GMT"}},
	})
}

func TestGitHub403(t *testing.T) {
	t.Parallel()
	// 2 per hour; the window ends at 13:00:00.
	reset := fmt.Sprint(time.Date(2026, 6, 1, 13, 0, 0, 0, time.UTC).Unix())
	run(t, Options{Enforcer: Window(2, time.Hour), Signal: GitHub403}, []step{
		{status: 200, headers: map[string]string{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1",
			"X-RateLimit-Used": "1", "X-RateLimit-Reset": reset, "Retry-After": ""}},
		{status: 200, headers: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Used": "2"}},
		{status: http.StatusForbidden, headers: map[string]string{"X-RateLimit-Remaining": "0",
			"X-RateLimit-Reset": reset, "Retry-After": ""}},
	})
}

func TestGitHub403WithGCRAResetsWhenFull(t *testing.T) {
	t.Parallel()
	// 1/s burst 2: after two at t0 the bucket is full again at t0+2s.
	full := fmt.Sprint(t0.Add(2 * time.Second).Unix())
	run(t, Options{Enforcer: GCRA(1, time.Second, 2), Signal: GitHub403}, []step{
		{status: 200, headers: map[string]string{"X-RateLimit-Remaining": "1"}},
		{status: 200, headers: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": full}},
		{status: http.StatusForbidden, headers: map[string]string{"X-RateLimit-Reset": fmt.Sprint(t0.Add(time.Second).Unix())}},
	})
}

func TestThrottleNextChargesNothing(t *testing.T) {
	t.Parallel()
	clock := &stepClock{t: t0}
	v := NewVendor(Options{Enforcer: GCRA(1, time.Second, 1), Clock: clock.Now, ThrottleBody: `{"error":"insufficient_quota"}`})
	defer v.Close()
	v.ThrottleNext(2)
	for i, want := range []int{hit, hit, 200, hit} {
		resp, err := v.Client().Get(v.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("request %d: status %d, want %d", i, resp.StatusCode, want)
		}
		if want == hit && (resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "insufficient_quota")) {
			t.Errorf("request %d: Retry-After %q, body %q; want a delay and the custom body", i, resp.Header.Get("Retry-After"), b)
		}
		if i < 2 && (resp.Header.Get("Retry-After") != "1" || resp.Header.Get("X-RateLimit-Limit") != "") {
			t.Errorf("forced throttle %d: Retry-After %q, want 1", i, resp.Header.Get("Retry-After"))
		}
	}
	arr := v.Arrivals()
	if len(arr) != 4 || !arr[0].Throttled || !arr[1].Throttled || arr[2].Throttled || !arr[3].Throttled {
		t.Errorf("arrivals %+v: want throttled, throttled, served, throttled", arr)
	}
}

func TestForcedGitHub403AdvertisesTheLimit(t *testing.T) {
	t.Parallel()
	clock := &stepClock{t: t0}
	v := NewVendor(Options{Enforcer: Window(5000, time.Hour), Signal: GitHub403, Clock: clock.Now, RetryAfter: 90 * time.Second})
	defer v.Close()
	v.ThrottleNext(1)
	resp, err := v.Client().Get(v.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := map[string]string{"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0", "X-RateLimit-Used": "5000",
		"X-RateLimit-Reset": fmt.Sprint(t0.Add(90 * time.Second).Unix())}
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("status %d, want 403", resp.StatusCode)
	}
	for k, w := range want {
		if got := resp.Header.Get(k); got != w {
			t.Errorf("%s = %q, want %q", k, got, w)
		}
	}
}

func TestScopesHaveTheirOwnState(t *testing.T) {
	t.Parallel()
	clock := &stepClock{t: t0}
	v := NewVendor(Options{Enforcer: GCRA(1, time.Second, 2), ScopeHeader: "X-Tenant", Clock: clock.Now})
	defer v.Close()
	send := func(tenant string) int {
		req, _ := http.NewRequest("GET", v.URL, nil)
		req.Header.Set("X-Tenant", tenant)
		resp, err := v.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tenant := range []string{"a", "b"} {
		for i, want := range []int{200, 200, hit} {
			if got := send(tenant); got != want {
				t.Errorf("tenant %s request %d: %d, want %d", tenant, i, got, want)
			}
		}
	}
	if a, all := v.MaxInScope("a", time.Second), v.MaxIn(time.Second); a != 2 || all != 4 {
		t.Errorf("MaxInScope(a) = %d, MaxIn = %d; want 2, 4", a, all)
	}
}

func TestArrivalsRecordBodiesAndAreBounded(t *testing.T) {
	t.Parallel()
	v := NewVendor(Options{MaxArrivals: 2, RecordBodies: true})
	defer v.Close()
	for i := 0; i < 3; i++ {
		resp, err := v.Client().Post(v.URL+"/charge", "text/plain", strings.NewReader(fmt.Sprint("amount=", i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	arr := v.Arrivals()
	if len(arr) != 2 {
		t.Fatalf("recorded %d arrivals, want the cap, 2", len(arr))
	}
	for i, a := range arr {
		if a.Method != "POST" || a.Path != "/charge" || string(a.Body) != fmt.Sprint("amount=", i) || a.Throttled || a.At.IsZero() {
			t.Errorf("arrival %d = %+v", i, a)
		}
	}
	if served, _ := v.Counts(); served != 3 {
		t.Errorf("served %d, want 3 (counted past the cap)", served)
	}
}

func TestHandlerAnswersAdmittedRequests(t *testing.T) {
	t.Parallel()
	v := NewVendor(Options{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})})
	defer v.Close()
	resp, err := v.Client().Get(v.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("status %d, want 201", resp.StatusCode)
	}
}

func TestMaxInTimes(t *testing.T) {
	t.Parallel()
	ms := func(n ...int) []time.Time {
		var out []time.Time
		for _, m := range n {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	for _, c := range []struct {
		ts     []time.Time
		window time.Duration
		want   int
	}{
		{nil, time.Second, 0},
		{ms(0), time.Second, 1},
		{ms(0, 999), time.Second, 2},
		{ms(0, 1000), time.Second, 1}, // half-open
		{ms(1000, 0, 500, 1499, 200), time.Second, 3},
		{ms(0, 0, 0), time.Millisecond, 3},
	} {
		if got := maxInTimes(c.ts, c.window); got != c.want {
			t.Errorf("maxInTimes(%v, %v) = %d, want %d", c.ts, c.window, got, c.want)
		}
	}
}

func TestConcurrentRequestsOnTheRealClock(t *testing.T) {
	t.Parallel()
	v := NewVendor(Options{Enforcer: GCRA(50, time.Second, 10)})
	defer v.Close()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				resp, err := v.Client().Get(v.URL)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	served, throttled := v.Counts()
	if served+throttled != 200 || len(v.Arrivals()) != 200 {
		t.Errorf("served %d + throttled %d, %d arrivals; want 200", served, throttled, len(v.Arrivals()))
	}
	// A GCRA of 50/s burst 10 never admits more than 10 + 50*0.2 in 200ms.
	if got := v.MaxIn(200 * time.Millisecond); got > 20 {
		t.Errorf("MaxIn(200ms) = %d, want at most 20", got)
	}
}

func TestConstructorsRefuseNonsense(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]func(){
		"GCRA rate 0":      func() { GCRA(0, time.Second, 1) },
		"GCRA burst 0":     func() { GCRA(1, time.Second, 0) },
		"Window length 0":  func() { Window(1, 0) },
		"LeakyBucket leak": func() { LeakyBucket(1, 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}

// TestSignalString: a Signal prints in snake case, as every enum of the
// module does, and one it does not know as Signal(n).
func TestSignalString(t *testing.T) {
	t.Parallel()
	for s, want := range map[Signal]string{
		RetryAfterSeconds: "retry_after_seconds", RetryAfterDecimal: "retry_after_decimal",
		RetryAfterDate: "retry_after_date", GitHub403: "github_403", 9: "Signal(9)",
	} {
		if got := s.String(); got != want {
			t.Errorf("Signal(%d).String() = %q, want %q", uint8(s), got, want)
		}
	}
}
