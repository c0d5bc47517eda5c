package throttletest

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestWindowOfADayIsTheUTCDay: Window(n, 24h) is a quota per UTC calendar
// day: full at n, back whole at midnight UTC.
func TestWindowOfADayIsTheUTCDay(t *testing.T) {
	t.Parallel()
	midnight := t0.Truncate(24 * time.Hour).Add(24 * time.Hour)
	untilMidnight := midnight.Sub(t0)
	run(t, Options{Enforcer: Window(2, 24*time.Hour)}, []step{
		ok, ok,
		{status: hit, headers: map[string]string{"Retry-After": strconv.Itoa(int(untilMidnight / time.Second))}},
		{advance: untilMidnight - time.Millisecond, status: hit},
		{advance: time.Millisecond, status: 200},
		ok,
		{status: hit},
	})
}

// TestRolling: at most n in any trailing length, exactly: a request is
// admitted once the oldest of the last n has left the log, not a
// nanosecond sooner.
func TestRolling(t *testing.T) {
	t.Parallel()
	run(t, Options{Enforcer: Rolling(2, 2*time.Second), Counters: true}, []step{
		{status: 200, headers: map[string]string{"X-RateLimit-Remaining": "1"}},
		{advance: time.Second, status: 200, headers: map[string]string{"X-RateLimit-Remaining": "0"}},
		{advance: 999 * time.Millisecond, status: hit, headers: map[string]string{"Retry-After": "1"}},
		{advance: time.Millisecond, status: 200}, // the one at t0 has left
		{advance: 999 * time.Millisecond, status: hit},
		{advance: time.Millisecond, status: 200},
	})
	l := NewLedger(Rolling(2, 2*time.Second))
	for _, at := range []time.Duration{0, time.Second, 2 * time.Second} {
		if ok, _ := l.Admit(t0.Add(at), "", 1); !ok {
			t.Fatalf("refused at +%v", at)
		}
	}
	if ok, wait := l.Admit(t0.Add(2500*time.Millisecond), "", 1); ok || wait != 500*time.Millisecond {
		t.Errorf("Admit(+2.5s) = %v, %v; want refused for 500ms (until the one at +1s leaves)", ok, wait)
	}
}

// TestConcurrentVendor: a live vendor holds a place from a request's
// arrival until its response is written; the request beyond the cap is
// refused with a second's Retry-After, as no place's end is known.
func TestConcurrentVendor(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	v := NewVendor(Options{Enforcer: Concurrent(2, 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	})})
	defer v.Close()
	get := func() (int, string) {
		resp, err := v.Client().Get(v.URL)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	done := make(chan int, 2)
	for i := 0; i < 2; i++ {
		go func() { s, _ := get(); done <- s }()
		<-arrived
	}
	if status, ra := get(); status != hit || ra != "1" {
		t.Errorf("third request in flight: %d, Retry-After %q; want 429, 1", status, ra)
	}
	release <- struct{}{}
	if s := <-done; s != 200 {
		t.Errorf("first request: %d, want 200", s)
	}
	go func() { s, _ := get(); done <- s }()
	<-arrived // admitted: the first gave its place back
	close(release)
	for i := 0; i < 2; i++ {
		if s := <-done; s != 200 {
			t.Errorf("request: %d, want 200", s)
		}
	}
	as := v.Arrivals()
	if len(as) != 4 || !as[2].Throttled || v.PeakInFlight() != 3 {
		t.Fatalf("%d arrivals (third throttled: %v), peak %d; want 4, true, 3", len(as), len(as) > 2 && as[2].Throttled, v.PeakInFlight())
	}
	for i, a := range as {
		if a.Done.Before(a.At) {
			t.Errorf("arrival %d done at %v, before it arrived at %v", i, a.Done, a.At)
		}
	}
}

// TestConcurrentServingTime: a vendor holds an admitted request for the
// serving time before answering it; a Ledger frees its place then.
func TestConcurrentServingTime(t *testing.T) {
	t.Parallel()
	v := NewVendor(Options{Enforcer: Concurrent(1, 50*time.Millisecond)})
	defer v.Close()
	resp, err := v.Client().Get(v.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if a := v.Arrivals()[0]; a.Done.Sub(a.At) < 50*time.Millisecond {
		t.Errorf("answered %v after its arrival, want at least the serving time 50ms", a.Done.Sub(a.At))
	}

	l := NewLedger(Concurrent(2, 100*time.Millisecond))
	l.Admit(t0, "", 1)
	l.Admit(t0.Add(time.Millisecond), "", 1)
	if ok, wait := l.Admit(t0.Add(50*time.Millisecond), "", 1); ok || wait != 50*time.Millisecond {
		t.Errorf("Admit(+50ms) = %v, %v; want refused for 50ms", ok, wait)
	}
	if ok, _ := l.Admit(t0.Add(100*time.Millisecond), "", 1); !ok {
		t.Error("refused once the first left")
	}
}

// TestCost: a model API's GCRA and Window charge what each request cost,
// and the arrival log records it.
func TestCost(t *testing.T) {
	t.Parallel()
	clock := &stepClock{t: t0}
	v := NewVendor(Options{Enforcer: GCRA(100, time.Second, 10).Costs(), Clock: clock.Now, Cost: func(r *http.Request) int64 {
		c, _ := strconv.ParseInt(r.Header.Get("X-Tokens"), 10, 64)
		return c
	}})
	defer v.Close()
	for i, c := range []struct {
		advance time.Duration
		tokens  string
		status  int
	}{{0, "10", 200}, {0, "5", hit}, {49 * time.Millisecond, "5", hit}, {time.Millisecond, "5", 200}, {0, "", hit}, {10 * time.Millisecond, "0", 200}} {
		clock.Advance(c.advance)
		if resp := send(t, v, "/", "X-Tokens", c.tokens); resp.StatusCode != c.status {
			t.Errorf("request %d (%s tokens): %d, want %d", i, c.tokens, resp.StatusCode, c.status)
		}
	}
	var costs []int64
	for _, a := range v.Arrivals() {
		costs = append(costs, a.Cost)
	}
	if fmt.Sprint(costs) != "[10 5 5 5 1 1]" {
		t.Errorf("costs %v, want [10 5 5 5 1 1] (below 1 counts as 1)", costs)
	}

	l := NewLedger(Window(10, time.Minute).Costs())
	if ok, _ := l.Admit(t0, "", 6); !ok {
		t.Fatal("6 of 10 refused")
	}
	if ok, wait := l.Admit(t0, "", 5); ok || wait != 30*time.Second {
		t.Errorf("5 more: %v, %v; want refused until the window's end in 30s", ok, wait)
	}
	if ok, _ := l.Admit(t0, "", 4); !ok {
		t.Error("4 more refused, with 4 left")
	}
}

// TestStackSharedAndCounters: a stack admits a request every limit
// admits; a shared limit counts every scope's requests; the counters are
// the first limit's, as they stand, even when another refused.
func TestStackSharedAndCounters(t *testing.T) {
	t.Parallel()
	clock := &stepClock{t: t0}
	v := NewVendor(Options{
		Enforcer:    All(Window(3, 24*time.Hour).Shared(), GCRA(1, time.Hour, 1)),
		ScopeHeader: "X-Shop",
		Counters:    true,
		Clock:       clock.Now,
	})
	defer v.Close()
	for i, c := range []struct {
		shop      string
		status    int
		remaining string
	}{{"a", 200, "2"}, {"a", hit, "2"}, {"b", 200, "1"}, {"c", 200, "0"}, {"d", hit, "0"}} {
		resp := send(t, v, "/", "X-Shop", c.shop)
		if resp.StatusCode != c.status || resp.Header.Get("X-RateLimit-Limit") != "3" || resp.Header.Get("X-RateLimit-Remaining") != c.remaining {
			t.Errorf("request %d (%s): %d, limit %q, remaining %q; want %d, 3, %s", i, c.shop, resp.StatusCode,
				resp.Header.Get("X-RateLimit-Limit"), resp.Header.Get("X-RateLimit-Remaining"), c.status, c.remaining)
		}
	}

	// Earliest: the GCRA's next slot, then the window's next day.
	l := NewLedger(All(GCRA(1, time.Second, 1), Window(2, time.Minute)))
	l.Admit(t0, "", 1)
	if e := l.Earliest(t0, "", 1); !e.Equal(t0.Add(time.Second)) {
		t.Errorf("Earliest = %v, want the GCRA's next slot %v", e, t0.Add(time.Second))
	}
	l.Admit(t0.Add(time.Second), "", 1)
	if e := l.Earliest(t0.Add(time.Second), "", 1); !e.Equal(t0.Truncate(time.Minute).Add(time.Minute)) {
		t.Errorf("Earliest = %v, want the next minute", e)
	}
	// Charge counts what the limits would refuse.
	l = NewLedger(Window(1, time.Minute))
	l.Charge(t0, "", 1)
	l.Charge(t0, "", 1)
	if ok, _ := l.Admit(t0.Add(29*time.Second), "", 1); ok {
		t.Error("admitted after two charges in a window of 1")
	}
	if ok, _ := l.Admit(t0.Add(30*time.Second), "", 1); !ok {
		t.Error("refused in the next window")
	}
}

// TestOthers: another client's requests are charged as the vendor's clock
// passes them, before later requests; Close decides those still to come.
func TestOthers(t *testing.T) {
	t.Parallel()
	others := []Other{{At: t0.Add(3 * time.Second)}, {At: t0.Add(time.Second)}, {At: t0.Add(2 * time.Second)}}
	for i := 0; i < 4; i++ { // next minute: 3 admitted, 1 refused
		others = append(others, Other{At: t0.Add(2 * time.Minute)})
	}
	v := run(t, Options{Enforcer: Window(3, time.Minute), Others: others}, []step{
		ok,
		{advance: 5 * time.Second, status: hit}, // t0 and two others fill the window; the third other is refused
	})
	if n := v.OthersRefused(); n != 1 {
		t.Errorf("OthersRefused() = %d before Close, want 1", n)
	}
	v.Close()
	if n := v.OthersRefused(); n != 2 {
		t.Errorf("OthersRefused() = %d after Close, want 2", n)
	}
	if served, throttled := v.Counts(); served != 1 || throttled != 1 || len(v.Arrivals()) != 2 {
		t.Errorf("Counts() = %d, %d, %d arrivals; want 1, 1, 2: others are not the test's requests", served, throttled, len(v.Arrivals()))
	}
}

// TestTagAndExempt: an arrival keeps its tag header; an exempt request is
// answered without being enforced, counted or recorded.
func TestTagAndExempt(t *testing.T) {
	t.Parallel()
	v := NewVendor(Options{Enforcer: Window(1, time.Hour), TagHeader: "X-Request-Id",
		Exempt: func(r *http.Request) bool { return r.URL.Path == "/health" }})
	defer v.Close()
	for i, c := range []struct {
		path, id string
		status   int
	}{{"/health", "", 200}, {"/health", "", 200}, {"/v1", "r1", 200}, {"/health", "", 200}} {
		if resp := send(t, v, c.path, "X-Request-Id", c.id); resp.StatusCode != c.status {
			t.Errorf("request %d (%s): %d, want %d", i, c.path, resp.StatusCode, c.status)
		}
	}
	as := v.Arrivals()
	if served, throttled := v.Counts(); len(as) != 1 || as[0].Tag != "r1" || served != 1 || throttled != 0 {
		t.Errorf("arrivals %+v, counts %d, %d; want the one /v1 request tagged r1", as, served, throttled)
	}
}

// send sends v a GET of path with one header, and returns the response
// with its body read and closed.
func send(t *testing.T, v *Vendor, path, header, value string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, v.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(header, value)
	resp, err := v.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}
