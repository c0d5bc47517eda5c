package throttle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/config"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// DefaultPause is how long a scope is paused after an upstream throttle
// that names no delay. The retry's own backoff may wait longer. A throttle
// whose delay is explicitly zero (Retry-After: 0) pauses nothing: the
// vendor asked for a retry at once.
const DefaultPause = time.Second

// DefaultStoreRetry is how long the transport keeps a failed store out of
// the hot path before it tries it again, so a dead or hung store costs one
// timeout per interval instead of one per request.
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
	store    quota.Store
	observer Observer
	clock    quota.Clock

	// local is the in-process limiter of providers whose on_store_error
	// is local, and the store when none is given.
	local      *quota.MemoryStore
	storeRetry time.Duration
	// storeDownUntil (Unix µs on clock) keeps a failed store out of the
	// hot path until then.
	storeDownUntil atomic.Int64
	// scaled caches the local-share copies of limits, by original.
	scaled sync.Map

	retry retrySettings
}

type retrySettings struct {
	max      int
	min, cap time.Duration
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
		t.store = s
		return nil
	})
}

// WithObserver sets who is told about decisions, waits, refusals,
// upstream throttles and store errors (see SlogObserver and package prom).
func WithObserver(o Observer) Option {
	return optionFunc(func(t *Transport) error { t.observer = o; return nil })
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

// WithStoreRetry sets how long a failed store is left alone before it is
// tried again (DefaultStoreRetry). Meanwhile each provider's on_store_error
// policy decides.
func WithStoreRetry(d time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if d <= 0 {
			return fmt.Errorf("throttle: WithStoreRetry(%v): must be positive", d)
		}
		t.storeRetry = d
		return nil
	})
}

// WithRetries sets NewClient's retries: at most max retries after the first
// attempt, with exponential backoff from min, capped at cap, where the
// vendor names no delay. The defaults are 4, 500ms and 30s. New ignores it.
func WithRetries(max int, min, cap time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if max < 0 || min <= 0 || cap < min {
			return fmt.Errorf("throttle: WithRetries(%d, %v, %v): want max >= 0 and 0 < min <= cap", max, min, cap)
		}
		t.retry = retrySettings{max, min, cap}
		return nil
	})
}

// New returns a Transport. With no options it throttles the shipped
// catalog's providers in this process alone, sending through
// http.DefaultTransport.
func New(opts ...Option) (*Transport, error) {
	t := &Transport{
		base:       http.DefaultTransport,
		clock:      quota.SystemClock{},
		storeRetry: DefaultStoreRetry,
		retry:      retrySettings{4, 500 * time.Millisecond, 30 * time.Second},
	}
	for _, o := range opts {
		if err := o.apply(t); err != nil {
			return nil, err
		}
	}
	if t.registry == nil {
		cfg, err := providers.Load("config/providers.yaml", config.Providers())
		if err != nil {
			return nil, fmt.Errorf("throttle: the shipped catalog: %w", err)
		}
		t.registry = providers.NewRegistry(cfg)
	}
	t.local = quota.NewMemoryStore(quota.MemoryOptions{Clock: t.clock})
	if t.store == nil {
		t.store = t.local
	}
	return t, nil
}

// RoundTrip throttles and sends req. It returns a *LimitError (matching
// ErrLimited) when the request could not go within its max wait or its
// context's deadline, before sending or sleeping; the context's error when
// it ended while the request waited; an error matching ErrStoreUnavailable
// when the store failed and the provider fails closed. A throttled
// response (429 and the vendor's equivalents) is returned as a response.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	res, ok, err := t.registry.Resolve(req, input(ctx))
	if !ok {
		return t.base.RoundTrip(req)
	}
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("throttle: %s: %w", res.Provider.Name, err)
	}
	p := res.Provider
	if len(res.Request.Items) == 0 && len(res.Request.Pauses) == 0 {
		return t.send(req, &res)
	}
	q := res.Request
	limit := q.MaxWait
	if dl, ok := ctx.Deadline(); ok {
		// A context's deadline runs on the real clock, whatever t.clock is.
		if left := time.Until(dl); left < q.MaxWait {
			q.MaxWait = max(left, 0)
		}
	}
	rsv, err := t.reserve(ctx, p, &q)
	if err != nil {
		if errors.Is(err, errFailOpen) {
			return t.send(req, &res)
		}
		closeBody(req)
		return nil, err
	}
	shadow := p.Mode == providers.Shadow
	decider := deciderName(&q, rsv.Decider)
	if !rsv.Allowed {
		t.observe(ctx, Event{Kind: Refused, Provider: p.Name, Limit: decider,
			Wait: rsv.RetryAfter, Shadow: shadow, Items: q.Items, Statuses: rsv.Limits})
		if shadow {
			return t.send(req, &res)
		}
		closeBody(req)
		return nil, &LimitError{
			Provider:   p.Name,
			Limit:      decider,
			Scope:      deciderScope(&q, rsv.Decider),
			RetryAfter: rsv.RetryAfter,
			Deadline:   q.MaxWait < limit && rsv.RetryAfter <= limit,
		}
	}
	t.observe(ctx, Event{Kind: Decided, Provider: p.Name, Limit: decider,
		Wait: rsv.Wait, Shadow: shadow, Items: q.Items, Statuses: rsv.Limits})
	if rsv.Wait > 0 && !shadow {
		if err := t.wait(ctx, rsv); err != nil {
			t.observe(ctx, Event{Kind: Cancelled, Provider: p.Name, Wait: rsv.Wait})
			closeBody(req)
			return nil, fmt.Errorf("throttle: %s: waiting %v for a slot: %w", p.Name, rsv.Wait, err)
		}
		t.observe(ctx, Event{Kind: Waited, Provider: p.Name, Wait: rsv.Wait})
	}
	return t.send(req, &res)
}

// errFailOpen says: the store failed and the provider fails open.
var errFailOpen = errors.New("throttle: fail open")

// reserve asks the store, or, while the store is failing, applies the
// provider's on_store_error policy.
func (t *Transport) reserve(ctx context.Context, p *providers.Provider, q *quota.Request) (*quota.Reservation, error) {
	if !t.storeResting() {
		rsv, err := t.store.Reserve(ctx, q)
		if err == nil {
			return rsv, nil
		}
		if ctx.Err() != nil || errors.Is(err, quota.ErrInvalid) {
			return nil, fmt.Errorf("throttle: %s: %w", p.Name, err)
		}
		t.storeFailed(ctx, p, err)
		return t.fallback(ctx, p, q, err)
	}
	return t.fallback(ctx, p, q, errStoreResting)
}

// storeResting reports whether the store failed within the last store
// retry interval and is left alone. The in-process store never rests.
func (t *Transport) storeResting() bool {
	return t.store != quota.Store(t.local) && t.clock.Now().UnixMicro() < t.storeDownUntil.Load()
}

func (t *Transport) storeFailed(ctx context.Context, p *providers.Provider, err error) {
	t.storeDownUntil.Store(t.clock.Now().Add(t.storeRetry).UnixMicro())
	t.observe(ctx, Event{Kind: StoreError, Provider: p.Name, Err: err})
}

var errStoreResting = errors.New("the store failed recently and is left alone until its retry interval passes")

func (t *Transport) fallback(ctx context.Context, p *providers.Provider, q *quota.Request, cause error) (*quota.Reservation, error) {
	switch p.OnStoreError {
	case providers.FailOpen:
		t.observe(ctx, Event{Kind: FellBack, Provider: p.Name, Err: errors.New("fail_open")})
		return nil, errFailOpen
	case providers.Local:
		t.observe(ctx, Event{Kind: FellBack, Provider: p.Name, Err: errors.New("local")})
		lq := *q
		lq.Items = make([]quota.Item, len(q.Items))
		for i, it := range q.Items {
			it.Limit = t.scaledLimit(it.Limit, p.LocalShare)
			// Each limit keeps its own cost, capped: a share may be
			// smaller than one costly request.
			it.Cost = min(q.CostOf(i), it.Limit.Capacity())
			lq.Items[i] = it
		}
		rsv, err := t.local.Reserve(ctx, &lq)
		if err != nil {
			return nil, fmt.Errorf("throttle: %s: local limiter: %w", p.Name, err)
		}
		return rsv, nil
	default:
		return nil, fmt.Errorf("throttle: %s: %w: %w", p.Name, ErrStoreUnavailable, cause)
	}
}

// scaledLimit returns l at share of its rate and burst (at least 1 each),
// the in-process limiter's part of a fleet-wide limit.
func (t *Transport) scaledLimit(l *quota.Limit, share float64) *quota.Limit {
	if v, ok := t.scaled.Load(l); ok {
		return v.(*quota.Limit)
	}
	if share <= 0 || share > 1 {
		share = 1
	}
	s := *l
	s.Rate = max(1, int64(math.Floor(float64(l.Rate)*share)))
	if l.Burst > 0 {
		s.Burst = max(1, int64(math.Floor(float64(l.Burst)*share)))
	}
	v, _ := t.scaled.LoadOrStore(l, &s)
	return v.(*quota.Limit)
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
// request's scope fleet-wide.
func (t *Transport) send(req *http.Request, res *providers.Resolution) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp == nil {
		return resp, err
	}
	p := res.Provider
	v := backoff.Classify(resp, &p.Signals, t.clock.Now())
	if !v.Throttled {
		return resp, nil
	}
	ctx := req.Context()
	t.observe(ctx, Event{Kind: UpstreamThrottled, Provider: p.Name, Status: resp.StatusCode, Wait: v.Delay})
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
	paused := false
	if p.OnStoreError == providers.Local && t.store != quota.Store(t.local) {
		// The local limiter decides while the store is down; it must
		// honour the vendor's delay too.
		paused = t.local.Pause(pctx, res.Request.Tag, res.Pause, d) == nil
	}
	if !t.storeResting() {
		if err := t.store.Pause(pctx, res.Request.Tag, res.Pause, d); err != nil {
			t.storeFailed(ctx, p, err)
		} else {
			paused = true
		}
	}
	if paused {
		t.observe(ctx, Event{Kind: Paused, Provider: p.Name, Limit: "pause", Wait: d})
	}
	return resp, nil
}

func (t *Transport) observe(ctx context.Context, e Event) {
	if t.observer != nil {
		t.observer.Observe(ctx, e)
	}
}

// input collects what the request's context says about it.
func input(ctx context.Context) providers.Input {
	in := providers.Input{Business: businessFrom(ctx), Cost: costFrom(ctx)}
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
func deciderScope(q *quota.Request, d int) string {
	if d < 0 || d >= len(q.Items) {
		return ""
	}
	_, scope, _ := strings.Cut(q.Items[d].Key, ":")
	return scope
}

// closeBody closes the request body: a RoundTripper must close it, even
// when it returns an error without sending.
func closeBody(req *http.Request) {
	if req.Body != nil && req.Body != http.NoBody {
		_ = req.Body.Close()
	}
}
