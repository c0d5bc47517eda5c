package throttletest

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Signal is how a fake vendor answers a request it throttles.
type Signal uint8

const (
	// RetryAfterSeconds: 429 with Retry-After in whole seconds, rounded
	// up (Zendesk, Slack, Notion). It is the zero value.
	RetryAfterSeconds Signal = iota
	// RetryAfterDecimal: 429 with Retry-After in seconds with one decimal,
	// rounded up ("2.0"), and X-Shopify-Shop-Api-Call-Limit: used/size on
	// every response (Shopify REST).
	RetryAfterDecimal
	// RetryAfterDate: 429 with Retry-After as an IMF-fixdate HTTP-date,
	// rounded up to the second.
	RetryAfterDate
	// GitHub403: 403 with X-RateLimit-Remaining: 0 and X-RateLimit-Reset
	// in Unix seconds, rounded up; X-RateLimit-Limit, -Remaining, -Used,
	// -Reset and -Resource on every response when there is an enforcer
	// (GitHub REST's primary limit).
	GitHub403
)

var signalNames = [...]string{
	RetryAfterSeconds: "retry_after_seconds",
	RetryAfterDecimal: "retry_after_decimal",
	RetryAfterDate:    "retry_after_date",
	GitHub403:         "github_403",
}

// String returns the signal in snake case, e.g. "retry_after_seconds".
func (s Signal) String() string {
	if int(s) < len(signalNames) {
		return signalNames[s]
	}
	return fmt.Sprintf("Signal(%d)", uint8(s))
}

// Bounds that keep a long test's memory in check.
const (
	// defaultMaxArrivals is how many arrivals a Vendor records when
	// Options.MaxArrivals is zero.
	defaultMaxArrivals = 1_000_000
	// maxBody is how many bytes of each request body are recorded with
	// Options.RecordBodies.
	maxBody = 4096
	// maxScopes is how many scope states a Vendor keeps; requests of
	// further scopes share one state.
	maxScopes = 10_000
	// forcedRetryAfter is the delay advertised by a throttle forced with
	// ThrottleNext when Options.RetryAfter is zero.
	forcedRetryAfter = time.Second
)

// Options configures a Vendor. The zero value is a vendor that admits
// everything and answers 200 {"ok":true}.
type Options struct {
	// Enforcer is the limit the vendor enforces. The zero Enforcer admits
	// everything (ThrottleNext still throttles).
	Enforcer Enforcer
	// Signal is how throttled requests are answered. The default is
	// RetryAfterSeconds.
	Signal Signal
	// ScopeHeader, when set, names a request header whose every value has
	// its own enforcer state, as a vendor limiting per account does.
	// Requests without it share the state of the empty scope. At most
	// 10,000 scopes have a state of their own; further scopes share one.
	ScopeHeader string
	// RetryAfter, when positive, is the delay every throttled response
	// advertises instead of the enforcer's own (Shopify always says 2.0).
	RetryAfter time.Duration
	// ThrottleBody, when set, is the body of every throttled response
	// instead of the style's, e.g. OpenAI's
	// {"error":{"type":"insufficient_quota"}}.
	ThrottleBody string
	// Handler answers admitted requests, after the vendor has set its
	// rate-limit headers and read the body. Nil means 200 {"ok":true}.
	Handler http.Handler
	// Clock is the vendor's clock, for its enforcement and the arrival
	// times it records. Nil means time.Now.
	Clock func() time.Time
	// MaxArrivals bounds the recorded arrivals, so that a long test keeps
	// its memory; later ones are counted (Counts) but not recorded
	// (Arrivals, MaxIn). Zero means 1,000,000.
	MaxArrivals int
	// RecordBodies records the first 4 KiB of every request body in its
	// Arrival, for a test that checks what was sent.
	RecordBodies bool
	// MaxInFlight, when positive, is a concurrency cap: a request that
	// arrives while MaxInFlight others it admitted are being served (from
	// their arrival until their response is written) is throttled. It is
	// All(Enforcer, Concurrent(MaxInFlight, 0)). The vendor counts every
	// request in flight either way; see PeakInFlight.
	MaxInFlight int
	// Counters adds X-RateLimit-Limit, -Remaining, -Used, -Reset (the
	// enforcer's own reset, in Unix seconds, rounded up: a window's end
	// even on a throttled response) and -Resource "core" to every
	// response of a vendor with an enforcer, whatever the Signal, as
	// vendors that publish their counters do. GitHub403 sends them
	// anyway. They are the first limit's of a stack (All), as they stand:
	// a request another limit refused leaves its remaining as it was.
	Counters bool
	// Cost, when set, is what a request costs (values below 1 count as 1;
	// nil means 1): the tokens a model API's response says it used, which
	// its limits marked with Enforcer.Costs charge at the request's
	// arrival. The Handler writes the usage the client settles with.
	Cost func(*http.Request) int64
	// TagHeader, when set, names a request header whose value each
	// Arrival keeps (Arrival.Tag), to match what the vendor saw with what
	// the client sent: a request id, the slot the client reserved.
	TagHeader string
	// Exempt, when set, picks the requests the vendor answers (with the
	// Handler) without enforcing, counting or recording them: a health
	// check, a harness warming its connections up.
	Exempt func(*http.Request) bool
	// Others is the traffic of another client with the same credentials,
	// which the test does not send: the vendor decides each at its time,
	// once its clock has passed it (before any request arriving later),
	// and charges it where the limits admit it. Close decides those still
	// to come. Others are not in Arrivals or Counts; see OthersRefused.
	Others []Other
}

// An Other is a request of another client (Options.Others).
type Other struct {
	// At is when it reaches the vendor, on the vendor's clock.
	At time.Time
	// Scope is its value of Options.ScopeHeader.
	Scope string
}

// An Arrival is one request as the vendor saw it.
type Arrival struct {
	// At is when the request's headers arrived, on the vendor's clock.
	At time.Time
	// Throttled is true when the vendor refused the request (by its
	// enforcer or by ThrottleNext); false when it served it.
	Throttled bool
	// Scope is the request's value of Options.ScopeHeader.
	Scope string
	// Method and Path are the request's.
	Method, Path string
	// Body is the start of the request body (with Options.RecordBodies).
	Body []byte
	// Done is when the vendor had written its response, on its clock: an
	// admitted request is in flight from At to Done.
	Done time.Time
	// Cost is what the request cost (Options.Cost; otherwise 1).
	Cost int64
	// Tag is the request's value of Options.TagHeader.
	Tag string
}

// A Vendor is a running fake vendor API. It is safe for concurrent use.
type Vendor struct {
	// URL is the base URL of the vendor, "http://127.0.0.1:port".
	URL string

	srv  *httptest.Server
	opts Options
	now  func() time.Time

	mu        sync.Mutex
	ledger    *Ledger
	others    []Other // sorted; decided as the clock passes them
	refused   int     // others refused
	arrivals  []Arrival
	served    int
	throttled int
	forced    int
	inFlight  int
	peak      int // the most requests in flight at once
}

// PeakInFlight returns the most requests the vendor was serving at once.
func (v *Vendor) PeakInFlight() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.peak
}

// NewVendor starts a fake vendor on a loopback port (an httptest.Server)
// and returns it running. Close it when done. Like httptest.NewServer, it
// panics if it cannot listen.
func NewVendor(opts Options) *Vendor {
	e := opts.Enforcer
	if opts.MaxInFlight > 0 {
		e = All(e, Concurrent(opts.MaxInFlight, 0))
	}
	v := &Vendor{opts: opts, now: opts.Clock, ledger: NewLedger(e)}
	v.ledger.live = true
	v.others = append([]Other(nil), opts.Others...)
	sort.SliceStable(v.others, func(i, j int) bool { return v.others[i].At.Before(v.others[j].At) })
	if v.now == nil {
		v.now = time.Now
	}
	if v.opts.MaxArrivals <= 0 {
		v.opts.MaxArrivals = defaultMaxArrivals
	}
	v.srv = httptest.NewServer(http.HandlerFunc(v.serve))
	v.URL = v.srv.URL
	return v
}

// Host returns the vendor's "127.0.0.1:port", as a provider's hosts name
// it.
func (v *Vendor) Host() string { return strings.TrimPrefix(v.URL, "http://") }

// Close shuts the vendor down, blocking until every request in flight has
// been answered, and decides the Options.Others still to come, as if its
// clock had passed them. The recorded arrivals stay readable.
func (v *Vendor) Close() {
	v.srv.Close()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.othersUntil(time.Unix(0, math.MaxInt64))
}

// OthersRefused returns how many of Options.Others the vendor has
// refused so far.
func (v *Vendor) OthersRefused() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.refused
}

// othersUntil decides the others due at now, in their order; v.mu is
// held.
func (v *Vendor) othersUntil(now time.Time) {
	for len(v.others) > 0 && !v.others[0].At.After(now) {
		o := v.others[0]
		v.others = v.others[1:]
		if !v.ledger.decide(o.At.UnixNano(), o.Scope, 1).ok {
			v.refused++
		}
	}
}

// Client returns an *http.Client that sends to the vendor over plain
// loopback connections (the httptest server's own client).
func (v *Vendor) Client() *http.Client { return v.srv.Client() }

// ThrottleNext makes the vendor answer the next n requests as throttled,
// whatever its enforcer says, advertising Options.RetryAfter (or one
// second), in the style of Options.Signal: a test's way to provoke a
// vendor's throttling answer without filling its limit. Forced throttles
// charge nothing. Calls add up.
func (v *Vendor) ThrottleNext(n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.forced += max(n, 0)
}

// Arrivals returns a copy of every recorded arrival, in the order the
// vendor decided them.
func (v *Vendor) Arrivals() []Arrival {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]Arrival(nil), v.arrivals...)
}

// Counts returns how many requests the vendor served and throttled since
// it started, recorded or not.
func (v *Vendor) Counts() (served, throttled int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.served, v.throttled
}

// MaxIn returns the largest number of admitted (served) requests whose
// arrivals fall in one half-open window [t, t+window), over every t: what
// a vendor counting per sliding window of that length would have seen.
func (v *Vendor) MaxIn(window time.Duration) int {
	return v.maxIn(window, func(*Arrival) bool { return true })
}

// MaxInScope is MaxIn for the requests of one scope (see
// Options.ScopeHeader).
func (v *Vendor) MaxInScope(scope string, window time.Duration) int {
	return v.maxIn(window, func(a *Arrival) bool { return a.Scope == scope })
}

func (v *Vendor) maxIn(window time.Duration, keep func(*Arrival) bool) int {
	v.mu.Lock()
	var ts []time.Time
	for i := range v.arrivals {
		if a := &v.arrivals[i]; !a.Throttled && keep(a) {
			ts = append(ts, a.At)
		}
	}
	v.mu.Unlock()
	return maxInTimes(ts, window)
}

// maxInTimes returns the largest number of times that fall in one half-open
// window [t, t+window). The times need not be sorted; ts is not changed.
func maxInTimes(ts []time.Time, window time.Duration) int {
	s := append([]time.Time(nil), ts...)
	sort.Slice(s, func(i, j int) bool { return s[i].Before(s[j]) })
	best, lo := 0, 0
	for hi := range s {
		for s[hi].Sub(s[lo]) >= window {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

func (v *Vendor) serve(w http.ResponseWriter, r *http.Request) {
	if v.opts.Exempt != nil && v.opts.Exempt(r) {
		_, _ = io.Copy(io.Discard, r.Body)
		v.answer(w, r)
		return
	}
	a := Arrival{Method: r.Method, Path: r.URL.Path, Cost: 1}
	if v.opts.ScopeHeader != "" {
		a.Scope = r.Header.Get(v.opts.ScopeHeader)
	}
	if v.opts.TagHeader != "" {
		a.Tag = r.Header.Get(v.opts.TagHeader)
	}
	if v.opts.Cost != nil {
		a.Cost = max(v.opts.Cost(r), 1)
	}

	v.mu.Lock()
	now := v.now()
	a.At = now
	v.othersUntil(now)
	v.inFlight++
	v.peak = max(v.peak, v.inFlight)
	var d decision
	if v.forced > 0 {
		v.forced--
		l := v.ledger.limit()
		d = decision{retryAfter: forcedRetryAfter, counters: counters{limit: l, used: l}}
	} else {
		d = v.ledger.decide(now.UnixNano(), a.Scope, a.Cost)
	}
	a.Throttled = !d.ok
	if d.ok {
		v.served++
	} else {
		v.throttled++
		if v.opts.RetryAfter > 0 {
			d.retryAfter = v.opts.RetryAfter
		}
	}
	idx := -1
	if len(v.arrivals) < v.opts.MaxArrivals {
		idx = len(v.arrivals)
		v.arrivals = append(v.arrivals, a)
	}
	serving := v.ledger.serving()
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		done := v.now()
		v.inFlight--
		if d.ok {
			v.ledger.release(done.UnixNano(), a.Scope)
		}
		if idx >= 0 {
			v.arrivals[idx].Done = done
		}
	}()

	// Read the body whole, so that the connection can be reused; keep
	// its start when asked to.
	var body []byte
	if r.Body != nil {
		if v.opts.RecordBodies {
			body, _ = io.ReadAll(io.LimitReader(r.Body, maxBody))
		}
		_, _ = io.Copy(io.Discard, r.Body)
	}
	if idx >= 0 && body != nil {
		v.mu.Lock()
		v.arrivals[idx].Body = body
		v.mu.Unlock()
	}

	v.writeHeaders(w.Header(), d, now)
	if d.ok {
		if serving > 0 {
			time.Sleep(serving)
		}
		v.answer(w, r)
		return
	}
	status, msg := http.StatusTooManyRequests, `{"error":"rate_limited"}`
	switch v.opts.Signal {
	case RetryAfterDecimal:
		msg = `{"errors":"Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service."}`
	case GitHub403:
		status, msg = http.StatusForbidden, `{"message":"API rate limit exceeded","documentation_url":"https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"}`
	}
	if v.opts.ThrottleBody != "" {
		msg = v.opts.ThrottleBody
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg)
}

// answer answers an admitted (or exempt) request with the Handler, or
// 200 {"ok":true}.
func (v *Vendor) answer(w http.ResponseWriter, r *http.Request) {
	if v.opts.Handler != nil {
		v.opts.Handler.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`)
}

// writeHeaders sets the signal style's headers for decision d at now.
func (v *Vendor) writeHeaders(h http.Header, d decision, now time.Time) {
	switch v.opts.Signal {
	case RetryAfterSeconds:
		if !d.ok {
			h.Set("Retry-After", strconv.FormatInt(ceilDiv(d.retryAfter, time.Second), 10))
		}
	case RetryAfterDecimal:
		if d.limit > 0 {
			h.Set("X-Shopify-Shop-Api-Call-Limit", fmt.Sprintf("%d/%d", d.used, d.limit))
		}
		if !d.ok {
			tenths := ceilDiv(d.retryAfter, 100*time.Millisecond)
			h.Set("Retry-After", fmt.Sprintf("%d.%d", tenths/10, tenths%10))
		}
	case RetryAfterDate:
		if !d.ok {
			h.Set("Retry-After", ceilSecond(now.Add(d.retryAfter)).UTC().Format(http.TimeFormat))
		}
	case GitHub403:
		reset := d.reset
		if !d.ok {
			reset, d.remaining = now.Add(d.retryAfter), 0
		}
		if d.limit > 0 || !d.ok {
			setCounters(h, d, reset)
		}
		return
	}
	if v.opts.Counters && d.limit > 0 {
		setCounters(h, d, d.reset)
	}
}

// setCounters sets the X-RateLimit headers of decision d, with reset.
func setCounters(h http.Header, d decision, reset time.Time) {
	h.Set("X-RateLimit-Limit", strconv.FormatInt(d.limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(d.remaining, 10))
	h.Set("X-RateLimit-Used", strconv.FormatInt(d.used, 10))
	if !reset.IsZero() {
		h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSecond(reset).Unix(), 10))
	}
	h.Set("X-RateLimit-Resource", "core")
}

// ceilDiv returns d/unit rounded up, at least 1 for a positive d.
func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + unit - 1) / unit)
}

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	s := t.Truncate(time.Second)
	if s.Equal(t) {
		return s
	}
	return s.Add(time.Second)
}
