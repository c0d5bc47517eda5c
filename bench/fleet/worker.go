package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/redisstore"
)

// WorkerEnv holds a worker's spec (JSON) when the harness runs itself as a
// worker process.
const WorkerEnv = "FLEETBENCH_WORKER"

// workerSpec is what one worker process runs.
type workerSpec struct {
	Index      int       `json:"index"`
	Processes  int       `json:"processes"`
	Goroutines int       `json:"goroutines"`
	Algo       string    `json:"algo"`
	Scenario   Scenario  `json:"scenario"`
	Limits     []Limit   `json:"limits"` // configured
	RedisAddr  string    `json:"redis"`
	VendorURL  string    `json:"vendor"`
	Prefix     string    `json:"prefix"`
	Start      time.Time `json:"start"`
	ResultPath string    `json:"result"`
	// Virtual is what a compressed clock (Scenario.Compress) reads at
	// Start.
	Virtual time.Time `json:"virtual,omitzero"`
}

// An Intent is one request the load asked for.
type Intent struct {
	At       int64  `json:"t"` // ns since the epoch
	Business string `json:"b,omitempty"`
	// Flow is the index of its flow in Scenario.Flows, when it has flows.
	Flow int `json:"f,omitempty"`
}

// Outcomes of requests, as the client saw them.
const (
	OutSent       = "sent_ok"       // sent, and the vendor served it
	OutThrottled  = "vendor_429"    // sent, and the vendor throttled it
	OutRefused    = "refused"       // the limiter refused (or would wait past max wait / the run)
	OutStoreError = "store_error"   // the limiter's store failed; not sent
	OutDropped    = "dropped"       // every goroutine of the process was busy
	OutOther      = "other_error"   // anything else (transport errors)
	OutCancelled  = "ended_waiting" // the run ended while the request waited
)

// workerResult is what a worker process reports.
type workerResult struct {
	Intents   []Intent         `json:"intents"`
	Latencies []int64          `json:"latencies"` // ns per limiter call
	Accuracy  []int64          `json:"accuracy"`  // ns: sent - reserved slot, for requests that waited
	Outcomes  map[string]int64 `json:"outcomes"`
	Errors    []string         `json:"errors,omitempty"`
	// Late is how long after the run's start the worker was ready (0: in
	// time); a late worker's first requests go out in a bunch.
	Late int64 `json:"late,omitempty"`
	// DecisionScripts and AfterScripts count throttle's script calls
	// (EVALSHA, EVAL): those made by its decisions (the store's Reserve)
	// and those made for a request after its decision (release, renew,
	// settle, sync, cancel).
	DecisionScripts int64 `json:"decision_scripts,omitempty"`
	AfterScripts    int64 `json:"after_scripts,omitempty"`
	// Decisions counts throttle's decisions that could reach Redis: the
	// store's Reserve called with a context not yet ended (one that has
	// ended returns its error before any round trip).
	Decisions int64 `json:"decisions,omitempty"`
	// Added is, per request that reached throttle, the time from the
	// client's call to the request leaving for the vendor, or to its
	// refusal (ns); Sent says which it was.
	Added []int64 `json:"added,omitempty"`
	Sent  []bool  `json:"sent,omitempty"`
	// Commands counts every Redis command throttle's client sent after
	// the warm-up (scripts, subscriptions, everything).
	Commands int64 `json:"commands,omitempty"`
	// Records is what happened to each request, in a scenario with flows.
	Records []Record `json:"records,omitempty"`
}

// decisionKey marks the context of a decision (timedStore.Reserve), so
// that scriptCounter tells its script calls from the ones after it.
type decisionKey struct{}

// scriptCounter is a go-redis hook that counts the script calls of the
// fleet's requests: within a decision, or after one (a request's context
// carries its slot, and the transport's calls after the decision keep the
// request's values). Warm-up calls carry neither and are not counted.
type scriptCounter struct {
	decision, after atomic.Int64
	// all counts every command once on is set (after the warm-up).
	all atomic.Int64
	on  atomic.Bool
}

func (c *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (c *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if c.on.Load() {
			c.all.Add(1)
		}
		switch cmd.Name() {
		case "evalsha", "eval", "evalsha_ro", "eval_ro":
			if ctx.Value(decisionKey{}) != nil {
				c.decision.Add(1)
			} else if ctx.Value(slotKey{}) != nil {
				c.after.Add(1)
			}
		}
		return next(ctx, cmd)
	}
}

type recorder struct {
	mu  sync.Mutex
	res workerResult
}

func (r *recorder) latency(d time.Duration) {
	r.mu.Lock()
	r.res.Latencies = append(r.res.Latencies, int64(d))
	r.mu.Unlock()
}

func (r *recorder) accuracy(d time.Duration) {
	r.mu.Lock()
	r.res.Accuracy = append(r.res.Accuracy, int64(d))
	r.mu.Unlock()
}

// added records a request's added latency: until it left for the vendor
// (sent) or was refused.
func (r *recorder) added(d time.Duration, sent bool) {
	r.mu.Lock()
	r.res.Added = append(r.res.Added, int64(d))
	r.res.Sent = append(r.res.Sent, sent)
	r.mu.Unlock()
}

// record notes what happened to a request of a scenario with flows.
func (r *recorder) record(x Record) {
	r.mu.Lock()
	r.res.Records = append(r.res.Records, x)
	r.mu.Unlock()
}

func (r *recorder) outcome(o string, err error) {
	r.mu.Lock()
	r.res.Outcomes[o]++
	if err != nil && len(r.res.Errors) < 5 {
		r.res.Errors = append(r.res.Errors, o+": "+err.Error())
	}
	r.mu.Unlock()
}

// RunWorker runs the worker whose spec is in the environment and writes
// its result. It is what the harness binary does when it finds WorkerEnv.
func RunWorker() error {
	var spec workerSpec
	if err := json.Unmarshal([]byte(os.Getenv(WorkerEnv)), &spec); err != nil {
		return fmt.Errorf("worker spec: %w", err)
	}
	res, err := runWorker(&spec)
	if err != nil {
		return err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(spec.ResultPath, b, 0o644)
}

// slot carries the reserved slot of one request from the store wrapper to
// the send wrapper.
type slot struct {
	// began is when the client called the throttle with the request.
	began  time.Time
	at     time.Time
	waited bool
	// earliest is the decision's start plus its wait: no later than the
	// slot on the store's clock. The vendor records its arrival minus this.
	earliest time.Time
	// wait is the decision's reserved wait on the store's clock (which a
	// compressed scenario runs faster than the real one).
	wait time.Duration
}

// SlotHeader carries a request's earliest slot (ns since the epoch) to the
// vendor, which records how late after it the request arrived.
const SlotHeader = "X-Bench-Slot"

type slotKey struct{}

// timedStore times every decision of the Redis store and notes the slot
// it reserved.
type timedStore struct {
	quota.Store
	rec *recorder
	// clock, when set, is the compressed clock the store runs on: a
	// wait on it is a k-th as long in real time.
	clock *scaledClock
}

var _ quota.Store = timedStore{}

func (s timedStore) Reserve(ctx context.Context, req *quota.Request) (*quota.Reservation, error) {
	if ctx.Err() == nil {
		s.rec.mu.Lock()
		s.rec.res.Decisions++
		s.rec.mu.Unlock()
	}
	t0 := time.Now()
	r, err := s.Store.Reserve(context.WithValue(ctx, decisionKey{}, true), req)
	t1 := time.Now()
	s.rec.latency(t1.Sub(t0))
	if err == nil && r.Allowed {
		if sl, ok := ctx.Value(slotKey{}).(*slot); ok {
			w := r.Wait
			if s.clock != nil {
				w = s.clock.real(w)
			}
			sl.at, sl.waited, sl.earliest, sl.wait = t1.Add(w), w > 0, t0.Add(w), r.Wait
		}
	}
	return r, err
}

// sendTimer notes, for a request that waited, how far from its slot it
// was sent.
type sendTimer struct {
	base http.RoundTripper
	rec  *recorder
}

func (s sendTimer) RoundTrip(req *http.Request) (*http.Response, error) {
	sl, ok := req.Context().Value(slotKey{}).(*slot)
	if ok && !sl.began.IsZero() {
		s.rec.added(time.Since(sl.began), true)
	}
	// A request served from quota taken ahead made no decision of its
	// own: it has no slot to be late after.
	if !ok || sl.earliest.IsZero() {
		return s.base.RoundTrip(req)
	}
	if sl.waited {
		s.rec.accuracy(time.Since(sl.at))
	}
	req = req.Clone(req.Context())
	req.Header.Set(SlotHeader, strconv.FormatInt(sl.earliest.UnixNano(), 10))
	return s.base.RoundTrip(req)
}

// throttleConfig is the providers YAML of a scenario for throttle; fcfs
// leaves out what issues 20 and 21 added (classes, pace, fair share,
// plans), and ahead, when positive, is the provider's ahead period.
func throttleConfig(sc *Scenario, limits []Limit, host string, localShare float64, sync, fcfs bool, ahead time.Duration) string {
	var b strings.Builder
	b.WriteString("version: 1\n")
	if !fcfs {
		b.WriteString(tenantsConfig(sc))
	}
	b.WriteString("providers:\n  vendor:\n")
	fmt.Fprintf(&b, "    hosts: [%q]\n", host)
	if sc.Wait {
		maxWait := sc.MaxWait
		if sc.Compress > 1 { // on the compressed clock
			maxWait = time.Duration(float64(maxWait) * sc.Compress)
		}
		fmt.Fprintf(&b, "    on_limit: wait\n    max_wait: %s\n", maxWait)
	} else {
		b.WriteString("    on_limit: fail\n")
	}
	if localShare > 0 {
		fmt.Fprintf(&b, "    on_store_error: local\n    local_share: %g\n", localShare)
	}
	if ahead > 0 {
		fmt.Fprintf(&b, "    ahead: {period: %s}\n", ahead)
	}
	// Every limit per business: each business's keys in a hash tag of
	// their own, as a vendor's per-account quotas would be configured.
	perTenant := len(limits) > 0
	for _, l := range limits {
		perTenant = perTenant && l.PerBusiness
	}
	if perTenant {
		b.WriteString("    keys: per_tenant\n")
	}
	if !fcfs {
		flowConfig(&b, sc)
	}
	b.WriteString("    limits:\n")
	for _, l := range limits {
		scope := ""
		if l.PerBusiness {
			scope = `, scope: "header:` + ScopeHeader + `"`
		}
		if !fcfs && l.Pace != "" {
			scope += ", pace: " + l.Pace
		}
		if !fcfs && l.Fair != "" {
			scope += ", fair: " + l.Fair
		}
		switch l.Kind {
		case KindGCRA:
			fmt.Fprintf(&b, "      - {name: %s, rate: %d, period: %s, burst: %d%s}\n", l.Name, l.Rate, l.Period, l.Burst, scope)
		case KindLeaky:
			fmt.Fprintf(&b, "      - {name: %s, rate: %d, period: 1s, burst: %d%s}\n", l.Name, l.Rate, l.Burst, scope)
		case KindDay:
			fmt.Fprintf(&b, "      - {name: %s, limit: %d/day%s}\n", l.Name, l.Rate, scope)
		case KindHour:
			fmt.Fprintf(&b, "      - {name: %s, limit: %d/hour resets 00:00%s}\n", l.Name, l.Rate, scope)
		case KindConcurrent:
			fmt.Fprintf(&b, "      - {name: %s, limit: %d concurrent lease %s%s}\n", l.Name, l.Rate, leaseTTL, scope)
		case KindRolling:
			fmt.Fprintf(&b, "      - {name: %s, limit: %d/%s rolling%s}\n", l.Name, l.Rate, l.Period, scope)
		}
	}
	for _, l := range limits {
		if sync && l.Counters { // the vendor names its one counter as GitHub does: "core"
			fmt.Fprintf(&b, "    sync: {format: x-ratelimit, counters: {core: %s}}\n", l.Name)
		}
	}
	return b.String()
}

// leaseTTL is the lease TTL of throttle's concurrency limits: well above
// a request's time in flight, so that no live lease expires.
const leaseTTL = 5 * time.Second

func runWorker(spec *workerSpec) (*workerResult, error) {
	sc := &spec.Scenario
	rec := &recorder{res: workerResult{Outcomes: map[string]int64{}}}
	httpBase := &http.Transport{MaxIdleConnsPerHost: spec.Goroutines, MaxIdleConns: spec.Goroutines, DisableCompression: true}
	defer httpBase.CloseIdleConnections()
	rdb := redis.NewClient(&redis.Options{Addr: spec.RedisAddr, PoolSize: spec.Goroutines + 4, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	defer rdb.Close()

	var client *http.Client
	var lim limiter
	closeTr := func() error { return nil } // throttle's Transport.Close: what it took ahead goes back
	var st *redisstore.Store
	scripts := &scriptCounter{}
	switch spec.Algo {
	case AlgoThrottle, AlgoThrottleLocal, AlgoThrottleNoSync, AlgoThrottleAhead, AlgoThrottleFCFS:
		rdb.AddHook(scripts)
		share := 0.0
		if spec.Algo == AlgoThrottleLocal {
			share = 1 / float64(spec.Processes)
		}
		var ahead time.Duration
		if spec.Algo == AlgoThrottleAhead {
			ahead = sc.AheadPeriod
		}
		yaml := throttleConfig(sc, spec.Limits, strings.TrimPrefix(spec.VendorURL, "http://"), share,
			spec.Algo != AlgoThrottleNoSync, spec.Algo == AlgoThrottleFCFS, ahead)
		cfg, err := providers.Load("bench.yaml", []byte(yaml))
		if err != nil {
			return nil, err
		}
		opts := []throttle.Option{throttle.WithRegistry(providers.NewRegistry(cfg)), throttle.WithBase(sendTimer{base: httpBase, rec: rec})}
		stOpts := redisstore.Options{Prefix: spec.Prefix}
		if sc.FarRedis > 0 {
			// A far Redis's calls get several round trips, as
			// docs/operations.md advises for one in another region.
			stOpts.Timeout = time.Second
		}
		var clock *scaledClock
		if sc.Compress > 1 {
			clock = &scaledClock{r0: spec.Start, v0: spec.Virtual, k: sc.Compress}
			stOpts.Clock = *clock
			opts = append(opts, throttle.WithClock(*clock))
		}
		st, err = redisstore.New(rdb, stOpts)
		if err != nil {
			return nil, err
		}
		tr, err := throttle.New(append(opts, throttle.WithStore(timedStore{Store: st, rec: rec, clock: clock}))...)
		if err != nil {
			return nil, err
		}
		client = &http.Client{Transport: tr}
		closeTr = tr.Close
	case AlgoFixedWindow:
		lim = &fixedWindow{rdb: rdb, prefix: spec.Prefix, limits: spec.Limits}
	case AlgoRedisRate:
		lim = &redisRate{lim: redis_rate.NewLimiter(rdb), prefix: spec.Prefix, limits: spec.Limits}
	case AlgoLockGCRA:
		lim = &lockGCRA{rdb: rdb, prefix: spec.Prefix, limits: spec.Limits, lockWait: time.Second}
	case AlgoLocalRate:
		lim = newLocalRate(spec.Limits, spec.Processes)
	default:
		return nil, fmt.Errorf("unknown algorithm %q", spec.Algo)
	}
	if client == nil {
		client = &http.Client{Transport: httpBase}
	}

	warmUp(spec, rdb, httpBase, st)
	scripts.on.Store(true)
	rec.res.Late = max(0, int64(time.Since(spec.Start)))
	end := spec.Start.Add(sc.Duration)
	runCtx, cancel := context.WithDeadline(context.Background(), end)
	if sc.Compress > 1 {
		// The transport cuts a request's max wait to its context's
		// deadline, in real time, and its max wait is on the compressed
		// clock: the run's end must not cut it. It ends the run instead.
		runCtx, cancel = context.WithCancel(context.Background())
		stop := time.AfterFunc(time.Until(end), cancel)
		defer stop.Stop()
	}
	defer cancel()
	jobs := make(chan Intent)
	var wg sync.WaitGroup
	for g := 0; g < spec.Goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for in := range jobs {
				if client != nil && lim == nil {
					doThrottle(runCtx, client, spec, in, rec)
				} else {
					doLimiter(runCtx, client, lim, spec, in, rec)
				}
			}
		}()
	}
	dispatch(spec, end, jobs, rec)
	close(jobs)
	wg.Wait()
	_ = closeTr()
	rec.res.DecisionScripts, rec.res.AfterScripts = scripts.decision.Load(), scripts.after.Load()
	rec.res.Commands = scripts.all.Load()
	return &rec.res, nil
}

// dispatch hands out the process's share of the offered load, at its
// scheduled times, to whichever goroutine is free; when none is, the
// request is dropped (and counted).
func dispatch(spec *workerSpec, end time.Time, jobs chan<- Intent, rec *recorder) {
	sc := &spec.Scenario
	if len(sc.Flows) > 0 {
		for _, in := range flowIntents(sc, spec.Index, spec.Processes, spec.Start) {
			if d := time.Until(time.Unix(0, in.At)); d > 0 {
				time.Sleep(d)
			}
			rec.mu.Lock()
			rec.res.Intents = append(rec.res.Intents, in)
			rec.mu.Unlock()
			select {
			case jobs <- in:
			default:
				rec.outcome(OutDropped, nil)
				rec.record(Record{Flow: in.Flow, At: in.At, Out: OutDropped, Wait: -1})
			}
		}
		return
	}
	rng := rand.New(rand.NewPCG(uint64(spec.Index)+1, uint64(sc.Duration)))
	n := float64(spec.Processes)
	start := spec.Start
	// Processes take turns: process i starts i/N of an interval late.
	next := start.Add(time.Duration(float64(time.Second) / (sc.Load.rateAt(0) / n) * float64(spec.Index) / n))
	for next.Before(end) {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		biz := ""
		if sc.Businesses > 1 {
			i := rng.IntN(sc.Businesses)
			if sc.Hot > 0 && rng.IntN(2) == 0 {
				i = rng.IntN(sc.Hot)
			}
			biz = businessName(i)
		} else {
			biz = businessName(0)
		}
		in := Intent{At: next.UnixNano(), Business: biz}
		rec.mu.Lock()
		rec.res.Intents = append(rec.res.Intents, in)
		rec.mu.Unlock()
		select {
		case jobs <- in:
		default:
			rec.outcome(OutDropped, nil)
		}
		off := next.Sub(start)
		step := time.Duration(float64(time.Second) / (sc.Load.rateAt(off) / n))
		nxt := off + step
		if c := sc.Load.Cycle; c > 0 {
			if b := off - off%c + c; nxt > b && sc.Load.rateAt(b) > sc.Load.rateAt(off) {
				nxt = b + time.Duration(float64(time.Second)/(sc.Load.rateAt(b)/n)*float64(spec.Index)/n)
			}
		}
		next = start.Add(nxt)
	}
}

func newRequest(ctx context.Context, spec *workerSpec, biz string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, spec.VendorURL+"/v1/things", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(ScopeHeader, biz)
	return req, nil
}

func doThrottle(ctx context.Context, client *http.Client, spec *workerSpec, in Intent, rec *recorder) {
	sl := &slot{began: time.Now()}
	ctx = context.WithValue(ctx, slotKey{}, sl)
	sc := &spec.Scenario
	if sc.Estimate > 0 { // a model API: reserve max_tokens, settle the usage
		ctx = throttle.WithSettle(throttle.WithCost(ctx, sc.Estimate), throttle.OpenAIUsage(sc.Vendor[0].Name))
	}
	if len(sc.Flows) > 0 {
		f := &sc.Flows[in.Flow]
		if f.Class != "" { // a provider without classes (throttle-fcfs) ignores it
			ctx = throttle.WithPriority(ctx, f.Class)
		}
		if f.Tenant != "" {
			ctx = throttle.WithBusiness(ctx, f.Tenant)
		}
	}
	out := doThrottleOnce(ctx, client, spec, in, rec)
	if len(sc.Flows) > 0 {
		w := int64(-1)
		if out == OutSent || out == OutThrottled {
			w = int64(sl.wait)
		}
		rec.record(Record{Flow: in.Flow, At: in.At, Out: out, Wait: w})
	}
}

// doThrottleOnce sends one request through throttle and returns its
// outcome, counted.
func doThrottleOnce(ctx context.Context, client *http.Client, spec *workerSpec, in Intent, rec *recorder) string {
	req, err := newRequest(ctx, spec, in.Business)
	if err != nil {
		rec.outcome(OutOther, err)
		return OutOther
	}
	req.Header.Set(IntentHeader, strconv.FormatInt(in.At, 10))
	resp, err := client.Do(req)
	if err != nil {
		var le *throttle.LimitError
		out := OutOther
		switch {
		case errors.As(err, &le):
			if sl, ok := ctx.Value(slotKey{}).(*slot); ok { // refused: added until the refusal
				rec.added(time.Since(sl.began), false)
			}
			out, err = OutRefused, nil
		case errors.Is(err, throttle.ErrStoreUnavailable):
			out = OutStoreError
		case ctx.Err() != nil:
			out, err = OutCancelled, nil
		}
		rec.outcome(out, err)
		return out
	}
	out, _ := finish(resp, rec)
	return out
}

// finish reads and closes a vendor response and counts it; it returns
// the outcome, and the vendor's Retry-After when it throttled the
// request.
func finish(resp *http.Response, rec *recorder) (string, time.Duration) {
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		rec.outcome(OutThrottled, nil)
		secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || secs < 0 {
			secs = 1
		}
		return OutThrottled, time.Duration(min(secs, 60)) * time.Second
	}
	if resp.StatusCode != http.StatusOK {
		rec.outcome(OutOther, fmt.Errorf("status %d", resp.StatusCode))
		return OutOther, 0
	}
	rec.outcome(OutSent, nil)
	return OutSent, 0
}

// doLimiter runs one request through a hand-written limiter: in wait mode
// it retries after each refusal's retry-after until its max wait has
// passed; a reserved slot is slept for; a 429 makes this goroutine sleep
// the vendor's Retry-After (nothing is shared with the rest of the fleet).
func doLimiter(ctx context.Context, client *http.Client, lim limiter, spec *workerSpec, in Intent, rec *recorder) {
	sc := &spec.Scenario
	began := time.Now()
	var earliest time.Time
	deadline, _ := ctx.Deadline()
	if sc.Wait {
		deadline = minTime(deadline, began.Add(sc.MaxWait))
	} else {
		deadline = minTime(deadline, began)
	}
	for {
		t0 := time.Now()
		v, err := lim.acquire(ctx, in.Business, max(deadline.Sub(t0), 0))
		t1 := time.Now()
		rec.latency(t1.Sub(t0))
		if err != nil {
			if ctx.Err() != nil {
				rec.outcome(OutCancelled, nil)
			} else {
				rec.outcome(OutStoreError, err)
			}
			return
		}
		if v.ok {
			earliest = t0.Add(v.wait)
			if v.wait > 0 {
				at := t1.Add(v.wait)
				if !sleepCtx(ctx, v.wait) {
					rec.outcome(OutCancelled, nil)
					return
				}
				rec.accuracy(time.Since(at))
			}
			break
		}
		if !sc.Wait || time.Now().Add(v.retryAfter).After(deadline) {
			rec.outcome(OutRefused, nil)
			return
		}
		if !sleepCtx(ctx, max(v.retryAfter, 100*time.Microsecond)) {
			rec.outcome(OutCancelled, nil)
			return
		}
	}
	req, err := newRequest(ctx, spec, in.Business)
	if err != nil {
		rec.outcome(OutOther, err)
		return
	}
	req.Header.Set(SlotHeader, strconv.FormatInt(earliest.UnixNano(), 10))
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			rec.outcome(OutCancelled, nil)
		} else {
			rec.outcome(OutOther, err)
		}
		return
	}
	if _, ra := finish(resp, rec); ra > 0 {
		sleepCtx(ctx, ra)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// warmUp opens every goroutine's connections to Redis and to the vendor
// before the run starts (dialing hundreds of connections at once takes
// this machine's loopback a second or more, which would be measured as
// decision latency), and loads throttle's script. The vendor neither
// counts nor records its warm-up path.
func warmUp(spec *workerSpec, rdb *redis.Client, httpBase *http.Transport, st *redisstore.Store) {
	ctx, cancel := context.WithDeadline(context.Background(), spec.Start)
	defer cancel()
	if st != nil {
		// Two decisions, so that Redis has both decision scripts: a lone
		// GCRA limit is lone.lua's, the same one with a rolling window
		// beside it reserve.lua's (lone.lua takes GCRA and calendar
		// windows only). A script first sent during the run would count
		// twice (EVALSHA refused, then EVAL).
		l := &quota.Limit{Name: "warmup", Kind: quota.GCRA, Rate: 1000, Period: time.Second}
		w := &quota.Limit{Name: "warmup-rolling", Kind: quota.Rolling, Rate: 1000, Period: time.Minute}
		_, _ = st.Reserve(ctx, &quota.Request{Tag: "warmup", Items: []quota.Item{{Limit: l, Key: "warmup"}}})
		_, _ = st.Reserve(ctx, &quota.Request{Tag: "warmup", Items: []quota.Item{{Limit: l, Key: "warmup"}, {Limit: w, Key: "warmup-rolling"}}})
	}
	var wg sync.WaitGroup
	for g := 0; g < spec.Goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = rdb.Ping(ctx).Err()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, spec.VendorURL+warmUpPath, nil)
			if err != nil {
				return
			}
			if resp, err := httpBase.RoundTrip(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
	}
	wg.Wait()
}
