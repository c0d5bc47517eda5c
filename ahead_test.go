package throttle_test

// Quota taken ahead (docs/decisions.md, "Quota taken ahead"): a busy
// process reserves a batch of slots in one store call and spends them
// without a round trip; the fleet never exceeds the limit.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

// aheadYAML is a provider whose one limit, 200/s burst 40 (T = 5ms, a
// tolerance of 200ms), takes quota ahead for 100ms; requests fail fast.
const aheadYAML = `
providers:
  vendor:
    hosts: ["HOST"]
    on_limit: fail
    on_store_error: fail_closed
    ahead: {period: 100ms}
    limits: [{name: peak, limit: 200/s, burst: 40}]
`

// memStore is a shared MemoryStore that counts its decisions: the
// store of a fleet of Transports in one test, every method promoted.
type memStore struct {
	*quota.MemoryStore
	calls, batches atomic.Int64
	down           atomic.Bool // every decision fails as an unreachable store's
}

func (m *memStore) Reserve(ctx context.Context, req *quota.Request) (*quota.Reservation, error) {
	m.calls.Add(1)
	if req.Lead > 0 {
		m.batches.Add(1)
	}
	if m.down.Load() {
		return nil, fmt.Errorf("%w: unreachable", quota.ErrStore)
	}
	return m.MemoryStore.Reserve(ctx, req)
}

// redisCounted is a Redis store that counts its decisions.
type redisCounted struct {
	*redisstore.Store
	calls *atomic.Int64
}

func (r redisCounted) Reserve(ctx context.Context, req *quota.Request) (*quota.Reservation, error) {
	r.calls.Add(1)
	return r.Store.Reserve(ctx, req)
}

// aheadMember returns a Transport of the fleet on store, on clock.
func aheadMember(t *testing.T, yaml, host string, store quota.Store, clock quota.Clock) *throttle.Transport {
	t.Helper()
	tr, _ := e2eTransport(t, yaml, host, throttle.WithStore(store), throttle.WithClock(clock), throttle.WithStoreRetry(time.Hour))
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// aheadSend sends n GETs through tr at once and returns how many were
// sent (the others were refused by the throttle).
func aheadSend(t *testing.T, tr *throttle.Transport, url string, n int) int {
	t.Helper()
	var wg sync.WaitGroup
	var sent atomic.Int64
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", url, nil)
			resp, err := tr.RoundTrip(req)
			var le *throttle.LimitError
			switch {
			case err == nil:
				resp.Body.Close()
				sent.Add(1)
			case errors.As(err, &le):
			default:
				t.Errorf("RoundTrip: %v", err)
			}
		}()
	}
	wg.Wait()
	return int(sent.Load())
}

// gcraExceeds returns a description of the first span of arrivals that
// holds more than a GCRA of interval T and tolerance dvt admits (a
// burst of dvt/T, then one per T): for arrivals i..j sorted by time,
// (j-i+1)*T must be at most t_j - t_i + dvt. "" when none does.
func gcraExceeds(arrivals []throttletest.Arrival, T, dvt time.Duration) string {
	var at []time.Time
	for _, a := range arrivals {
		at = append(at, a.At)
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	if len(at) == 0 {
		return ""
	}
	// With x_i = i*T - t_i (t relative to the first), the span i..j
	// exceeds when x_(j+1) - x_i > dvt: keep the least x_i seen.
	least := time.Duration(1<<63 - 1)
	from := 0
	for j := range at {
		x := time.Duration(j)*T - at[j].Sub(at[0])
		if x < least {
			least, from = x, j
		}
		if over := x + T - least; over > dvt {
			return fmt.Sprintf("%d arrivals in the %v from %v: %v beyond the tolerance", j-from+1, at[j].Sub(at[from]), at[from], over-dvt)
		}
	}
	return ""
}

// TestAheadExact: four Transports take quota ahead against one limit,
// 200/s burst 40, on one store and one injected clock, through phases of
// overload (4× the limit), a light trickle and bursts. The vendor, which
// enforces the same limit exactly, throttles nothing, and what it saw
// never exceeds the limit over any span; the overload keeps the limit
// busy; and the busy phases cost far fewer store calls than requests.
func TestAheadExact(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"memory", "redis"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			clock := quotatest.NewClock(time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC))
			v := e2eVendor(t, throttletest.Options{Enforcer: throttletest.GCRA(200, time.Second, 40).Shared(), Clock: clock.Now})
			var calls atomic.Int64
			var members []*throttle.Transport
			var srv *redistest.Server
			if kind == "redis" {
				srv = redistest.Start(t)
			}
			shared := &memStore{MemoryStore: quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})}
			for range 4 {
				var st quota.Store = shared
				if kind == "redis" {
					// A process each: its own client and store.
					rs, err := redisstore.New(srv.Client(t), redisstore.Options{Clock: clock, Timeout: 5 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					st = redisCounted{Store: rs, calls: &calls}
				}
				members = append(members, aheadMember(t, aheadYAML, v.Host(), st, clock))
			}
			const step = 5 * time.Millisecond
			requests, sent := 0, 0
			var overloadSent int
			for s := 0; s < 600; s++ {
				var n int // per member this step
				switch {
				case s < 200: // 4 per 5ms: 800/s, 4× the limit
					n = 1
				case s < 400: // 1 per 50ms each: 80/s
					if s%10 == 0 {
						n = 1
					}
				default: // 5 at once every 100ms each
					if s%20 == 0 {
						n = 5
					}
				}
				var wg sync.WaitGroup
				var got atomic.Int64
				for _, m := range members {
					if n == 0 {
						continue
					}
					requests += n
					wg.Add(1)
					go func() {
						defer wg.Done()
						got.Add(int64(aheadSend(t, m, v.URL+"/v1/x", n)))
					}()
				}
				wg.Wait()
				sent += int(got.Load())
				if s < 200 {
					overloadSent += int(got.Load())
				}
				clock.Advance(step)
			}
			if kind == "memory" {
				calls.Store(shared.calls.Load())
			}
			served, throttled := v.Counts()
			t.Logf("%s: %d requests, %d sent, %d served, %d throttled; %d store decisions; %d sent in the overload's second",
				kind, requests, sent, served, throttled, calls.Load(), overloadSent)
			if throttled != 0 {
				t.Errorf("the vendor throttled %d requests, want none", throttled)
			}
			if msg := gcraExceeds(v.Arrivals(), 5*time.Millisecond, 200*time.Millisecond); msg != "" {
				t.Errorf("the fleet exceeded 200/s burst 40: %s", msg)
			}
			// The overload's second: the burst and a second of the rate,
			// less what the first batches' leads give up (at most a
			// tolerance's worth).
			if overloadSent < 200 {
				t.Errorf("%d sent in the overload's second, want at least the limit's 200", overloadSent)
			}
			if c := calls.Load(); c*2 > int64(requests) {
				t.Errorf("%d store decisions for %d requests: taking ahead saved too few", c, requests)
			}
		})
	}
}

// TestAheadKeyCoversRequest: a pool of quota taken ahead serves the
// requests of one stack, named by the request's fields that change a
// decision. A field added to quota.Request must be considered there
// (ahead.go, aheadKey): then add it to this list.
func TestAheadKeyCoversRequest(t *testing.T) {
	t.Parallel()
	known := map[string]string{
		"Tag": "in the key", "Items": "in the key, each item's limit, key and cost", "Pauses": "compared with the pool's",
		"Over": "in the key", "Cost": "in the key, through each item's cost", "MaxWait": "checked per request",
		"Lead": "set by the batch itself", "Class": "in the key",
		"Share":       "read only by fair limits, which never take quota ahead (quota.Request.Validate refuses a lead on one)",
		"Appointment": "read only by fair limits, as Share",
	}
	rt := reflect.TypeFor[quota.Request]()
	for i := range rt.NumField() {
		if f := rt.Field(i); known[f.Name] == "" {
			t.Errorf("quota.Request has a field %s that quota taken ahead does not know: a pool must not serve requests "+
				"that decide differently (a priority class, a fair share's tenant): add it to aheadKey in ahead.go, then here", f.Name)
		}
	}
}

// aheadOne is one Transport taking ahead on a shared memory store (as a
// fleet's member would on Redis) with an injected clock, and a vendor.
type aheadOne struct {
	tr    *throttle.Transport
	st    *memStore
	clock *quotatest.Clock
	v     *throttletest.Vendor
	url   string
}

func newAheadOne(t *testing.T, yaml string) *aheadOne {
	t.Helper()
	clock := quotatest.NewClock(time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC))
	v := e2eVendor(t, throttletest.Options{Clock: clock.Now})
	st := &memStore{MemoryStore: quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})}
	return &aheadOne{tr: aheadMember(t, yaml, v.Host(), st, clock), st: st, clock: clock, v: v, url: v.URL + "/v1/x"}
}

// drive sends one request every step, n times, waiting after each until
// the keepers have no batch asked for or in flight: on a busy machine a
// keeper can otherwise fall behind the test's clock, take its batch steps
// after the request that asked for it and leave slots whose places have
// passed by the time the test reads the schedule.
func (a *aheadOne) drive(t *testing.T, n int, step time.Duration) {
	t.Helper()
	for range n {
		if aheadSend(t, a.tr, a.url, 1) != 1 {
			t.Fatalf("a request within the limit was refused")
		}
		aheadSettled(t, a.tr, false)
		a.clock.Advance(step)
	}
}

// scheduled returns how far ahead of now the limit's schedule is taken
// (its tat), the limit being lim, vendor's "peak": read with a request
// of the whole burst that may not wait: refused unless the limit is
// idle, and then given back at once (a settle at 0 of the latest
// reservation), its retry time is tat + burst × T - tolerance = tat.
func (a *aheadOne) scheduled(t *testing.T, lim *quota.Limit) time.Duration {
	t.Helper()
	ctx := context.Background()
	r, err := a.st.MemoryStore.Reserve(ctx, &quota.Request{Tag: "vendor", Cost: lim.Capacity(), Items: []quota.Item{{Limit: lim, Key: "peak"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed {
		if err := r.Settle(ctx, []int64{0}); err != nil {
			t.Fatal(err)
		}
		return 0
	}
	return r.RetryAfter
}

// TestAheadQuietTakesNothing: a process whose demand expects fewer than
// two requests in a period takes nothing ahead: every request is decided
// by the store.
func TestAheadQuietTakesNothing(t *testing.T) {
	t.Parallel()
	a := newAheadOne(t, aheadYAML)
	a.drive(t, 20, 60*time.Millisecond) // 16/s: 1.6 per period
	if n := a.st.batches.Load(); n != 0 {
		t.Errorf("%d batches taken ahead by a quiet process, want none", n)
	}
	if n := a.st.calls.Load(); n != 20 {
		t.Errorf("%d store decisions for 20 requests, want 20", n)
	}
}

// TestAheadBusySavesCalls: a process at the limit's rate (200/s) takes
// batches of an eighth of the burst (5) and decides the rest locally.
func TestAheadBusySavesCalls(t *testing.T) {
	t.Parallel()
	a := newAheadOne(t, aheadYAML)
	a.drive(t, 200, 5*time.Millisecond)
	calls, batches := a.st.calls.Load(), a.st.batches.Load()
	t.Logf("200 requests: %d store decisions, %d of them batches", calls, batches)
	if calls > 50 {
		t.Errorf("%d store decisions for 200 requests, want about one per batch of 5", calls)
	}
	if served, throttled := a.v.Counts(); served != 200 || throttled != 0 {
		t.Errorf("vendor served %d and throttled %d, want 200 and 0", served, throttled)
	}
}

// TestAheadGivesBack: the slots a process took and did not use go back
// when it closes (and, without Close, once it has been idle for a
// period): the limit's schedule comes back down by them. What was used
// stays charged.
func TestAheadGivesBack(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"close", "idle"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			// 200/s against 1,000/s: a batch's slots are 1ms apart on
			// the schedule and used 5ms apart, so its lead (up to the
			// period) holds them well ahead of now; at the limit's own
			// rate they would lie within a few slots of now and pass
			// before the pool is idle: nothing to give back.
			a := newAheadOne(t, `
providers:
  vendor:
    hosts: ["HOST"]
    on_limit: fail
    on_store_error: fail_closed
    ahead: {period: 100ms}
    limits: [{name: peak, limit: 1000/s, burst: 400}]
`)
			lim := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 1000, Period: time.Second, Burst: 400}
			a.drive(t, 100, 5*time.Millisecond) // ends halfway through a batch
			if held := aheadSettled(t, a.tr, false); held == 0 {
				t.Fatal("the drive left no slot held")
			}
			before := a.scheduled(t, lim)
			t.Logf("after 100 requests the schedule is taken %v ahead", before)
			switch how {
			case "close":
				if err := a.tr.Close(); err != nil {
					t.Fatal(err)
				}
			default:
				// Half a period without a request: idle, while the
				// slots held are still ahead.
				a.clock.Advance(50 * time.Millisecond)
				before -= 50 * time.Millisecond
				aheadSettled(t, a.tr, true) // given back: the schedule says how much
			}
			after := a.scheduled(t, lim)
			t.Logf("schedule taken %v ahead before, %v after", before, after)
			if after > before-5*time.Millisecond {
				t.Errorf("nothing given back: the schedule is %v ahead, %v before", after, before)
			}
			// What is left is what the used slots occupy: the requests of
			// the last batch handed out, less a second of refill.
			if aheadSend(t, a.tr, a.url, 1) != 1 {
				t.Errorf("after giving back, a request was refused")
			}
		})
	}
}

// TestAheadPause: a pause heard by the process retires what it holds;
// its requests go to the store, which holds them back.
func TestAheadPause(t *testing.T) {
	t.Parallel()
	a := newAheadOne(t, aheadYAML)
	a.drive(t, 40, 5*time.Millisecond)
	if err := a.st.Pause(context.Background(), "vendor", "pause", time.Second); err != nil {
		t.Fatal(err)
	}
	calls := a.st.calls.Load()
	req, _ := http.NewRequest("GET", a.url, nil)
	_, err := a.tr.RoundTrip(req)
	var le *throttle.LimitError
	if !errors.As(err, &le) || le.Limit != "pause" {
		t.Fatalf("RoundTrip during a pause = %v, want a refusal by the pause", err)
	}
	if a.st.calls.Load() == calls {
		t.Errorf("the request was refused without the store: want the store to decide during a pause")
	}
}

// aheadSettled waits until tr's keepers have no batch asked for or in
// flight (and, with empty, hold nothing), and returns the slots its
// pools hold. A keeper that never settles fails the test after a minute
// of the real clock: no step waits on the test's clock.
func aheadSettled(t *testing.T, tr *throttle.Transport, empty bool) int64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		held, busy := throttle.AheadHeld(tr)
		if !busy && (!empty || held == 0) {
			return held
		}
		if time.Now().After(deadline) {
			t.Fatalf("the keepers did not settle: %d held, busy %v", held, busy)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAheadStoreDown: while the store cannot be reached, a process spends
// the slots it holds, and then follows on_store_error (here
// fail_closed): nothing beyond what the store granted goes out.
func TestAheadStoreDown(t *testing.T) {
	t.Parallel()
	a := newAheadOne(t, aheadYAML)
	a.drive(t, 100, 5*time.Millisecond)
	held := aheadSettled(t, a.tr, false)
	a.st.down.Store(true)
	sent := 0
	for i := 0; ; i++ {
		req, _ := http.NewRequest("GET", a.url, nil)
		resp, err := a.tr.RoundTrip(req)
		if err != nil {
			if !errors.Is(err, throttle.ErrStoreUnavailable) {
				t.Fatalf("request %d with the store down: %v, want ErrStoreUnavailable", i, err)
			}
			break
		}
		resp.Body.Close()
		sent++
		a.clock.Advance(5 * time.Millisecond)
	}
	t.Logf("%d requests sent on the %d slots held when the store went down", sent, held)
	if held == 0 || int64(sent) != held {
		t.Errorf("%d requests sent with the store down, want the %d slots held (and some held)", sent, held)
	}
	if served, throttled := a.v.Counts(); served != 100+sent || throttled != 0 {
		t.Errorf("vendor served %d and throttled %d, want %d and 0", served, throttled, 100+sent)
	}
}

// TestAheadNotTaken: taking ahead is off where it would be wrong or
// useless: the Transport's own memory store, a settled request, shadow
// mode; each request is then decided by the store as before.
func TestAheadNotTaken(t *testing.T) {
	t.Parallel()
	const shadow = `
providers:
  vendor:
    hosts: ["HOST"]
    mode: shadow
    ahead: {period: 100ms}
    limits: [{name: peak, limit: 200/s, burst: 40}]
`
	t.Run("shadow", func(t *testing.T) {
		a := newAheadOne(t, shadow)
		a.drive(t, 50, 5*time.Millisecond)
		if n := a.st.batches.Load(); n != 0 {
			t.Errorf("%d batches in shadow mode, want none", n)
		}
	})
	t.Run("settled", func(t *testing.T) {
		a := newAheadOne(t, aheadYAML)
		for range 50 {
			ctx := throttle.WithSettle(context.Background(), throttle.OpenAIUsage("peak"))
			req, _ := http.NewRequestWithContext(ctx, "GET", a.url, nil)
			resp, err := a.tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			a.clock.Advance(5 * time.Millisecond)
		}
		if n := a.st.batches.Load(); n != 0 {
			t.Errorf("%d batches for settled requests, want none", n)
		}
	})
	t.Run("own memory", func(t *testing.T) {
		clock := quotatest.NewClock(time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC))
		v := e2eVendor(t, throttletest.Options{Clock: clock.Now})
		tr, _ := e2eTransport(t, aheadYAML, v.Host(), throttle.WithClock(clock))
		for range 50 {
			if aheadSend(t, tr, v.URL+"/x", 1) != 1 {
				t.Fatal("refused")
			}
			clock.Advance(5 * time.Millisecond)
		}
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestAheadNoSpuriousRefusals: many goroutines of one process, on the
// real clock, against a limit far above their demand, fail fast: a
// batch that comes in while a request is deciding is never taken for
// slots to wait for, so nothing is refused.
func TestAheadNoSpuriousRefusals(t *testing.T) {
	t.Parallel()
	const yaml = `
providers:
  vendor:
    hosts: ["HOST"]
    on_limit: fail
    ahead: {period: 100ms}
    limits: [{name: peak, limit: 1000000/s, burst: 1000000000}]
`
	st := quota.NewMemoryStore(quota.MemoryOptions{})
	tr, _ := e2eTransport(t, yaml, "api.vendor.test", throttle.WithStore(st), throttle.WithBase(nopTransport{&http.Response{StatusCode: 200, Body: http.NoBody}}))
	t.Cleanup(func() { _ = tr.Close() })
	var refused atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", "https://api.vendor.test/v1/x", nil)
			for range 3000 {
				if _, err := tr.RoundTrip(req); err != nil {
					refused.Add(1)
					first.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	if n := refused.Load(); n > 0 {
		t.Errorf("%d of 48000 requests refused against a limit far above the demand, the first: %v", n, first.Load())
	}
}

// TestAheadBusySpellKeepsTheBurst: four processes, idle until now, start
// at once to ask for 1.6 times a limit of 200/s burst 200 (each 80/s,
// fail fast). Taking quota ahead must not give up the idle limit's burst
// at the spell's start: a batch's lead that reaches past the limit's
// schedule leaves places there that no request will use. After 1.2 s,
// what the limit's schedule has charged is, but for a few slots, what
// was sent plus what the pools hold (slots of theirs, spent next); the
// rest was given up. Before slow start (a first batch whose lead was
// sized on a demand not yet measured, up to the period), a spell gave up
// about 60 slots (300ms) here.
//
// On an injected clock, each step waits until the keepers have taken the
// batches asked for, so the run does not depend on the machine's speed.
func TestAheadBusySpellKeepsTheBurst(t *testing.T) {
	t.Parallel()
	const yaml = `
providers:
  vendor:
    hosts: ["HOST"]
    on_limit: fail
    on_store_error: fail_closed
    ahead: {period: 300ms}
    limits: [{name: peak, limit: 200/s, burst: 200}]
`
	lim := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 200, Period: time.Second, Burst: 200}
	for _, kind := range []string{"memory", "redis"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			start := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
			clock := quotatest.NewClock(start)
			v := e2eVendor(t, throttletest.Options{Enforcer: throttletest.GCRA(200, time.Second, 200).Shared(), Clock: clock.Now})
			var probe quota.Store = quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
			var srv *redistest.Server
			if kind == "redis" {
				srv = redistest.Start(t)
			}
			var members []*throttle.Transport
			for range 4 {
				st := probe
				if kind == "redis" {
					rs, err := redisstore.New(srv.Client(t), redisstore.Options{Clock: clock, Timeout: 5 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					st, probe = rs, rs
				}
				members = append(members, aheadMember(t, yaml, v.Host(), st, clock))
			}
			requests, sent := 0, 0
			for s := 0; s < 240; s++ { // 5ms steps
				var wg sync.WaitGroup
				var got atomic.Int64
				for m, tr := range members {
					if (s+m)%5 != 0 && (s+m)%5 != 2 { // two per 25ms: 80/s
						continue
					}
					requests++
					wg.Add(1)
					go func() {
						defer wg.Done()
						got.Add(int64(aheadSend(t, tr, v.URL+"/v1/x", 1)))
					}()
				}
				wg.Wait()
				sent += int(got.Load())
				for _, tr := range members {
					aheadSettled(t, tr, false)
				}
				if s < 239 {
					clock.Advance(5 * time.Millisecond)
				}
			}
			var held int64
			for _, tr := range members {
				held += aheadSettled(t, tr, false)
			}
			// The schedule's end: a request of the whole burst that may
			// not wait is refused until it (tolerance = burst × 5ms), or
			// allowed from an idle limit (and given back).
			ctx := context.Background()
			r, err := probe.Reserve(ctx, &quota.Request{Tag: "vendor", Cost: 200, Items: []quota.Item{{Limit: lim, Key: "peak"}}})
			if err != nil {
				t.Fatal(err)
			}
			reach := clock.Now().Add(r.RetryAfter)
			if r.Allowed {
				_ = r.Settle(ctx, []int64{0})
				reach = clock.Now()
			}
			charged := int64(reach.Sub(start) / (5 * time.Millisecond))
			givenUp := charged - int64(sent) - held
			served, throttled := v.Counts()
			t.Logf("%s: %d requests, %d sent, %d served, %d throttled; %d slots held; the schedule charged %d: %d given up",
				kind, requests, sent, served, throttled, held, charged, givenUp)
			if throttled != 0 {
				t.Errorf("the vendor throttled %d requests, want none", throttled)
			}
			if msg := gcraExceeds(v.Arrivals(), 5*time.Millisecond, time.Second); msg != "" {
				t.Errorf("the fleet exceeded 200/s burst 200: %s", msg)
			}
			if givenUp > 10 {
				t.Errorf("the spell gave up %d slots of the idle limit's burst (charged %d, sent %d, held %d), want at most 10 (50ms)",
					givenUp, charged, sent, held)
			}
		})
	}
}
