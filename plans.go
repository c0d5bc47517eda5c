package throttle

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// DefaultPlanTTL is how long the transport keeps the plan that the
// WithPlans function named for a business before it asks again: a plan
// change reaches every process within it. Plans change when a customer
// changes its subscription, so half a minute is immediate to a person
// while a busy tenant costs its database one lookup per process per
// half minute.
const DefaultPlanTTL = 30 * time.Second

// DefaultPlanCacheSize is how many businesses' plans the transport keeps
// at most: about 10 MB when full (an entry is about 150 bytes with its
// map slot). A process that serves more businesses within DefaultPlanTTL
// asks the function again for some of them; raise it with WithPlanCache.
const DefaultPlanCacheSize = 65536

// maxPlanName bounds the plan names the cache keeps: no provider defines a
// longer one (a plan's name is at most 64 bytes), so a longer answer is
// kept cut, as unknown as it was.
const maxPlanName = 65

// WithPlans sets the function that names a business's plan (see
// providers.Plan): a lookup in the caller's database, for providers that
// define plans. It is asked for the business of a request to such a
// provider (WithBusiness) and its answer kept for DefaultPlanTTL in a
// cache of DefaultPlanCacheSize businesses (WithPlanCache), so a plan
// change takes effect on the business's first request after that; it
// moves no key, only the figures the request is decided at.
//
// The function is called without the request's context, at most once at
// a time per business (concurrent requests of a business wait for the
// first lookup, and once its answer is kept, one request refreshes it
// while the others go on with the kept answer): it must return quickly,
// or bound its own lookup. It must be safe for concurrent use. Its answer
// is:
//
//   - a plan some provider defines: the business's plan; a provider
//     that does not define it applies its default_plan;
//   - "": the function does not know (the business is not in the
//     database, or the lookup failed and the caller prefers the default):
//     the configuration's tenants map, then the provider's default_plan,
//     apply;
//   - a name no provider defines: the request fails before anything is
//     sent, with an error matching providers.ErrUnknownPlan, rather than
//     being held to another plan's figures (which would overspend the
//     vendor account or starve the business, silently).
//
// Without WithPlans, the configuration's tenants map names the plans.
func WithPlans(f func(business string) (plan string)) Option {
	return optionFunc(func(t *Transport) error {
		if f == nil {
			return errors.New("throttle: WithPlans(nil)")
		}
		if t.plans == nil {
			t.plans = &planCache{ttl: DefaultPlanTTL, size: DefaultPlanCacheSize}
		}
		t.plans.f = f
		return nil
	})
}

// WithPlanCache sets how long the plan WithPlans named for a business is
// kept (ttl, DefaultPlanTTL) and for how many businesses at most (size,
// DefaultPlanCacheSize): a full cache forgets the entry closest to
// expiry among a few picked at random. It has no effect without
// WithPlans.
func WithPlanCache(ttl time.Duration, size int) Option {
	return optionFunc(func(t *Transport) error {
		if ttl <= 0 || size <= 0 {
			return fmt.Errorf("throttle: WithPlanCache(%v, %d): want a positive TTL and size", ttl, size)
		}
		if t.plans == nil {
			t.plans = &planCache{}
		}
		t.plans.ttl, t.plans.size = ttl, size
		return nil
	})
}

// planCache keeps the plans a WithPlans function named, per business, for
// ttl, at most size of them.
type planCache struct {
	f     func(business string) string
	ttl   time.Duration
	size  int
	clock quota.Clock

	mu sync.RWMutex
	m  map[string]*planEntry
}

// planEntry is one business's plan. An entry in the map is never
// modified once its lookup is done: a refresh replaces it.
type planEntry struct {
	plan    string
	expires int64 // clock's Unix ns
	// done is set while the first lookup of the business is in flight,
	// and closed when plan (or failed) is set.
	done chan struct{}
	// failed: the lookup panicked, so the entry was dropped.
	failed bool
	// refreshing: an expired entry's refresh is in flight; the other
	// requests go on with its plan meanwhile.
	refreshing atomic.Bool
}

// evictSample is how many entries a full cache compares to choose the
// one it forgets.
const evictSample = 8

// planOf returns the plan of business, from the cache or the function.
func (c *planCache) planOf(business string) string {
	key := business
	if len(key) > 64 || strings.HasPrefix(key, "#") {
		// A hostile or odd value costs a hash, not its length, per entry.
		// SafePart's hashes start with "#", so a value that does too is
		// hashed as well: no business can name another's entry by its
		// hash.
		key = quota.SafePart(key)
	}
	for {
		c.mu.RLock()
		e := c.m[key]
		c.mu.RUnlock()
		if e == nil {
			var mine bool
			if e, mine = c.insert(key); mine {
				return c.fill(key, business, e)
			}
		}
		if e.done != nil {
			<-e.done
			if e.failed {
				continue // its lookup panicked: look again
			}
			return e.plan
		}
		if c.clock.Now().UnixNano() < e.expires || !e.refreshing.CompareAndSwap(false, true) {
			return e.plan
		}
		return c.refresh(key, business, e)
	}
}

// insert adds a pending entry for key and reports true, or returns the
// entry another request added first.
func (c *planCache) insert(key string) (*planEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil {
		return e, false
	}
	if c.m == nil {
		c.m = make(map[string]*planEntry)
	}
	if len(c.m) >= c.size {
		c.evictLocked()
	}
	e := &planEntry{done: make(chan struct{})}
	// The key may be a slice of a larger string (a header line): keep
	// only its bytes.
	c.m[strings.Clone(key)] = e
	return e, true
}

// evictLocked forgets one entry: among a few (Go's map iteration starts
// at random), the one that expires first, a lookup in flight last.
func (c *planCache) evictLocked() {
	victim, soonest, n := "", int64(math.MaxInt64), 0
	for k, e := range c.m {
		exp := e.expires
		if e.done != nil {
			exp = math.MaxInt64
		}
		if n == 0 || exp < soonest {
			victim, soonest = k, exp
		}
		if n++; n == evictSample {
			break
		}
	}
	delete(c.m, victim)
}

// fill asks the function for the plan of pending entry e and replaces e
// with the answer; if the function panics, e is dropped and the requests
// waiting on it look again.
func (c *planCache) fill(key, business string, e *planEntry) (plan string) {
	ok := false
	defer func() {
		c.mu.Lock()
		if c.m[key] == e {
			if ok {
				c.m[key] = c.entry(plan)
			} else {
				delete(c.m, key)
			}
		}
		c.mu.Unlock()
		e.plan, e.failed = plan, !ok
		close(e.done)
	}()
	plan = c.lookup(business)
	ok = true
	return plan
}

// refresh asks the function again for the plan of e, an expired entry,
// and replaces e with the answer.
func (c *planCache) refresh(key, business string, e *planEntry) string {
	defer e.refreshing.Store(false) // after a panic, another request tries
	plan := c.lookup(business)
	c.mu.Lock()
	if c.m[key] == e {
		c.m[key] = c.entry(plan)
	}
	c.mu.Unlock()
	return plan
}

// entry is a looked-up plan, kept for the TTL from now.
func (c *planCache) entry(plan string) *planEntry {
	return &planEntry{plan: plan, expires: c.clock.Now().Add(c.ttl).UnixNano()}
}

// lookup calls the function, and bounds what is kept of its answer.
func (c *planCache) lookup(business string) string {
	plan := c.f(business)
	if len(plan) > maxPlanName {
		plan = strings.Clone(plan[:maxPlanName])
	}
	return plan
}

// len is how many businesses the cache holds, lookups in flight included.
func (c *planCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
