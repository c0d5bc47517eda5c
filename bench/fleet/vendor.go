package fleet

import (
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/fleetquota/throttle/throttletest"
)

// Kinds of vendor limit.
const (
	// KindGCRA is a GCRA: Rate per Period, Burst at once from idle.
	KindGCRA = "gcra"
	// KindDay is a calendar daily quota: Rate per UTC day, counted per day.
	KindDay = "day"
	// KindLeaky is a Shopify-style leaky bucket of Burst requests that
	// leaks Rate per second, continuously.
	KindLeaky = "leaky"
	// KindWindow is a fixed window: Rate per Period, counted per window
	// [k·Period, (k+1)·Period) of Unix time, all of it back at the reset
	// (GitHub's 5,000 an hour, scaled down).
	KindWindow = "window"
	// KindConcurrent caps the requests in flight at Rate: the vendor
	// counts a request from its arrival until its response is written,
	// and each request takes Period to serve (a model API's concurrent
	// streams, GitHub's 100 concurrent requests).
	KindConcurrent = "concurrent"
	// KindHour is a calendar hour on a compressed clock: Rate per window,
	// the windows Period of real time long and starting at the run's
	// start, each one calendar hour of the clock the scenario's Compress
	// makes (Rate per hour, reset on the hour, UTC). Only throttle runs
	// it: the alternatives know nothing of a compressed clock.
	KindHour = "hour"
	// KindRolling admits at most Rate in any trailing Period, exactly: a
	// sliding log of the admitted arrivals (Salesforce's rolling 24 h
	// quota, scaled down).
	KindRolling = "rolling"
)

// ScopeHeader carries the business (tenant, shop) a request is for.
const ScopeHeader = "X-Business"

// A Limit is one limit as a vendor publishes and enforces it.
type Limit struct {
	Name   string        `json:"name"`
	Kind   string        `json:"kind"`
	Rate   int64         `json:"rate"`
	Period time.Duration `json:"period,omitempty"`
	Burst  int64         `json:"burst,omitempty"`
	// PerBusiness: one state per value of ScopeHeader.
	PerBusiness bool `json:"per_business,omitempty"`
	// Counters: the vendor publishes this limit's count on every response
	// (X-RateLimit-Limit, -Remaining, -Reset), and throttle syncs to it.
	// At most one limit of a stack has it: x-ratelimit has one counter.
	Counters bool `json:"counters,omitempty"`
	// Pace is throttle's pace field for a calendar window (KindHour),
	// as YAML: "true" or "{reserve: 10%}"; throttle-fcfs leaves it out.
	Pace string `json:"pace,omitempty"`
	// Fair is throttle's fair field for a provider-wide limit ("tenant":
	// a weighted fair share among the tenants); throttle-fcfs leaves it
	// out.
	Fair string `json:"fair,omitempty"`
}

// interval is the GCRA emission interval in ns (a leaky bucket is a GCRA
// of one request per 1/leak, with the bucket size as its burst).
func (l Limit) interval() int64 {
	switch l.Kind {
	case KindGCRA:
		return int64(l.Period) / l.Rate
	case KindLeaky:
		return int64(time.Second) / l.Rate
	}
	return 0
}

func (l Limit) String() string {
	switch l.Kind {
	case KindGCRA:
		s := strconv.FormatInt(l.Rate, 10) + "/" + durName(l.Period) + " burst " + strconv.FormatInt(l.Burst, 10)
		if l.PerBusiness {
			s += " per business"
		}
		return s
	case KindDay:
		return strconv.FormatInt(l.Rate, 10) + "/day (UTC calendar day)"
	case KindWindow:
		return strconv.FormatInt(l.Rate, 10) + " per fixed " + l.Period.String() + " window"
	case KindHour:
		return strconv.FormatInt(l.Rate, 10) + "/hour (a calendar hour, compressed into " + l.Period.String() + ")"
	case KindConcurrent:
		return strconv.FormatInt(l.Rate, 10) + " in flight at once"
	case KindRolling:
		return strconv.FormatInt(l.Rate, 10) + " in any trailing " + l.Period.String()
	case KindLeaky:
		s := "leaky bucket " + strconv.FormatInt(l.Burst, 10) + " leaking " + strconv.FormatInt(l.Rate, 10) + "/s"
		if l.PerBusiness {
			s += " per business"
		}
		return s
	}
	return l.Kind
}

func durName(d time.Duration) string {
	if d == time.Second {
		return "s"
	}
	return d.String()
}

// enforcer is the vendor's enforcement of a stack of limits, the one
// with Counters first (a vendor advertises its first limit's counters).
// Only a GCRA charges a request's cost; the other kinds count requests.
func enforcer(limits []Limit) throttletest.Enforcer {
	es := make([]throttletest.Enforcer, 0, len(limits))
	for _, l := range limits {
		var e throttletest.Enforcer
		switch l.Kind {
		case KindGCRA:
			e = throttletest.GCRA(int(l.Rate), l.Period, int(l.Burst)).Costs() // a model API's tokens
		case KindDay:
			e = throttletest.Window(int(l.Rate), 24*time.Hour)
		case KindWindow, KindHour:
			e = throttletest.Window(int(l.Rate), l.Period)
		case KindLeaky:
			e = throttletest.LeakyBucket(int(l.Burst), float64(l.Rate))
		case KindConcurrent:
			e = throttletest.Concurrent(int(l.Rate), l.Period)
		case KindRolling:
			e = throttletest.Rolling(int(l.Rate), l.Period)
		}
		if !l.PerBusiness {
			e = e.Shared()
		}
		if l.Counters {
			es = append([]throttletest.Enforcer{e}, es...)
		} else {
			es = append(es, e)
		}
	}
	return throttletest.All(es...)
}

// IntentHeader carries a request's intent time (ns since the epoch):
// the model API vendor derives the request's actual cost from it
// (actualCost), so that the ideal client can charge the same.
const IntentHeader = "X-Bench-Intent"

// actualCost is what a request reserved at estimate actually costs: the
// tokens a model API's response says it used, from a fifth of the
// estimate to all of it (a completion stops before max_tokens),
// spread evenly, a fixed function of the request's intent time.
func actualCost(estimate, intent int64) int64 {
	x := uint64(intent) * 0x9E3779B97F4A7C15 // a multiplicative hash: deterministic, well spread
	lo := max(estimate/5, 1)
	return lo + int64((x>>33)%uint64(estimate-lo+1))
}

// warmUpPath is answered without being counted or recorded.
const warmUpPath = "/warmup"

// startVendor starts the scenario's fake vendor (a throttletest.Vendor):
// it enforces the stack of limits, per business where a limit says so,
// answers a refused request 429 with Retry-After in whole seconds (or
// retryAfter, when set), records every arrival with its earliest slot
// (SlotHeader), and charges the other client's requests (phantoms) as
// their times pass. With estimate set it is a model API: each request
// costs actualCost(estimate, its intent) tokens, charged at its arrival,
// and the response says so in its usage.
//
// shift moves the vendor's clock back (its windows then start shift
// after multiples of their length: at the run's start, for KindHour);
// its arrivals are recorded on that clock (RunResult.Shift).
func startVendor(limits []Limit, phantoms []throttletest.Other, retryAfter time.Duration, estimate int64, shift time.Duration) *throttletest.Vendor {
	opts := throttletest.Options{
		Enforcer:    enforcer(limits),
		ScopeHeader: ScopeHeader,
		TagHeader:   SlotHeader,
		RetryAfter:  retryAfter,
		Others:      phantoms,
		MaxArrivals: math.MaxInt32,
		Exempt:      func(r *http.Request) bool { return r.URL.Path == warmUpPath },
	}
	if shift != 0 {
		opts.Clock = func() time.Time { return time.Now().Add(-shift) }
	}
	for _, l := range limits {
		opts.Counters = opts.Counters || l.Counters
	}
	if estimate > 0 {
		cost := func(r *http.Request) int64 {
			intent, _ := strconv.ParseInt(r.Header.Get(IntentHeader), 10, 64)
			return actualCost(estimate, intent)
		}
		opts.Cost = cost
		opts.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"cmpl","usage":{"total_tokens":`+strconv.FormatInt(cost(r), 10)+`}}`)
		})
	}
	return throttletest.NewVendor(opts)
}

// lag is how long after its earliest slot (SlotHeader, the arrival's
// Tag) the vendor saw a request; 0 without one.
func lag(a *throttletest.Arrival) int64 {
	if slot, err := strconv.ParseInt(a.Tag, 10, 64); err == nil && slot > 0 {
		return a.At.UnixNano() - slot
	}
	return 0
}
