package throttle_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// fairYAML is a vendor whose account-wide 10/s (burst 10: one interval T
// is 100ms, and so is the horizon H) is shared fairly by business.
const fairYAML = `
providers:
  vendor:
    hosts: [api.vendor.test]
    max_wait: 60s
    limits: [{name: account, limit: 10/s burst 10, fair: tenant}]
`

// whoKey marks a request's context with a name the fairRecorder reads.
type whoKey struct{}

// fairEvent is one event of the request called who.
type fairEvent struct {
	who string
	throttle.Event
}

// fairRecorder records events with the name of their request.
type fairRecorder struct {
	mu     sync.Mutex
	events []fairEvent
}

func (r *fairRecorder) Observe(ctx context.Context, e throttle.Event) {
	who, _ := ctx.Value(whoKey{}).(string)
	e.Items, e.Statuses = nil, nil
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fairEvent{who, e})
}

// of returns the events of the request called who.
func (r *fairRecorder) of(who string) []throttle.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []throttle.Event
	for _, e := range r.events {
		if e.who == who {
			out = append(out, e.Event)
		}
	}
	return out
}

// count returns how many events of kind were recorded.
func (r *fairRecorder) count(kind throttle.EventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// fairFleet is one transport on the memory store and a stepped clock,
// whose vendor records when each request arrived, by its path.
type fairFleet struct {
	t     *testing.T
	clock *quotatest.Clock
	rt    *throttle.Transport
	mem   *quota.MemoryStore
	obs   *fairRecorder

	mu   sync.Mutex
	sent map[string]time.Time // path -> the clock's time it was sent at

	pending atomic.Int64 // requests started and not returned
	wg      sync.WaitGroup

	// gate holds the requests whose path starts with "hold" at the
	// vendor until it is closed; blocked counts them. leases says the
	// stack has a concurrency cap: a held request renews its lease on
	// the clock.
	gate    chan struct{}
	blocked atomic.Int64
	leases  bool
}

func newFairFleet(t *testing.T, yaml string) *fairFleet {
	t.Helper()
	cfg, err := providers.Load("fair.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	f := &fairFleet{t: t, clock: quotatest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)),
		obs: &fairRecorder{}, sent: map[string]time.Time{}, gate: make(chan struct{})}
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		f.mu.Lock()
		f.sent[strings.TrimPrefix(req.URL.Path, "/")] = f.clock.Now()
		f.mu.Unlock()
		if strings.HasPrefix(req.URL.Path, "/hold") {
			f.blocked.Add(1)
			<-f.gate
			f.blocked.Add(-1)
		}
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
	})
	f.mem = quota.NewMemoryStore(quota.MemoryOptions{Clock: f.clock})
	f.rt, err = throttle.New(throttle.WithRegistry(providers.NewRegistry(cfg)), throttle.WithBase(base),
		throttle.WithStore(f.mem),
		throttle.WithClock(f.clock), throttle.WithObserver(f.obs))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// do sends business's request named who (its path) and returns its error.
func (f *fairFleet) do(ctx context.Context, business, who string) error {
	ctx = context.WithValue(throttle.WithBusiness(ctx, business), whoKey{}, who)
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://api.vendor.test/"+who, nil)
	resp, err := f.rt.RoundTrip(req)
	if resp != nil {
		resp.Body.Close()
	}
	return err
}

// start sends the request in a goroutine and returns once it has gone,
// failed or is waiting on the clock: its decisions are taken, in the
// order start was called. errs gets its error.
func (f *fairFleet) start(ctx context.Context, business, who string, errs chan<- error) {
	f.pending.Add(1)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		err := f.do(ctx, business, who)
		f.pending.Add(-1)
		if errs != nil {
			errs <- err
		}
	}()
	f.settle()
}

// settle waits until every request in flight has returned, waits on the
// clock or is held at the vendor.
func (f *fairFleet) settle() {
	f.t.Helper()
	waitFor(f.t, "the requests in flight to wait on the clock", func() bool {
		held := f.blocked.Load()
		if f.leases {
			held = 0 // each held request's lease renewal waits on the clock
		}
		return int64(f.clock.Timers()) == f.pending.Load()-held
	})
}

// step advances the clock by d, one interval of the limit at a time, and
// lets the requests it wakes take their decisions before the next.
func (f *fairFleet) step(d time.Duration) {
	for end := f.clock.Now().Add(d); f.clock.Now().Before(end); {
		f.clock.Advance(100 * time.Millisecond)
		f.settle()
		if f.leases {
			f.quiet()
		}
	}
}

// quiet waits until no event has been reported for 5ms of real time: a
// release wakes a waiter for a lease without the clock (its timer stays
// set until it has woken), so timers alone do not say it is done.
func (f *fairFleet) quiet() {
	for n := -1; ; {
		f.obs.mu.Lock()
		now := len(f.obs.events)
		f.obs.mu.Unlock()
		if now == n {
			f.settle()
			return
		}
		n = now
		time.Sleep(5 * time.Millisecond)
	}
}

// drain steps the clock until every request has returned: at most two
// minutes of it (every max wait is one).
func (f *fairFleet) drain() {
	f.t.Helper()
	for end := f.clock.Now().Add(2 * time.Minute); f.pending.Load() > 0; f.step(100 * time.Millisecond) {
		if f.clock.Now().After(end) {
			f.t.Fatalf("%d requests still pending after two minutes of the clock", f.pending.Load())
		}
	}
	f.wg.Wait()
}

// sentAt reports when the request named who was sent.
func (f *fairFleet) sentAt(who string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.sent[who]
	return at, ok
}

// TestFairAppointmentIsKept: a tenant over its share of a fair limit is
// deferred to an appointment in its lane, waits for it without a second
// store call, and is then admitted at once by a second decision (Calls 2);
// a plain request of the same tenant is decided once.
func TestFairAppointmentIsKept(t *testing.T) {
	t.Parallel()
	f := newFairFleet(t, fairYAML)
	ctx := context.Background()
	for i := 0; i < 10; i++ { // the burst, at once
		if err := f.do(ctx, "heavy", "burst"); err != nil {
			t.Fatal(err)
		}
	}
	if ev := f.obs.of("burst"); len(ev) != 10 || ev[0].Kind != throttle.Decided || ev[0].Calls != 1 || ev[0].Limit != "" {
		t.Fatalf("a request of the burst: %+v, want one Decided with Calls 1", ev)
	}
	errs := make(chan error, 8)
	// Within its share near now (its lane's burst is the whole limit's):
	// a slot one interval ahead. Then over its share: deferred.
	f.start(ctx, "heavy", "slot", errs)
	f.start(ctx, "heavy", "appointment", errs)
	ev := f.obs.of("appointment")
	if len(ev) != 1 || ev[0].Kind != throttle.Deferred || ev[0].Limit != "account" || ev[0].Wait <= 0 || ev[0].Calls != 1 || ev[0].Shadow {
		t.Fatalf("the request over its share: %+v, want one Deferred by account with a wait", ev)
	}
	appointment := ev[0].Wait
	start := f.clock.Now()
	f.step(appointment - 100*time.Millisecond)
	if _, ok := f.sentAt("appointment"); ok || len(f.obs.of("appointment")) != 1 {
		t.Fatalf("sent or asked again before its appointment (%v): %+v", appointment, f.obs.of("appointment"))
	}
	f.step(100 * time.Millisecond)
	f.wg.Wait()
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	at, ok := f.sentAt("appointment")
	if !ok || at.Sub(start) != appointment {
		t.Errorf("sent at %v after its deferral (%v), want at its appointment %v", at.Sub(start), ok, appointment)
	}
	ev = f.obs.of("appointment")
	if len(ev) != 2 || ev[1].Kind != throttle.Decided || ev[1].Wait != 0 || ev[1].Calls != 2 {
		t.Errorf("at its appointment: %+v, want Decided at once with Calls 2", ev[1:])
	}
}

// TestFairLightTenantNotDelayed: a tenant that sends one request while
// another keeps 40 waiters deferred on the limit goes within the horizon
// and its own lane interval (package quota's "Fair share": H + T·W/w =
// 300ms here), where the heavy tenant's last waiter goes seconds later.
func TestFairLightTenantNotDelayed(t *testing.T) {
	t.Parallel()
	f := newFairFleet(t, fairYAML)
	ctx := context.Background()
	errs := make(chan error, 64)
	for i := 0; i < 50; i++ {
		f.start(ctx, "heavy", "heavy-"+strconv.Itoa(i), errs)
	}
	if n := f.obs.count(throttle.Deferred); n < 30 {
		t.Fatalf("%d of 50 heavy requests deferred, want the most of them", n)
	}
	f.step(time.Second) // the limit saturated by the heavy tenant's appointments
	start := f.clock.Now()
	f.start(ctx, "light", "light", errs)
	for i := 0; i < 3; i++ {
		if _, ok := f.sentAt("light"); ok {
			break
		}
		f.step(100 * time.Millisecond)
	}
	at, ok := f.sentAt("light")
	if !ok || at.Sub(start) > 300*time.Millisecond {
		t.Fatalf("the light tenant's request: sent %v, after %v; want within 300ms; its events %+v", ok, at.Sub(start), f.obs.of("light"))
	}
	f.drain()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	last, _ := f.sentAt("heavy-49")
	if last.Sub(start) < time.Second {
		t.Errorf("the heavy tenant's last waiter went %v after the light request: the test did not load the limit", last.Sub(start))
	}
	t.Logf("light went after %v; the heavy tenant's last waiter after %v", at.Sub(start), last.Sub(start))
}

// TestFairAppointmentCancelled: a request whose context ends while it
// waits for its appointment returns the context's error at once,
// reports Cancelled by the fair limit, leaves no timer behind and is
// never sent; the tenant's next requests still go.
func TestFairAppointmentCancelled(t *testing.T) {
	t.Parallel()
	f := newFairFleet(t, fairYAML)
	for i := 0; i < 12; i++ {
		f.start(context.Background(), "heavy", "before", nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	f.start(ctx, "heavy", "cancelled", errs)
	if ev := f.obs.of("cancelled"); len(ev) != 1 || ev[0].Kind != throttle.Deferred {
		t.Fatalf("events %+v, want a deferral", ev)
	}
	timers := f.clock.Timers()
	cancel()
	err := <-errs
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "appointment") {
		t.Errorf("err = %v, want context.Canceled while waiting for its appointment", err)
	}
	ev := f.obs.of("cancelled")
	if last := ev[len(ev)-1]; last.Kind != throttle.Cancelled || last.Limit != "account" {
		t.Errorf("last event %+v, want Cancelled by account", last)
	}
	if got := f.clock.Timers(); got != timers-1 {
		t.Errorf("%d timers after the cancel, want %d: its timer stopped", got, timers-1)
	}
	f.drain()
	if _, ok := f.sentAt("cancelled"); ok {
		t.Error("the cancelled request was sent")
	}
	if err := f.do(context.Background(), "heavy", "after"); err != nil {
		t.Errorf("the tenant's next request: %v", err)
	}
}

// TestFairOnLimitFail: with on_limit: fail nothing waits, fair or not: a
// request the tenant's share cannot admit at once is refused with a
// *LimitError, never deferred, and no timer is ever started; a light
// tenant asking for its share alongside a heavy one that retries at once
// gets most of what it asks.
func TestFairOnLimitFail(t *testing.T) {
	t.Parallel()
	f := newFairFleet(t, strings.Replace(fairYAML, "max_wait: 60s", "on_limit: fail", 1))
	ctx := context.Background()
	var light, lightOK, heavyOK int
	for tick := 0; tick < 100; tick++ {
		for i := 0; i < 5; i++ {
			err := f.do(ctx, "heavy", "heavy")
			var le *throttle.LimitError
			switch {
			case err == nil:
				heavyOK++
			case !errors.As(err, &le):
				t.Fatalf("heavy: %v, want a *LimitError", err)
			}
		}
		if tick%2 == 0 { // 5/s: its share of 10/s beside one other tenant
			light++
			if f.do(ctx, "light", "light") == nil {
				lightOK++
			}
		}
		if n := f.clock.Timers(); n != 0 {
			t.Fatalf("%d timers started with on_limit: fail", n)
		}
		f.clock.Advance(100 * time.Millisecond)
	}
	for _, e := range append(f.obs.of("heavy"), f.obs.of("light")...) {
		if e.Kind == throttle.Deferred || e.Kind == throttle.Waited || e.Wait > 0 && e.Kind == throttle.Decided {
			t.Fatalf("event %+v with on_limit: fail", e)
		}
	}
	t.Logf("light: %d of %d admitted; heavy: %d of 500", lightOK, light, heavyOK)
	if lightOK < light*9/10 {
		t.Errorf("light: %d of %d admitted, want at least 90%% (it asks for its share)", lightOK, light)
	}
}

// TestFairShadow: in shadow mode a deferral is reported (Shadow set) and
// the request is sent at once.
func TestFairShadow(t *testing.T) {
	t.Parallel()
	f := newFairFleet(t, strings.Replace(fairYAML, "max_wait: 60s", "max_wait: 60s\n    mode: shadow", 1))
	for i := 0; i < 30; i++ {
		if err := f.do(context.Background(), "heavy", "r-"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if f.clock.Timers() != 0 {
		t.Errorf("a request waited in shadow mode")
	}
	var deferred int
	for i := 0; i < 30; i++ {
		for _, e := range f.obs.of("r-" + strconv.Itoa(i)) {
			if e.Kind == throttle.Deferred {
				deferred++
				if !e.Shadow || e.Wait <= 0 {
					t.Errorf("shadow deferral %+v", e)
				}
			}
		}
		if _, ok := f.sentAt("r-" + strconv.Itoa(i)); !ok {
			t.Errorf("r-%d not sent", i)
		}
	}
	if deferred == 0 {
		t.Error("no deferral reported")
	}
}

// BenchmarkTransportFair is BenchmarkTransportMemoryStore's request with
// its provider-wide limits shared fairly by business (never contended):
// what naming the tenant and keeping its lane and its place among the
// active tenants cost a request.
func BenchmarkTransportFair(b *testing.B) {
	yaml := strings.Replace(benchYAML, "{name: peak, limit: 1000000/s, burst: 1000000000000}", "{name: peak, limit: 1000000/s, burst: 1000000000, fair: tenant}", 1)
	cfg, err := providers.Load("bench.yaml", []byte(yaml))
	if err != nil {
		b.Fatal(err)
	}
	base := nopTransport{&http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}}
	rt, err := throttle.New(throttle.WithRegistry(providers.NewRegistry(cfg)), throttle.WithBase(base))
	if err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(throttle.WithBusiness(context.Background(), "acme"), "GET", "https://api.vendor.test/v1/items", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := rt.RoundTrip(req); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFairWithConcurrencyCap: a stack with a fair limit and a
// concurrency cap: a request admitted at its appointment takes its lease
// then, and every lease taken is given back.
func TestFairWithConcurrencyCap(t *testing.T) {
	t.Parallel()
	f := newFairFleet(t, strings.Replace(fairYAML, "limits: [{name: account, limit: 10/s burst 10, fair: tenant}]",
		"limits: [{name: account, limit: 10/s burst 10, fair: tenant}, {name: streams, limit: 50 concurrent}]", 1))
	errs := make(chan error, 30)
	for i := 0; i < 30; i++ {
		f.start(context.Background(), "heavy", "r-"+strconv.Itoa(i), errs)
	}
	if f.obs.count(throttle.Deferred) == 0 {
		t.Fatal("nothing deferred")
	}
	f.drain()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if leased, released := f.obs.count(throttle.Leased), f.obs.count(throttle.Released); leased != 30 || released != 30 {
		t.Errorf("%d leased, %d released, want 30 each", leased, released)
	}
}

// TestFairWithFullConcurrencyCap: a fair limit beside a cap of three
// requests in flight, all held by another tenant's requests the vendor
// has not answered: the heavy tenant's requests wait for a lease first
// (a full cap refuses before the fair limit defers), and, woken as the
// leases come back, those over the tenant's share then wait for their
// appointments; all go, and every lease comes back.
func TestFairWithFullConcurrencyCap(t *testing.T) {
	t.Parallel()
	f := newFairFleet(t, strings.Replace(fairYAML, "limits: [{name: account, limit: 10/s burst 10, fair: tenant}]",
		"limits: [{name: account, limit: 10/s burst 10, fair: tenant}, {name: streams, limit: 3 concurrent}]", 1))
	f.leases = true
	errs := make(chan error, 20)
	for _, h := range []string{"hold-a", "hold-b", "hold-c"} {
		f.start(context.Background(), "other", h, errs)
	}
	for i := 0; i < 13; i++ {
		f.start(context.Background(), "heavy", "r-"+strconv.Itoa(i), errs)
	}
	if n := f.obs.count(throttle.Deferred); n != 0 {
		t.Fatalf("%d deferred while the cap was full, want none", n)
	}
	close(f.gate)
	waitFor(t, "the held requests to give their leases back", func() bool { return f.obs.count(throttle.Released) >= 3 })
	f.quiet()
	f.drain()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for i := 0; i < 13; i++ {
		if _, ok := f.sentAt("r-" + strconv.Itoa(i)); !ok {
			t.Errorf("r-%d not sent", i)
		}
	}
	if leased, released := f.obs.count(throttle.Leased), f.obs.count(throttle.Released); leased != 16 || released != 16 {
		t.Errorf("%d leased, %d released, want 16 each", leased, released)
	}
	if f.obs.count(throttle.Deferred) == 0 {
		t.Error("nothing deferred once the leases came back")
	}
}

// TestFairAppointmentAfterAPause: a pause set while a request waits for
// its appointment holds it back: at its appointment it is deferred
// again, to the pause's end, and sent then, not inside the pause.
func TestFairAppointmentAfterAPause(t *testing.T) {
	t.Parallel()
	f := newFairFleet(t, fairYAML)
	errs := make(chan error, 16)
	for i := 0; i < 12; i++ {
		f.start(context.Background(), "heavy", "before-"+strconv.Itoa(i), errs)
	}
	f.start(context.Background(), "heavy", "paused", errs)
	ev := f.obs.of("paused")
	if len(ev) != 1 || ev[0].Kind != throttle.Deferred {
		t.Fatalf("events %+v, want a deferral", ev)
	}
	start := f.clock.Now()
	if err := f.mem.Pause(context.Background(), "vendor", "pause", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	f.drain()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	at, ok := f.sentAt("paused")
	if !ok || at.Sub(start) < 2*time.Second {
		t.Errorf("sent %v, %v after the pause was set, want after its end (2s)", ok, at.Sub(start))
	}
	ev = f.obs.of("paused")
	// Back at its appointment (300ms), deferred again past the pause's
	// end (1.7s more at least), then decided.
	if len(ev) < 3 || ev[1].Kind != throttle.Deferred || ev[1].Wait < 1700*time.Millisecond || ev[len(ev)-1].Kind != throttle.Decided {
		t.Errorf("events %+v, want deferred again past the pause, then decided", ev)
	}
}
