package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// deferrals records the business of every deferral the transport
// reports, by the request's path.
type deferrals struct {
	mu sync.Mutex
	n  int
}

func (d *deferrals) Observe(_ context.Context, e throttle.Event) {
	if e.Kind == throttle.Deferred {
		d.mu.Lock()
		d.n++
		d.mu.Unlock()
	}
}

func (d *deferrals) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// TestFairShareByBusinessHeader: through the proxy, on a stepped clock
// and the memory store, Throttle-Business names the tenant of a fair
// limit. A heavy tenant's 40 requests queue on their appointments inside
// the proxy while a light tenant's request, sent once the limit is
// saturated, is answered within the horizon and its own lane's interval
// (300ms of the stepped clock at 10/s burst 10 with two tenants); every
// request is answered 200 in the end, and the vendor never sees a
// Throttle-* header.
func TestFairShareByBusinessHeader(t *testing.T) {
	t.Parallel()
	clock := quotatest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	obs := &deferrals{}
	s := start(t, "    max_wait: 30s\n    limits: [{name: account, limit: 10/s burst 10, fair: tenant}]\n", nil,
		Options{Throttle: []throttle.Option{
			throttle.WithClock(clock), throttle.WithObserver(obs),
			throttle.WithStore(quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})),
		}})
	var pending atomic.Int64
	var wg sync.WaitGroup
	statuses := make(chan int, 64)
	send := func(business string) {
		pending.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pending.Add(-1)
			resp, _ := s.do("GET", s.url("/"+business), nil, "Throttle-Business", business)
			statuses <- resp.StatusCode
		}()
	}
	settle := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); int64(clock.Timers()) != pending.Load(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d requests pending, %d waiting on the clock", pending.Load(), clock.Timers())
			}
		}
	}
	step := func() {
		clock.Advance(100 * time.Millisecond)
		settle()
	}
	for i := 0; i < 40; i++ {
		send("heavy")
		settle()
	}
	if n := obs.count(); n < 20 {
		t.Fatalf("%d of the heavy tenant's 40 requests deferred, want most", n)
	}
	for i := 0; i < 10; i++ { // a second: the limit saturated by the heavy tenant's appointments
		step()
	}
	before := len(s.vendorSaw())
	send("light")
	settle()
	light := func() bool {
		for _, r := range s.vendorSaw()[before:] {
			if r.URL.Path == "/light" {
				return true
			}
		}
		return false
	}
	for i := 0; i < 3 && !light(); i++ {
		step()
	}
	if !light() {
		t.Fatalf("the light tenant's request was not sent within 300ms of the stepped clock (%d deferrals)", obs.count())
	}
	for pending.Load() > 0 {
		step()
	}
	wg.Wait()
	close(statuses)
	for st := range statuses {
		if st != 200 {
			t.Errorf("a request answered %d, want 200", st)
		}
	}
	for _, r := range s.vendorSaw() {
		for name := range r.Header {
			if isThrottleHeader(name) {
				t.Errorf("the vendor got %s", name)
			}
		}
	}
}
