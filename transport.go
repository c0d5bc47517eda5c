package throttle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// DefaultPause is how long a scope is paused after an upstream throttle
// that names no delay. The retry's own backoff may wait longer. A throttle
// whose delay is explicitly zero (Retry-After: 0) pauses nothing: the
// vendor asked for a retry at once.
const DefaultPause = time.Second

// DefaultStoreRetry is how long the transport keeps a failed store out of
// the hot path before one request probes it again, so a dead or hung store
// costs one timeout per interval (after the requests already in flight when
// it failed) instead of one per request.
const DefaultStoreRetry = time.Second

// Transport is an http.RoundTripper that keeps the requests it sends inside
// the limits of their provider: for each request it resolves the provider
// and its limit stack, asks the store once for the earliest slot every
// limit admits, waits for it (or refuses at once with a *LimitError), and
// sends. A response that says the vendor throttled the request pauses the
// scope in the store, fleet-wide; the response itself is returned as it
// is. Requests to hosts no provider claims pass straight through.
//
// Transport does not retry; NewClient puts go-retryablehttp around it so
// that every attempt, retries included, is throttled. A Transport is safe
// for concurrent use and never modifies the request it is given.
type Transport struct {
	base     http.RoundTripper
	registry *providers.Registry
	// observers are told about every event, in the order they were added.
	observers []Observer
	clock     quota.Clock
	// failover holds the store (set by WithStore and WithStoreRetry) and
	// decides when it fails.
	failover failover
	// leases holds the leases of the requests in flight.
	leases *leases
	// ahead holds the quota taken ahead (ahead.go).
	ahead aheadPools
	// plans keeps what the WithPlans function named (plans.go), and
	// planOf is its lookup, made once so that a request copies it
	// without an allocation; both nil without WithPlans.
	plans  *planCache
	planOf func(business string) string

	retry retrySettings
}

// An Option configures New and NewClient.
type Option interface{ apply(*Transport) error }

type optionFunc func(*Transport) error

func (f optionFunc) apply(t *Transport) error { return f(t) }

// WithBase sets the transport that sends requests. The default is
// http.DefaultTransport.
func WithBase(rt http.RoundTripper) Option {
	return optionFunc(func(t *Transport) error {
		if rt == nil {
			return errors.New("throttle: WithBase(nil)")
		}
		t.base = rt
		return nil
	})
}

// WithRegistry sets the providers and their limits. The default is the
// shipped catalog (config/providers.yaml, embedded). Reload the registry to
// change limits live.
func WithRegistry(r *providers.Registry) Option {
	return optionFunc(func(t *Transport) error {
		if r == nil {
			return errors.New("throttle: WithRegistry(nil)")
		}
		t.registry = r
		return nil
	})
}

// WithStore sets the store that keeps the quota state: a
// redisstore.Store for a fleet. The default is an in-process MemoryStore,
// which throttles this process alone.
func WithStore(s quota.Store) Option {
	return optionFunc(func(t *Transport) error {
		if s == nil {
			return errors.New("throttle: WithStore(nil)")
		}
		t.failover.store = s
		return nil
	})
}

// WithObserver adds o to those told about decisions, waits, refusals,
// upstream throttles and store errors (see SlogObserver and the packages
// prom and otel). Each call adds one, as listeners do elsewhere (otelhttp's
// WithFilter, go-redis's AddHook): a log, Prometheus and OpenTelemetry at
// once need no glue,
//
//	throttle.WithObserver(throttle.SlogObserver(logger)),
//	throttle.WithObserver(promObs),
//	throttle.WithObserver(otelObs),
//
// and an option list put together in several places loses none of them.
// Observers are called in the order they were added.
func WithObserver(o Observer) Option {
	return optionFunc(func(t *Transport) error {
		if o == nil {
			return errors.New("throttle: WithObserver(nil)")
		}
		t.observers = append(t.observers, o)
		return nil
	})
}

// WithClock sets the clock the transport waits with. Tests only: the
// default is the real clock.
func WithClock(c quota.Clock) Option {
	return optionFunc(func(t *Transport) error {
		if c == nil {
			return errors.New("throttle: WithClock(nil)")
		}
		t.clock = c
		return nil
	})
}

// WithStoreRetry sets how long a failed store is left alone before one
// request probes it again (DefaultStoreRetry). Meanwhile each provider's
// on_store_error policy decides.
func WithStoreRetry(d time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if d <= 0 {
			return fmt.Errorf("throttle: WithStoreRetry(%v): must be positive", d)
		}
		t.failover.retry = d
		return nil
	})
}

// WithRetries sets NewClient's retries: at most max retries after the first
// attempt, with exponential backoff from min, capped at cap, where the
// vendor names no delay. The defaults are 4, DefaultRetryWaitMin (500ms)
// and DefaultRetryWaitMax (30s). New ignores it.
func WithRetries(max int, min, cap time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if max < 0 || min <= 0 || cap < min {
			return fmt.Errorf("throttle: WithRetries(%d, %v, %v): want max >= 0 and 0 < min <= cap", max, min, cap)
		}
		t.retry.max, t.retry.min, t.retry.cap = max, min, cap
		return nil
	})
}

// WithRetryBodyLimit sets the largest request body, in bytes, that
// NewClient retries; the default is DefaultRetryBodyLimit. A request with
// a larger body, a body of unknown length or one without GetBody is sent
// once and never buffered; its response, a 429 included, goes to the
// caller. Zero retries only requests without a body. New ignores it.
func WithRetryBodyLimit(n int64) Option {
	return optionFunc(func(t *Transport) error {
		if n < 0 {
			return fmt.Errorf("throttle: WithRetryBodyLimit(%d): must not be negative", n)
		}
		t.retry.bodyLimit = n
		return nil
	})
}

// New returns a Transport. With no options it throttles the shipped
// catalog's providers in this process alone, sending through
// http.DefaultTransport.
func New(opts ...Option) (*Transport, error) {
	t := &Transport{
		base:     http.DefaultTransport,
		clock:    quota.SystemClock{},
		failover: failover{retry: DefaultStoreRetry},
		retry:    defaultRetry,
	}
	for _, o := range opts {
		if err := o.apply(t); err != nil {
			return nil, err
		}
	}
	if t.registry == nil {
		cfg, err := providers.LoadCatalog()
		if err != nil {
			return nil, fmt.Errorf("throttle: the shipped catalog: %w", err)
		}
		t.registry = providers.NewRegistry(cfg)
	}
	if t.plans != nil && t.plans.f != nil {
		t.plans.clock = t.clock
		t.planOf = t.plans.planOf
	} else {
		t.plans = nil // WithPlanCache alone
	}
	t.leases = &leases{clock: t.clock, observe: t.observe}
	f := &t.failover
	f.heldShared = t.leases.heldShared
	f.clock, f.observe = t.clock, t.observe
	f.local = quota.NewMemoryStore(quota.MemoryOptions{Clock: t.clock})
	if f.store == nil {
		f.store = f.local
	}
	return t, nil
}

// NewClient returns an *http.Client for any vendor SDK that accepts one:
// hashicorp/go-retryablehttp retries around a Transport, so that every
// attempt, retries included, waits for its own slot. Throttled responses
// (by the provider's signals) are retried for any method after the
// vendor's delay; connection errors and 5xx only for idempotent requests
// or ones with an Idempotency-Key. No retry sleeps past the request's
// context deadline. When retries run out the caller gets the last
// response, not an error. A refusal by the throttle itself (ErrLimited,
// ErrStoreUnavailable) is returned at once, never retried. Redirects are
// followed as the returned client's CheckRedirect says, each hop throttled
// as a request of its own; the retrying layer never follows one itself.
//
// A request body is never buffered. A body is retried only when the
// request can make a fresh copy of it (GetBody, which http.NewRequest sets
// for a *bytes.Buffer, *bytes.Reader or *strings.Reader) and its length
// is at most the retry body limit (DefaultRetryBodyLimit,
// WithRetryBodyLimit): its ContentLength or, where the request does not
// say it, the length of one copy, streamed to nowhere; each attempt sends
// a copy from GetBody. Any other body (a stream, a pipe, a file, a body over the
// limit) is sent once, still throttled and still pausing the scope on a
// vendor throttle, and its response, a 429 included, is the caller's.
//
// A vendor's billing stop (OpenAI's 429 "insufficient_quota" with
// signals body: openai) is neither retried nor paused on: the client
// returns a *QuotaError matching ErrQuotaExhausted instead of the
// response, so that the caller, or an SDK given this client, does not
// take it for a throttle worth retrying. (An SDK that retries transport
// errors gets the same error again at once: the retries are NewClient's
// job, turn the SDK's off.) The Transport itself returns the response.
//
// The options are New's, plus WithRetries and WithRetryBodyLimit.
func NewClient(opts ...Option) (*http.Client, error) {
	t, err := New(opts...)
	if err != nil {
		return nil, err
	}
	return t.Client(), nil
}

// Client returns an *http.Client that retries around t, as NewClient does,
// sending any body it will not retry once and unbuffered.
func (t *Transport) Client() *http.Client {
	if t.registry == nil {
		return &http.Client{Transport: t} // every request fails clearly
	}
	return retryClient(t, t.registry, t.clock, t.retry)
}

// errZeroTransport is what a Transport not made by New answers: it has no
// providers, store or base transport to send with.
var errZeroTransport = errors.New("throttle: a zero Transport cannot send: make one with throttle.New or throttle.NewClient")

// RoundTrip throttles and sends req. It returns a *LimitError (matching
// ErrLimited) when the request could not go within its max wait or its
// context's deadline, before sending or sleeping (after waiting, when a
// concurrency limit was full and no lease came back in time); the
// context's error when
// it ended while the request waited; an error matching ErrStoreUnavailable
// when the store failed and the provider fails closed; an error matching
// quota.ErrState, whatever the provider's policy, when the store works but
// could not decide this request (its keys hold something else). A
// throttled response (429 and the vendor's equivalents) is returned as a
// response.
//
// A request whose stack has a concurrency limit holds a lease from its
// decision until its response body has been read to EOF or closed (or
// until the round trip fails): close every response body. The transport
// renews the leases while the request is in flight; those of a body that
// is never read nor closed expire a lease TTL after the last read. A
// request that finds every lease held waits for one within its max wait
// (docs/decisions.md, "Waiting for a lease").
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.registry == nil {
		closeBody(req)
		return nil, errZeroTransport
	}
	ctx := req.Context()
	in := input(ctx)
	in.PlanOf = t.planOf
	res, ok, err := t.registry.Resolve(req, in)
	if !ok {
		return t.base.RoundTrip(req)
	}
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("throttle: %s: %w", res.Provider.Name, err)
	}
	p := res.Provider
	if len(res.Request.Items) == 0 && len(res.Request.Pauses) == 0 {
		return t.send(req, &res, nil)
	}
	q := res.Request
	limit := q.MaxWait
	start := t.clock.Now()
	if dl, ok := ctx.Deadline(); ok {
		// A context's deadline runs on the real clock, whatever t.clock is.
		if left := time.Until(dl); left < q.MaxWait {
			q.MaxWait = max(left, 0)
		}
	}
	rsv, err := t.reserve(ctx, &res, &q)
	if err == nil {
		rsv, err = t.admit(ctx, p, &q, rsv, limit, start.Add(q.MaxWait))
	}
	if err != nil {
		if errors.Is(err, errFailOpen) {
			return t.send(req, &res, nil)
		}
		closeBody(req)
		return nil, err
	}
	if !rsv.Allowed { // shadow mode: refused, sent anyway
		return t.send(req, &res, rsv)
	}
	return t.sendAdmitted(req, &res, &q, rsv)
}

// admit takes rsv, q's decision, to the moment the request may go: it
// waits for a lease when a concurrency limit refused it (waitLease), and
// for its slot when one was reserved ahead. A pause set after the
// decision that holds the slot back (another request's vendor throttle,
// in this process or, heard through the store, another) makes it decide
// again once its slot comes: the store then puts it after the pause,
// behind the requests that reserved before it (their slots came first),
// so the fleet keeps its arrival order (docs/decisions.md, "A pause set
// while requests wait"). A decision deferred to an appointment in its
// tenant's lane of a fair limit is kept (appointments). limit is the max
// wait before the context's deadline cut it, and end when the wait must
// be over. It returns the decision the request goes on (refused or
// deferred only in shadow mode), a *LimitError, or the store's or the
// context's error.
func (t *Transport) admit(ctx context.Context, p *providers.Provider, q *quota.Request, rsv *quota.Reservation, limit time.Duration, end time.Time) (*quota.Reservation, error) {
	shadow := p.Mode == providers.Shadow
	cut := q.MaxWait < limit // by the context's deadline
	calls := 1               // the decisions the request took: Event.Calls
	var stop func()
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for {
		var err error
		// Keep each appointment, and wait for a lease when a
		// concurrency limit refused the decision: once per decision
		// (the lease wait's last refusal by the cap is final), and again
		// after each appointment, whose decision is a new one.
		for leased := false; !shadow; {
			if rsv.Deferred {
				q, rsv, err = t.appointments(ctx, p, q, rsv, end, &calls)
				leased = false
			} else if !leased && !rsv.Allowed && q.MaxWait > 0 && leaseDecided(q, rsv.Decider) {
				rsv, err = t.waitLease(ctx, p, q, rsv, &calls)
				leased = true
			} else {
				break
			}
			if err != nil {
				return nil, err
			}
		}
		decider := deciderName(q, rsv.Decider)
		if rsv.Deferred { // shadow mode: sent at once, appointment or not
			t.observe(ctx, Event{Kind: Deferred, Provider: p.Name, Limit: decider, Class: p.ClassName(q.Class),
				Wait: rsv.RetryAfter, Shadow: true, Calls: calls, Items: q.Items, Statuses: rsv.Limits})
			return rsv, nil
		}
		if !rsv.Allowed {
			t.observe(ctx, Event{Kind: Refused, Provider: p.Name, Limit: decider, Class: p.ClassName(q.Class),
				Wait: rsv.RetryAfter, Shadow: shadow, Calls: calls, Items: q.Items, Statuses: rsv.Limits})
			if shadow {
				return rsv, nil
			}
			return nil, &LimitError{
				Provider:   p.Name,
				Limit:      decider,
				Scope:      deciderScope(p, q, rsv.Decider),
				RetryAfter: rsv.RetryAfter,
				// No lease came back within the wait: had the deadline been
				// the max wait, one might have.
				Deadline: cut && (rsv.RetryAfter <= limit || leaseDecided(q, rsv.Decider)),
			}
		}
		t.observe(ctx, Event{Kind: Decided, Provider: p.Name, Limit: decider, Class: p.ClassName(q.Class),
			Wait: rsv.Wait, Shadow: shadow, Calls: calls, Items: q.Items, Statuses: rsv.Limits})
		if rsv.Wait <= 0 || shadow {
			return rsv, nil
		}
		if stop == nil {
			stop = t.failover.watchPauses(ctx, p)
		}
		if err := t.wait(ctx, rsv); err != nil {
			t.observe(ctx, Event{Kind: Cancelled, Provider: p.Name, Limit: decider, Class: p.ClassName(q.Class), Wait: rsv.Wait})
			return nil, fmt.Errorf("throttle: %s: waiting %v for a slot: %w", p.Name, rsv.Wait, err)
		}
		t.observe(ctx, Event{Kind: Waited, Provider: p.Name, Limit: decider, Class: p.ClassName(q.Class), Wait: rsv.Wait})
		if t.failover.pausedFor(q) <= 0 {
			return rsv, nil
		}
		// The slot's time has come, so it stays charged (Cancel gives
		// nothing back then): on the safe side. Its leases go back, or
		// the new decision would hold a second set.
		if rsv.HoldsLeases() {
			if err := rsv.Release(ctx); err != nil {
				t.observe(ctx, Event{Kind: StoreError, Provider: p.Name, Class: p.ClassName(q.Class), Err: err})
			}
		}
		r := *q
		r.MaxWait = max(end.Sub(t.clock.Now()), 0)
		q = &r
		calls++
		if rsv, err = t.failover.reserve(ctx, p, q); err != nil {
			return nil, err
		}
	}
}

// waitLease waits for a lease of the concurrency limit that refused rsv,
// a decision of q, for at most q.MaxWait (docs/decisions.md "Waiting for
// a lease"). The request joins the process's queue for that limit's key
// (again when another concurrency limit of the stack refuses it later),
// decides again at once (a release between the refusal and the joining
// would go unseen), and then after each wake: a release of a lease of
// the key (a notification from the store, in arrival order, one waiter
// per lease), the soonest lease expiry the last decision reported
// (RetryAfter: the one time a lease is known to come back), or the end of
// the wait. The refused decisions charged nothing, so each new one is a
// whole decision of the stack. It returns the first decision that admits
// the request, or the last one, refused (by another limit, or by the
// concurrency limit when the wait ran out); the context's error when it
// ended first. calls counts the decisions taken.
func (t *Transport) waitLease(ctx context.Context, p *providers.Provider, q *quota.Request, rsv *quota.Reservation, calls *int) (*quota.Reservation, error) {
	start := t.clock.Now()
	end := start.Add(q.MaxWait)
	var w *quota.LeaseWaiter
	key := "" // the key w waits on; an item's key is never empty
	for {
		lim := q.Items[rsv.Decider]
		if lim.Key != key {
			// Queued from now on: decide again at once, or a release since
			// the last decision would go unseen.
			w.Done(false)
			w, key = t.failover.watch(ctx, p, q.Tag, lim.Key), lim.Key
		} else {
			left := end.Sub(t.clock.Now())
			if left <= 0 {
				w.Done(false)
				return rsv, nil
			}
			timer := t.clock.NewTimer(min(rsv.RetryAfter, left))
			select {
			case <-w.C():
				timer.Stop()
			case <-timer.C():
			case <-ctx.Done():
				timer.Stop()
				w.Done(false)
				waited := t.clock.Now().Sub(start)
				t.observe(ctx, Event{Kind: Cancelled, Provider: p.Name, Limit: lim.Limit.Name, Class: p.ClassName(q.Class), Wait: waited})
				return nil, fmt.Errorf("throttle: %s: waiting %v for a lease of %q: %w", p.Name, waited, lim.Limit.Name, ctx.Err())
			}
		}
		woken := w.Rearm()
		r := *q
		r.MaxWait = max(end.Sub(t.clock.Now()), 0)
		*calls++
		next, err := t.failover.reserve(ctx, p, &r)
		if err != nil {
			w.Done(woken)
			return nil, err
		}
		rsv = next
		if rsv.Allowed {
			w.Done(false)
			t.observe(ctx, Event{Kind: Waited, Provider: p.Name, Limit: lim.Limit.Name, Class: p.ClassName(q.Class), Wait: t.clock.Now().Sub(start)})
			return rsv, nil
		}
		if !leaseDecided(q, rsv.Decider) {
			w.Done(woken) // the lease it was woken for is still free
			return rsv, nil
		}
	}
}

// sendAdmitted sends a request its stack admitted: while it holds its
// leases, if any (released when the response is done), and metering its
// response body when it settles its actual costs (see Settler).
func (t *Transport) sendAdmitted(req *http.Request, res *providers.Resolution, q *quota.Request, rsv *quota.Reservation) (*http.Response, error) {
	ctx := req.Context()
	var h *leaseHold
	if rsv.HoldsLeases() {
		var again func(context.Context) (*quota.Reservation, error)
		if t.failover.inUse() {
			again = func(ctx context.Context) (*quota.Reservation, error) {
				return t.failover.retakeLeases(ctx, res.Provider, q)
			}
		}
		h = t.leases.hold(ctx, res.Provider.Name, res.Class(), q, rsv, again)
	}
	resp, err := t.send(req, res, rsv)
	if h != nil {
		h.active.Add(-1)
	}
	if err != nil || resp == nil || resp.Body == nil {
		if h != nil {
			h.end(ctx, err)
		}
		return resp, err
	}
	s := settlerFrom(ctx)
	if s == nil && res.Settle != nil {
		s = res.Settle.Meter
	}
	if s != nil {
		if m := s(resp); m != nil {
			resp.Body = &meteredBody{ReadCloser: resp.Body, m: m, settle: settleFunc(ctx, t.observe, res.Provider.Name, res.Class(), q, rsv)}
		}
	}
	if h != nil {
		resp.Body = &leasedBody{ReadCloser: resp.Body, h: h, ctx: ctx}
	}
	return resp, nil
}

// wait sleeps until the reserved slot, or gives the slot back when ctx
// ends first.
func (t *Transport) wait(ctx context.Context, rsv *quota.Reservation) error {
	timer := t.clock.NewTimer(rsv.Wait)
	select {
	case <-timer.C():
		return nil
	case <-ctx.Done():
		timer.Stop()
		// The request's context is done; the refund still needs one.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := rsv.Cancel(cctx); err != nil {
			return errors.Join(ctx.Err(), err)
		}
		return ctx.Err()
	}
}

// send sends req and, when the vendor says it throttled it, pauses the
// request's scope fleet-wide, and the provider's own pause too when the
// vendor says the limit hit is its global one (Discord's global: true).
// A billing stop (backoff.Verdict.QuotaExhausted) is no throttle: it
// pauses nothing, and is returned as the response it is. With a sync
// configured, it first reconciles the store with the vendor's counters
// (syncCounters); rsv is the request's reservation, nil when the store
// did not decide it.
func (t *Transport) send(req *http.Request, res *providers.Resolution, rsv *quota.Reservation) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp == nil {
		return resp, err
	}
	p := res.Provider
	ctx := req.Context()
	v := backoff.Classify(resp, &p.Signals, t.clock.Now())
	t.syncCounters(ctx, resp, res, rsv)
	if !v.Throttled {
		return resp, nil
	}
	t.observe(ctx, Event{Kind: UpstreamThrottled, Provider: p.Name, Class: res.Class(), Status: resp.StatusCode, Wait: v.Delay, Err: v.Err})
	if res.Pause == "" || res.Request.Tag == "" {
		return resp, nil
	}
	d := v.Delay
	if v.Source == "" { // no delay named; a zero one means "now"
		d = DefaultPause
	}
	if d <= 0 {
		return resp, nil
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	why := throttledReason(req.URL.Host, resp.StatusCode, v, d)
	if t.failover.pause(pctx, p, res.Request.Tag, res.Pause, d, why) {
		t.observe(ctx, Event{Kind: Paused, Provider: p.Name, Limit: "pause", Class: res.Class(), Wait: d})
	}
	// A tenant's requests read their own pause alone (one hash tag per
	// decision): the provider's pause holds back the rest.
	if tag, key := p.PauseKey(""); v.Global && (tag != res.Request.Tag || key != res.Pause) {
		if t.failover.pause(pctx, p, tag, key, d, why) {
			t.observe(ctx, Event{Kind: Paused, Provider: p.Name, Limit: "pause", Class: res.Class(), Wait: d})
		}
	}
	return resp, nil
}

// syncTimeout bounds the store calls a response makes: the request's own
// context may end as soon as the caller has the response.
const syncTimeout = 2 * time.Second

// syncCounters reconciles the store with the vendor's counters on resp,
// as res's sync field says (docs/decisions.md, "Vendor counters"): it
// drains the reservation's limits to the vendor's figures, and pauses the
// scope when a counter says none remain until a reset. Per response it
// costs one read of the counters and, only when the vendor reports less
// than the decision believed, one store call. rsv is the request's
// reservation, nil when the store did not decide it.
func (t *Transport) syncCounters(ctx context.Context, resp *http.Response, res *providers.Resolution, rsv *quota.Reservation) {
	var decided []quota.Status
	if rsv != nil && rsv.Allowed {
		decided = rsv.Limits
	}
	cs := res.ReadCounters(resp, t.clock.Now(), decided)
	if len(cs.Observed) == 0 && cs.Hold <= 0 {
		return
	}
	p := res.Provider
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), syncTimeout)
	defer cancel()
	if len(cs.Observed) > 0 {
		t.failover.sync(sctx, p, rsv, cs.Observed)
	}
	if cs.Hold > 0 && res.Pause != "" && res.Request.Tag != "" {
		if t.failover.pause(sctx, p, res.Request.Tag, res.Pause, cs.Hold, countersReason(responseHost(resp), resp.StatusCode, cs.Hold)) {
			t.observe(ctx, Event{Kind: Paused, Provider: p.Name, Limit: "pause", Class: res.Class(), Wait: cs.Hold, Status: resp.StatusCode})
		}
	}
}

func (t *Transport) observe(ctx context.Context, e Event) {
	for _, o := range t.observers {
		o.Observe(ctx, e)
	}
}

// input collects what the request's context says about it.
func input(ctx context.Context) providers.Input {
	in := providers.Input{Business: businessFrom(ctx), Cost: costFrom(ctx), Priority: priorityFrom(ctx)}
	if d, ok := maxWaitFrom(ctx); ok {
		in.MaxWait = &d
	}
	if l, _ := ctx.Value(labelsKey).(*label); l != nil {
		in.Labels = map[string]string{}
		for ; l != nil; l = l.next {
			if _, newer := in.Labels[l.name]; !newer {
				in.Labels[l.name] = l.value
			}
		}
	}
	if c, _ := ctx.Value(limitCostsKey).(*limitCost); c != nil {
		in.Costs = map[string]int64{}
		for ; c != nil; c = c.next {
			if _, newer := in.Costs[c.limit]; !newer {
				in.Costs[c.limit] = c.n
			}
		}
	}
	return in
}

// leaseDecided reports whether the decider is a concurrency limit.
func leaseDecided(q *quota.Request, d int) bool {
	return d >= 0 && d < len(q.Items) && q.Items[d].Limit.Kind == quota.Concurrency
}

func deciderName(q *quota.Request, d int) string {
	switch {
	case d == quota.PausedDecider:
		return "pause"
	case d >= 0 && d < len(q.Items):
		return q.Items[d].Limit.Name
	}
	return ""
}

// deciderScope is the scope part of the deciding limit's key: the scope
// value as it is stored (hashed when it was long or unsafe).
func deciderScope(p *providers.Provider, q *quota.Request, d int) string {
	if d < 0 || d >= len(q.Items) {
		return ""
	}
	k, _ := p.ParseKey(q.Tag, q.Items[d].Key, false)
	return k.Part
}

// closeBody closes the request body: a RoundTripper must close it, even
// when it returns an error without sending.
func closeBody(req *http.Request) {
	if req.Body != nil && req.Body != http.NoBody {
		_ = req.Body.Close()
	}
}
