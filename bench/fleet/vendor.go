package fleet

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
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

// limitState is the vendor's state of one limit for one scope. The vendor
// keeps its own arithmetic (independent of package quota) so that the
// harness judges throttle by a second implementation.
type limitState struct {
	tat   int64           // gcra: theoretical arrival time, ns
	days  map[int64]int64 // day, window: admitted per window index
	level float64
	last  int64 // leaky: when level was computed, ns
	// ends holds, for a concurrent limit, when each admitted request
	// leaves (math.MaxInt64 while the live vendor still serves it); for
	// a rolling limit, the admitted arrivals still in the trailing period.
	ends []int64
}

// admitAt reports whether the limit admits one request of cost c at now
// (ns since the epoch) and, if not, how long until it would. Only a GCRA
// counts the cost (a model API's tokens); the other kinds count requests.
func (l *Limit) admitAt(s *limitState, now, c int64) (bool, int64) {
	switch l.Kind {
	case KindGCRA:
		t := l.interval()
		tat := max(s.tat, now)
		earliest := tat + c*t - l.Burst*t
		if now >= earliest {
			return true, 0
		}
		return false, earliest - now
	case KindDay:
		day := floorDiv(now, int64(24*time.Hour))
		if s.days[day] < l.Rate {
			return true, 0
		}
		return false, (day+1)*int64(24*time.Hour) - now
	case KindWindow:
		w := floorDiv(now, int64(l.Period))
		if s.days[w] < l.Rate {
			return true, 0
		}
		return false, (w+1)*int64(l.Period) - now
	case KindLeaky:
		level := s.levelAt(l, now)
		if level+1 <= float64(l.Burst)+1e-9 {
			return true, 0
		}
		return false, int64(math.Ceil((level + 1 - float64(l.Burst)) / float64(l.Rate) * 1e9))
	case KindConcurrent:
		s.prune(now)
		if int64(len(s.ends)) < l.Rate {
			return true, 0
		}
		return false, max(slices.Min(s.ends)-now, 1)
	case KindRolling:
		s.prune(now - int64(l.Period))
		if int64(len(s.ends)) < l.Rate {
			return true, 0
		}
		return false, s.ends[int64(len(s.ends))-l.Rate] + int64(l.Period) - now
	}
	return true, 0
}

// prune drops the ends (or, rolling, the arrivals) at or before t.
func (s *limitState) prune(t int64) {
	s.ends = slices.DeleteFunc(s.ends, func(e int64) bool { return e <= t })
}

// charge counts one admitted request of cost c at now; a concurrent
// limit holds it until end.
func (l *Limit) charge(s *limitState, now, c, end int64) {
	switch l.Kind {
	case KindConcurrent:
		s.ends = append(s.ends, end)
	case KindRolling:
		s.ends = append(s.ends, now) // arrivals come in order: the log stays sorted
	case KindGCRA:
		s.tat = max(s.tat, now) + c*l.interval()
	case KindDay:
		if s.days == nil {
			s.days = map[int64]int64{}
		}
		s.days[floorDiv(now, int64(24*time.Hour))]++
	case KindWindow:
		if s.days == nil {
			s.days = map[int64]int64{}
		}
		s.days[floorDiv(now, int64(l.Period))]++
	case KindLeaky:
		s.level = s.levelAt(l, now) + 1
		s.last = max(s.last, now)
	}
}

func (s *limitState) levelAt(l *Limit, now int64) float64 {
	if s.last == 0 || now <= s.last {
		return s.level
	}
	return max(0, s.level-float64(now-s.last)*float64(l.Rate)/1e9)
}

// earliest is the first time >= t at which the limit admits one request
// of cost c (for the ideal client: the reference a utilization is
// measured against).
func (l *Limit) earliest(s *limitState, t, c int64) int64 {
	switch l.Kind {
	case KindDay, KindWindow:
		if ok, wait := l.admitAt(s, t, c); !ok {
			return t + wait // the next window: empty
		}
		return t
	default:
		_, wait := l.admitAt(s, t, c)
		return t + wait
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// stackState is a vendor's enforcement of a stack of limits: a request is
// admitted when every limit admits it, and then charged to all of them.
type stackState struct {
	limits []Limit
	states []map[string]*limitState
	// live: the vendor serving requests, which ends a concurrent limit's
	// requests itself (done) when their responses are written; otherwise
	// (the ideal client) each leaves Period after its arrival.
	live bool
}

func newStackState(limits []Limit) *stackState {
	s := &stackState{limits: limits, states: make([]map[string]*limitState, len(limits))}
	for i := range s.states {
		s.states[i] = map[string]*limitState{}
	}
	return s
}

func (s *stackState) state(i int, biz string) *limitState {
	if !s.limits[i].PerBusiness {
		biz = ""
	}
	st := s.states[i][biz]
	if st == nil {
		st = &limitState{}
		s.states[i][biz] = st
	}
	return st
}

// decide admits and charges one request of cost c at now, or says how
// long until it would fit.
func (s *stackState) decide(now int64, biz string, c int64) (bool, int64) {
	ok, wait := true, int64(0)
	for i := range s.limits {
		if a, w := s.limits[i].admitAt(s.state(i, biz), now, c); !a {
			ok, wait = false, max(wait, w)
		}
	}
	if ok {
		for i := range s.limits {
			end := now + int64(s.limits[i].Period)
			if s.live {
				end = math.MaxInt64
			}
			s.limits[i].charge(s.state(i, biz), now, c, end)
		}
	}
	return ok, wait
}

// done ends, at now, one request the live vendor admitted and has served:
// its place in every concurrent limit.
func (s *stackState) done(now int64, biz string) {
	for i, l := range s.limits {
		if l.Kind != KindConcurrent {
			continue
		}
		st := s.state(i, biz)
		if j := slices.Index(st.ends, math.MaxInt64); j >= 0 {
			st.ends[j] = now
		}
	}
}

// hold is how long the vendor takes to serve a request: the longest
// Period of its concurrent limits (zero: at once).
func (s *stackState) hold() time.Duration {
	var d time.Duration
	for _, l := range s.limits {
		if l.Kind == KindConcurrent {
			d = max(d, l.Period)
		}
	}
	return d
}

// counter is what the vendor publishes of its counted limit (the one with
// Counters) for biz at now: the limit, what remains of it and when it is
// full again (ns since the epoch). ok is false when no limit is counted,
// or the counted one is not a window (a GCRA has no reset to publish).
func (s *stackState) counter(now int64, biz string) (limit, remaining, reset int64, ok bool) {
	for i, l := range s.limits {
		if !l.Counters {
			continue
		}
		length := int64(l.Period)
		switch l.Kind {
		case KindDay:
			length = int64(24 * time.Hour)
		case KindWindow:
		default:
			return 0, 0, 0, false
		}
		w := floorDiv(now, length)
		return l.Rate, max(0, l.Rate-s.state(i, biz).days[w]), (w + 1) * length, true
	}
	return 0, 0, 0, false
}

// earliest is the first time >= t at which every limit admits one request
// of cost c.
func (s *stackState) earliest(t int64, biz string, c int64) int64 {
	for round := 0; round < 16; round++ {
		moved := false
		for i := range s.limits {
			if e := s.limits[i].earliest(s.state(i, biz), t, c); e > t {
				t, moved = e, true
			}
		}
		if !moved {
			return t
		}
	}
	return t
}

// An Arrival is one request of the fleet as the vendor saw it.
type Arrival struct {
	At       int64  `json:"t"` // ns since the Unix epoch, the vendor's clock
	Business string `json:"b,omitempty"`
	OK       bool   `json:"ok"`
	// Lag is how long after its earliest slot (SlotHeader) it arrived.
	Lag int64 `json:"lag,omitempty"`
	// Done is when the vendor had written its response (ns since the
	// epoch): an admitted request is in flight from At to Done.
	Done int64 `json:"d,omitempty"`
	// Cost is what the vendor charged it (the actual cost of a settled
	// scenario, otherwise 1).
	Cost int64 `json:"c,omitempty"`
}

// A Phantom is traffic the fleet does not see: another tool using the same
// credentials. It is charged to the vendor's limits where it fits.
type Phantom struct {
	At       int64 // ns since the epoch
	Business string
}

// vendor is a fake vendor API: an HTTP server on loopback that records
// the arrival time of every request and enforces its stack of limits,
// answering a refused request 429 with Retry-After in whole seconds.
type vendor struct {
	srv *http.Server
	url string

	mu       sync.Mutex
	stack    *stackState
	phantoms []Phantom // sorted; consumed as time passes
	arrivals []Arrival
	// otherRefused counts the phantoms the vendor refused.
	otherRefused int64
	// retryAfter, when set, is the Retry-After of every 429 instead of
	// the time until the request would fit.
	retryAfter time.Duration
	// estimate, when set, makes the vendor a model API: each request
	// costs actualCost(estimate, its intent) tokens, charged at its
	// arrival, and the response says so in its usage.
	estimate int64
	wg       sync.WaitGroup
}

func startVendor(limits []Limit, phantoms []Phantom, retryAfter time.Duration, estimate int64) (*vendor, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ph := append([]Phantom(nil), phantoms...)
	sort.Slice(ph, func(i, j int) bool { return ph[i].At < ph[j].At })
	v := &vendor{stack: newStackState(limits), phantoms: ph, retryAfter: retryAfter, estimate: estimate, url: "http://" + l.Addr().String()}
	v.stack.live = true
	v.srv = &http.Server{Handler: http.HandlerFunc(v.serve), ReadHeaderTimeout: 5 * time.Second}
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		if err := v.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the run's results show the missing arrivals
		}
	}()
	return v, nil
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

// warmUpPath is answered 204 without being counted or recorded.
const warmUpPath = "/warmup"

func (v *vendor) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now().UnixNano()
	if r.URL.Path == warmUpPath {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	biz := r.Header.Get(ScopeHeader)
	cost := int64(1)
	if v.estimate > 0 {
		intent, _ := strconv.ParseInt(r.Header.Get(IntentHeader), 10, 64)
		cost = actualCost(v.estimate, intent)
	}
	v.mu.Lock()
	v.phantomsUntil(now)
	ok, wait := v.stack.decide(now, biz, cost)
	a := Arrival{At: now, Business: biz, OK: ok, Cost: cost, Done: now}
	if slot, err := strconv.ParseInt(r.Header.Get(SlotHeader), 10, 64); err == nil && slot > 0 {
		a.Lag = now - slot
	}
	i := len(v.arrivals)
	v.arrivals = append(v.arrivals, a)
	limit, remaining, reset, counted := v.stack.counter(now, biz)
	hold := v.stack.hold()
	v.mu.Unlock()
	_, _ = io.Copy(io.Discard, r.Body)
	if ok && hold > 0 { // serving it takes a while; then it leaves
		time.Sleep(hold)
		defer func() {
			now := time.Now().UnixNano()
			v.mu.Lock()
			v.stack.done(now, biz)
			v.arrivals[i].Done = now
			v.mu.Unlock()
		}()
	}
	w.Header().Set("Content-Type", "application/json")
	if counted { // GitHub's form: the reset in Unix seconds (here with milliseconds)
		w.Header().Set("X-RateLimit-Limit", strconv.FormatInt(limit, 10))
		w.Header().Set("X-RateLimit-Remaining", strconv.FormatInt(remaining, 10))
		w.Header().Set("X-RateLimit-Reset", strconv.FormatFloat(float64(reset/int64(time.Millisecond))/1e3, 'f', 3, 64))
	}
	if ok && v.estimate > 0 {
		_, _ = io.WriteString(w, `{"id":"cmpl","usage":{"total_tokens":`+strconv.FormatInt(cost, 10)+`}}`)
		return
	}
	if ok {
		_, _ = io.WriteString(w, `{"ok":true}`)
		return
	}
	if v.retryAfter > 0 {
		wait = int64(v.retryAfter)
	}
	if wait > math.MaxInt64/2 { // every place is served by a request whose end is not known yet
		wait = int64(time.Second)
	}
	secs := (wait + int64(time.Second) - 1) / int64(time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = io.WriteString(w, `{"error":"rate_limited"}`)
}

// phantomsUntil decides the phantoms due at now, in their order: they go
// before any request that arrives after them. v.mu is held.
func (v *vendor) phantomsUntil(now int64) {
	for len(v.phantoms) > 0 && v.phantoms[0].At <= now {
		p := v.phantoms[0]
		v.phantoms = v.phantoms[1:]
		if ok, _ := v.stack.decide(p.At, p.Business, 1); !ok {
			v.otherRefused++
		}
	}
}

// close stops the server and returns what it recorded: the fleet's
// arrivals and how many of the phantoms it refused.
func (v *vendor) close() ([]Arrival, int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := v.srv.Shutdown(ctx); err != nil {
		_ = v.srv.Close()
	}
	v.wg.Wait()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.phantomsUntil(math.MaxInt64) // those after the fleet's last request
	return append([]Arrival(nil), v.arrivals...), v.otherRefused
}
