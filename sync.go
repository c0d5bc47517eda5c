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
	var hold time.Duration
	for _, rd := range readings {
		if _, ok := sc.Counters[rd.Counter]; ok && rd.HasRemaining && rd.Remaining == 0 && rd.HasReset {
			hold = max(hold, rd.Reset)
		}
	}
	var obs []quota.Observed
	if rsv != nil && rsv.Allowed {
		for _, o := range mapCounters(readings, res, rsv.Limits) {
			drain := !o.LimitOnly && o.Item < len(rsv.Limits) && o.Remaining < rsv.Limits[o.Item].Remaining
			if drain || o.Limit != 0 {
				o.LimitOnly = !drain
				obs = append(obs, o)
			}
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

// mapCounters maps the readings onto res's stack per res.Sync: for each
// reading of a counter the configuration maps to a limit of the stack,
// the limit's index in res.Request.Items and what it may still admit at
// once (ourRemaining). For a learning limit (package quota's doc,
// "Learning") whose decision (decided, the reservation's statuses) ran
// at another rate than the one the reading states, the stated limit too
// (Observed.Limit; LimitOnly when the reading has nothing to drain to):
// the store records it only when it changes what decisions run at. A
// counter mapped to a limit not in this request's stack, or a reading
// with nothing to drain to nor to learn, is left out.
func mapCounters(readings []backoff.Reading, res *providers.Resolution, decided []quota.Status) []quota.Observed {
	var obs []quota.Observed
	for _, rd := range readings {
		name, ok := res.Sync.Counters[rd.Counter]
		if !ok {
			continue
		}
		i := itemNamed(res.Request.Items, name)
		if i < 0 {
			continue // not in this request's stack
		}
		lim := res.Request.Items[i].Limit
		o := quota.Observed{Item: i}
		if stated, ok := statedLimit(rd, lim, res.Provider); ok {
			lim = lim.Learned(stated) // the vendor's remaining counts in the bucket it states
			if i < len(decided) && lim.Rate != decided[i].Rate {
				o.Limit = stated
			}
		}
		r, ok := ourRemaining(rd, lim, res.Provider)
		if !ok && o.Limit == 0 {
			continue
		}
		o.Remaining, o.LimitOnly = r, !ok
		obs = append(obs, o)
	}
	return obs
}

// statedLimit returns the limit the vendor's counter rd states for lim,
// a learning limit of provider p, in lim's units: its limit with p's
// headroom applied. ok is false when lim does not learn, or rd states no
// limit (none, or 0, which allows nothing and is no plan) or one over
// another period than lim's. A figure out of lim's bounds is clamped by
// the store (quota.Limit.LearnBounds).
func statedLimit(rd backoff.Reading, lim *quota.Limit, p *providers.Provider) (int64, bool) {
	if !lim.Learn || !rd.HasLimit || rd.Limit <= 0 || rd.Window != 0 && rd.Window != lim.Period {
		return 0, false
	}
	return p.Published(rd.Limit), true
}

// ourRemaining maps a vendor's counter onto lim, a limit of provider p:
// what lim may still admit at once (docs/decisions.md, "Sync: used only
// when the vendor's bucket is the limit's"). When the counter is the
// bucket lim models (sameBucket), it maps on what the vendor says is
// used, capacity - (limit - remaining), which keeps the headroom between
// the capacity and the vendor's limit. Otherwise (a window of L modelled
// as a GCRA whose burst is far below L, a vendor limit the configuration
// does not know) it is the vendor's remaining, at most the capacity:
// draining the burst only once the vendor has less left than it. ok is
// false when the reading says nothing to drain to: no remaining, or a
// reset already due (the counter is full again, whatever it reads).
func ourRemaining(rd backoff.Reading, lim *quota.Limit, p *providers.Provider) (int64, bool) {
	if !rd.HasRemaining || rd.HasReset && rd.Reset <= 0 {
		return 0, false
	}
	c := lim.Capacity()
	if sameBucket(rd, lim, p) {
		return max(c-(rd.Limit-rd.Remaining), 0), true
	}
	return max(min(rd.Remaining, c), 0), true
}

// sameBucket reports whether the vendor's counter rd is the bucket lim
// models: its limit, with p's headroom applied, is lim's capacity, and
// the window it states, if any, is lim's period.
func sameBucket(rd backoff.Reading, lim *quota.Limit, p *providers.Provider) bool {
	if !rd.HasLimit || rd.Limit <= 0 || p.Published(rd.Limit) != lim.Capacity() {
		return false
	}
	return rd.Window == 0 || rd.Window == period(lim)
}

// period is the span lim's capacity is counted over: a GCRA's period, a
// calendar window's nominal length (zero for a month, which no counter
// states).
func period(lim *quota.Limit) time.Duration {
	if lim.Kind != quota.Window {
		return lim.Period
	}
	switch lim.Calendar.Unit {
	case quota.Hour:
		return time.Hour
	case quota.Day:
		return 24 * time.Hour
	}
	return 0
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
