package throttle

import (
	"context"
	"net/http"
	"time"

	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// This file reconciles the store with the vendor's own counters, read on
// every response of a provider (or route) with a sync field
// (docs/decisions.md, "Vendor counters"). Per response it costs one
// backoff.ReadCounters and, only when the vendor reports less than the
// decision believed, one store call; a response that says a counter is
// spent until a reset pauses the scope until then, as a 429 would.

// syncTimeout bounds the store calls a response makes: the request's own
// context may end as soon as the caller has the response.
const syncTimeout = 2 * time.Second

// syncVendor reads resp's counters per res.Sync and applies them: it
// drains the reservation's limits to the vendor's figures, and pauses the
// scope when a counter the configuration maps says none remain until a
// reset. That holds for a throttled response too: its Retry-After may ask
// for a retry in a second while the counter's window ends much later, and
// every retry before then is another 429 (a pause never shortens a longer
// one, so the longer of the two holds). rsv is the request's reservation,
// nil when the store did not decide it.
func (t *Transport) syncVendor(ctx context.Context, resp *http.Response, res *providers.Resolution, rsv *quota.Reservation) {
	sc := res.Sync
	if sc == nil {
		return
	}
	readings, _ := backoff.ReadCounters(resp, sc.Format, t.clock.Now())
	if len(readings) == 0 {
		return
	}
	p := res.Provider
	var obs []quota.Observed
	var hold time.Duration
	for _, rd := range readings {
		name, ok := sc.Counters[rd.Counter]
		if !ok || !rd.HasRemaining {
			continue
		}
		if rd.Remaining == 0 && rd.HasReset {
			hold = max(hold, rd.Reset)
		}
		if rsv == nil || !rsv.Allowed {
			continue
		}
		i := itemNamed(res.Request.Items, name)
		if i < 0 || i >= len(rsv.Limits) {
			continue // not in this request's stack
		}
		if r, ok := ourRemaining(rd, res.Request.Items[i].Limit.Capacity()); ok && r < rsv.Limits[i].Remaining {
			obs = append(obs, quota.Observed{Item: i, Remaining: r})
		}
	}
	if len(obs) == 0 && hold <= 0 {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), syncTimeout)
	defer cancel()
	if len(obs) > 0 {
		t.failover.sync(sctx, p, rsv, obs)
	}
	if d := capDelay(hold, p.Signals.MaxDelay); d > 0 && res.Pause != "" && res.Request.Tag != "" {
		if t.failover.pause(sctx, p, res.Request.Tag, res.Pause, d) {
			t.observe(ctx, Event{Kind: Paused, Provider: p.Name, Limit: "pause", Wait: d, Status: resp.StatusCode})
		}
	}
}

// ourRemaining maps a vendor's counter onto a limit of capacity c: what
// the limit may still admit at once. It maps on what the vendor says is
// used, c - (limit - remaining), when the reading gives a limit, so that
// the headroom between c and the vendor's limit is kept; otherwise it is
// the vendor's remaining, at most c. ok is false when the reading says
// nothing to drain to: no remaining, or a reset already due (the counter
// is full again, whatever it reads).
func ourRemaining(rd backoff.Reading, c int64) (int64, bool) {
	if !rd.HasRemaining || rd.HasReset && rd.Reset <= 0 {
		return 0, false
	}
	if rd.HasLimit && rd.Limit > 0 {
		return max(c-(rd.Limit-rd.Remaining), 0), true
	}
	return max(min(rd.Remaining, c), 0), true
}

// capDelay caps a vendor's hold at the provider's max_delay (Signals:
// zero means backoff.DefaultMaxDelay, negative that the vendor's delays
// are not trusted).
func capDelay(d, maxDelay time.Duration) time.Duration {
	switch {
	case maxDelay < 0:
		return 0
	case maxDelay == 0:
		maxDelay = backoff.DefaultMaxDelay
	}
	return min(d, maxDelay)
}

// itemNamed returns the index of the item whose limit is named name, or
// -1.
func itemNamed(items []quota.Item, name string) int {
	for i := range items {
		if items[i].Limit.Name == name {
			return i
		}
	}
	return -1
}

// sync applies obs to rsv in the store, unless the store rests after a
// failure; a failure of the store starts a rest, as a decision's does.
func (f *failover) sync(ctx context.Context, p *providers.Provider, rsv *quota.Reservation, obs []quota.Observed) {
	probe, ok := f.admit()
	if !ok {
		return
	}
	f.settle(ctx, p, probe, rsv.Sync(ctx, obs))
}
