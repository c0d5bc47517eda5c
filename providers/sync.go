package providers

import (
	"net/http"
	"time"

	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/quota"
)

// This file maps a vendor's counters onto the limits of a request's stack
// (docs/decisions.md, "Vendor counters"): the sync field says which
// counter is which limit, and the limit says what the vendor's figures
// mean in its own units. backoff reads the figures; the transport applies
// what they ask of the store.

// A CounterSync is what a response's vendor counters ask of the store.
type CounterSync struct {
	// Observed are the limits of the stack to drain to the vendor's
	// figures, or whose stated limit to learn (quota.Reservation.Sync):
	// those the decision believed had more left, or ran at another rate.
	Observed []quota.Observed
	// Hold is how long to pause the request's scope, as a 429 would: a
	// counter the configuration maps says none remain until a reset,
	// capped at the provider's max_delay. Zero pauses nothing.
	Hold time.Duration
}

// ReadCounters reads resp's counters at now as r.Sync says (nothing when
// r has no Sync) and maps them onto r's stack. decided are the statuses
// of the request's decision when the store admitted it
// (quota.Reservation.Limits), nil otherwise: only an admitted request's
// reservation has limits to drain. The hold holds for a throttled
// response too: its Retry-After may ask for a retry in a second while the
// counter's window ends much later, and every retry before then is
// another 429 (a pause never shortens a longer one, so the longer of the
// two holds).
func (r *Resolution) ReadCounters(resp *http.Response, now time.Time, decided []quota.Status) CounterSync {
	var cs CounterSync
	if r.Sync == nil {
		return cs
	}
	readings, _ := backoff.ReadCounters(resp, r.Sync.Format, now)
	if len(readings) == 0 {
		return cs
	}
	var hold time.Duration
	for _, rd := range readings {
		if _, ok := r.Sync.Counters[rd.Counter]; ok && rd.HasRemaining && rd.Remaining == 0 && rd.HasReset {
			hold = max(hold, rd.Reset)
		}
	}
	cs.Hold = capDelay(hold, r.Provider.Signals.MaxDelay)
	if decided == nil {
		return cs
	}
	for _, o := range r.mapCounters(readings, decided) {
		drain := !o.LimitOnly && o.Item < len(decided) && o.Remaining < decided[o.Item].Remaining
		if drain || o.Limit != 0 {
			o.LimitOnly = !drain
			cs.Observed = append(cs.Observed, o)
		}
	}
	return cs
}

// mapCounters maps the readings onto r's stack per r.Sync: for each
// reading of a counter the configuration maps to a limit of the stack,
// the limit's index in r.Request.Items and what it may still admit at
// once (ourRemaining). For a learning limit (package quota's doc,
// "Learning") whose decision (decided, the reservation's statuses) ran
// at another rate than the one the reading states, the stated limit too
// (Observed.Limit; LimitOnly when the reading has nothing to drain to):
// the store records it only when it changes what decisions run at. A
// counter mapped to a limit not in this request's stack, or a reading
// with nothing to drain to nor to learn, is left out.
func (r *Resolution) mapCounters(readings []backoff.Reading, decided []quota.Status) []quota.Observed {
	var obs []quota.Observed
	for _, rd := range readings {
		name, ok := r.Sync.Counters[rd.Counter]
		if !ok {
			continue
		}
		i := itemNamed(r.Request.Items, name)
		if i < 0 {
			continue // not in this request's stack
		}
		lim := r.Request.Items[i].Limit
		o := quota.Observed{Item: i}
		if stated, ok := statedLimit(rd, lim, r.Provider); ok {
			lim = lim.Learned(stated) // the vendor's remaining counts in the bucket it states
			if i < len(decided) && lim.Rate != decided[i].Rate {
				o.Limit = stated
			}
		}
		left, ok := ourRemaining(rd, lim, r.Provider)
		if !ok && o.Limit == 0 {
			continue
		}
		o.Remaining, o.LimitOnly = left, !ok
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
func statedLimit(rd backoff.Reading, lim *quota.Limit, p *Provider) (int64, bool) {
	if !lim.Learn || !rd.HasLimit || rd.Limit <= 0 || rd.Window != 0 && rd.Window != lim.Period {
		return 0, false
	}
	return p.published(rd.Limit), true
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
func ourRemaining(rd backoff.Reading, lim *quota.Limit, p *Provider) (int64, bool) {
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
func sameBucket(rd backoff.Reading, lim *quota.Limit, p *Provider) bool {
	if !rd.HasLimit || rd.Limit <= 0 || p.published(rd.Limit) != lim.Capacity() {
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
