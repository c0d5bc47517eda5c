package fleet

import (
	"fmt"
	"time"

	"github.com/fleetquota/throttle/throttletest"
)

// Algorithms: throttle and what a team would otherwise build.
const (
	AlgoThrottle    = "throttle"
	AlgoFixedWindow = "fixed-window"
	AlgoRedisRate   = "redis_rate"
	AlgoLockGCRA    = "lock-gcra"
	AlgoLocalRate   = "x/time/rate"
	// AlgoThrottleLocal is throttle with on_store_error: local (each
	// process falls back to an in-process limiter at 1/N of every limit
	// while Redis fails); only the Redis failure scenarios run it.
	AlgoThrottleLocal = "throttle-local"
	// AlgoThrottleNoSync is throttle configured without sync: it ignores
	// the vendor's counters, as throttle did before it read them; only
	// the scenarios whose vendor publishes them run it.
	AlgoThrottleNoSync = "throttle-nosync"
	// AlgoThrottleAhead is throttle with its limits taking quota ahead
	// (ahead: {period: Scenario.AheadPeriod}); only the far-redis
	// scenarios run it.
	AlgoThrottleAhead = "throttle-ahead"
	// AlgoThrottleFCFS is throttle configured without what issues 20 and
	// 21 added: no priority classes, no pacing, no fair share, no plans:
	// every limit one first-come-first-served queue, as before them; only
	// the scenarios of those issues run it, as their baseline.
	AlgoThrottleFCFS = "throttle-fcfs"
)

// Algorithms lists every algorithm, in report order.
var Algorithms = []string{AlgoThrottle, AlgoFixedWindow, AlgoRedisRate, AlgoLockGCRA, AlgoLocalRate, AlgoThrottleLocal, AlgoThrottleNoSync,
	AlgoThrottleAhead, AlgoThrottleFCFS}

// variants are run only by the scenarios that name them in Algos.
var variants = map[string]bool{AlgoThrottleLocal: true, AlgoThrottleNoSync: true, AlgoThrottleAhead: true, AlgoThrottleFCFS: true}

// AlgoDoc says what each algorithm is.
var AlgoDoc = map[string]string{
	AlgoThrottle:    "this library: throttle.Transport over redisstore (one Lua script per decision, the whole stack at once)",
	AlgoFixedWindow: "a fixed-window counter per limit: INCR, and EXPIRE on the first hit; rate r burst b counted as b per b/r seconds; limits checked one after the other",
	AlgoRedisRate:   "github.com/go-redis/redis_rate/v10 (GCRA in Lua), one call per limit, not atomic across the stack; a daily quota as a GCRA over 24h",
	AlgoLockGCRA: "GCRA computed in the client under a Redis lock: SET NX PX lock (retried every 2-4 ms), GET each key, SET each key, DEL lock; " +
		"even when failing fast a request waits up to 1 s for the lock, so it can beat the fail-fast ideal",
	AlgoLocalRate: "golang.org/x/time/rate in each process at rate/N and burst/N (a daily quota as a per-process counter of quota/N)",
	AlgoThrottleLocal: "throttle with on_store_error: local, local_share 1/N: while Redis fails each process decides alone at 1/N of every limit " +
		"(run in the Redis failure scenarios only)",
	AlgoThrottleNoSync: "throttle without sync: the same configuration, the vendor's counters ignored, as throttle did before it read them " +
		"(run only where the vendor publishes its counters: shared-account, redis-restart-sync)",
	AlgoThrottleAhead: "throttle with quota taken ahead (`ahead: {period: ...}`): each process reserves the slots it expects to use " +
		"in the next period in one store call and decides its requests against them locally (run in the far-redis scenarios only)",
	AlgoThrottleFCFS: "throttle without priority classes, pacing, fair share or plans: the same limits, first come first served, " +
		"as before issues 20 and 21 (the baseline of priority, daily-pacing and noisy-tenant, run in those only)",
}

// Load is the offered load of a scenario: requests per second for the
// whole fleet, OnRate during the first OnFor of every Cycle and OffRate
// for the rest (Cycle zero: OnRate throughout).
type Load struct {
	OnRate  float64       `json:"on_rate"`
	OffRate float64       `json:"off_rate,omitempty"`
	Cycle   time.Duration `json:"cycle,omitempty"`
	OnFor   time.Duration `json:"on_for,omitempty"`
}

// rateAt is the fleet's offered rate at d into the run.
func (l Load) rateAt(d time.Duration) float64 {
	if l.Cycle <= 0 || d%l.Cycle < l.OnFor {
		return l.OnRate
	}
	return l.OffRate
}

// A Scenario is one run's conditions.
type Scenario struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	Doc   string `json:"doc"`
	// Group, when set, also selects the scenario (-scenarios far-redis
	// runs every far-redis-* scenario).
	Group string `json:"group,omitempty"`
	// FarRedis, when positive, puts a delaying proxy between the workers
	// and Redis that holds every byte this long each way: a Redis in
	// another region (internal/redistest.Delay).
	FarRedis time.Duration `json:"far_redis,omitempty"`
	// AheadPeriod is the period of throttle-ahead's ahead field.
	AheadPeriod time.Duration `json:"ahead_period,omitempty"`
	// Vendor is what the vendor enforces.
	Vendor []Limit `json:"vendor"`
	// Allowance is the arrival jitter every client's configured limit
	// leaves room for: each GCRA/leaky burst is lowered by
	// ceil(Allowance / interval), never below 1.
	Allowance time.Duration `json:"allowance"`
	Load      Load          `json:"load"`
	// Businesses is how many businesses requests are spread over; Hot of
	// them get half of all requests.
	Businesses int `json:"businesses"`
	Hot        int `json:"hot"`
	// Wait: wait for a slot up to MaxWait; otherwise fail fast.
	Wait    bool          `json:"wait"`
	MaxWait time.Duration `json:"max_wait"`
	// Duration of the run.
	Duration time.Duration `json:"duration"`
	// Event is what happens to Redis in the middle: "restart", "pause".
	Event string `json:"event,omitempty"`
	// AOF runs Redis with appendonly yes and appendfsync always.
	AOF bool `json:"aof,omitempty"`
	// Algos restricts the scenario to these algorithms; empty means all
	// but the variants.
	Algos []string `json:"algos,omitempty"`
	// Phantom: another tool with the same credentials sends PhantomRate
	// requests per second per business from PhantomFrom to PhantomTo
	// (offsets into the run), starting with a burst of PhantomBurst each.
	PhantomFrom, PhantomTo time.Duration `json:"-"`
	PhantomRate            float64       `json:"-"`
	PhantomBurst           int           `json:"-"`
	// RetryAfter, when set, is the vendor's Retry-After on every 429,
	// whatever its window says (a vendor that asks for a retry in a
	// second while its window ends later); zero: the time until the
	// request would fit.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// Estimate, when set, makes the vendor a model API and the requests'
	// cost settled after the response: each request reserves Estimate
	// (its max_tokens) and the vendor charges, and its response's usage
	// says, what it actually cost (actualCost: a fifth of Estimate to
	// all of it); throttle settles from the usage (OpenAIUsage).
	Estimate int64 `json:"estimate,omitempty"`
	// Flows, when set, is the offered load instead of Load, Businesses
	// and Hot: streams of one priority class or one tenant each, at
	// their own rates over their own parts of the run (flows.go).
	Flows []Flow `json:"flows,omitempty"`
	// Classes are throttle's priority classes, the top first (the
	// provider's priority field); Reserve what each keeps of every
	// limit from the classes below it, in percent. throttle-fcfs has
	// neither.
	Classes []string       `json:"classes,omitempty"`
	Reserve map[string]int `json:"reserve,omitempty"`
	// Compress runs throttle on a clock Compress times as fast as the
	// real one, shared by every worker and starting at a calendar hour
	// at the run's start (scaledClock): a vendor's hourly window
	// (KindHour) then passes in Period of real time. Zero: the real
	// clock.
	Compress float64 `json:"compress,omitempty"`
}

// kind says which of the quota kinds of issue #11 the scenario measures:
// "concurrency", "settled", "rolling", or "" for none.
func (s *Scenario) kind() string {
	switch {
	case s.Estimate > 0:
		return "settled"
	case len(s.Vendor) == 1 && s.Vendor[0].Kind == KindConcurrent:
		return "concurrency"
	case len(s.Vendor) == 1 && s.Vendor[0].Kind == KindRolling:
		return "rolling"
	}
	return ""
}

// Configured returns the limits the clients are configured with: the
// vendor's, with each burst lowered by the jitter allowance.
func (s *Scenario) Configured() []Limit {
	out := make([]Limit, len(s.Vendor))
	for i, l := range s.Vendor {
		if l.Kind == KindWindow {
			// A window vendor as docs/decisions.md ("Vendor counters")
			// configures one with sync: a GCRA of the published figure,
			// rate and burst, at headroom 95%. Without sync that admits
			// up to twice the figure in a window from idle; with it,
			// the vendor's count drains the burst.
			n := max(1, l.Rate*windowHeadroom/100)
			out[i] = Limit{Name: l.Name, Kind: KindGCRA, Rate: n, Period: l.Period, Burst: n, PerBusiness: l.PerBusiness, Counters: l.Counters}
			continue
		}
		switch l.Kind {
		case KindHour: // a count per window: arrival jitter only matters at the reset
			out[i] = l
			continue
		case KindConcurrent: // a lease spans the vendor's whole count of a request: no jitter to allow for
			out[i] = l
			continue
		case KindRolling:
			// An event the store counted at the end of its bucket is
			// held exactly one period: a request sent on time and one
			// that lagged would then both be inside the vendor's
			// trailing period. The allowance lengthens the period.
			l.Period += s.Allowance
			out[i] = l
			continue
		}
		if l.Kind != KindDay && s.Allowance > 0 {
			t := l.interval()
			cut := (int64(s.Allowance) + t - 1) / t
			l.Burst = max(1, l.Burst-cut)
		}
		out[i] = l
	}
	return out
}

// windowHeadroom is the headroom, in percent, of the clients' limit for a
// window vendor (Configured).
const windowHeadroom = 95

var (
	alpha        = []Limit{{Name: "peak", Kind: KindGCRA, Rate: 200, Period: time.Second, Burst: 20}}
	restartStack = []Limit{
		{Name: "peak", Kind: KindGCRA, Rate: 200, Period: time.Second, Burst: 20},
		{Name: "daily", Kind: KindDay, Rate: 400},
	}
	// restartSyncStack is restartStack with the daily quota's counters
	// published on every response.
	restartSyncStack = []Limit{
		{Name: "peak", Kind: KindGCRA, Rate: 200, Period: time.Second, Burst: 20},
		{Name: "daily", Kind: KindDay, Rate: 400, Counters: true},
	}
)

// Scenarios returns the scenarios of a full run, each scaled by d (the
// length of a run; 0 means 4s).
func Scenarios(d time.Duration) []Scenario {
	if d <= 0 {
		d = 4 * time.Second
	}
	return []Scenario{
		{
			Name: "steady", Title: "Steady overload (10× the limit)",
			Doc:    "Offered 2,000 req/s against a vendor GCRA of 200/s (burst 20), fail fast.",
			Vendor: alpha, Allowance: 20 * time.Millisecond,
			Load: Load{OnRate: 2000}, Businesses: 1, Duration: d,
		},
		{
			Name: "bursts", Title: "Bursts",
			Doc:    "Every second: 200 ms at 3,000 req/s, then 800 ms at 60 req/s (mean 648/s), against 200/s burst 20, fail fast.",
			Vendor: alpha, Allowance: 20 * time.Millisecond,
			Load: Load{OnRate: 3000, OffRate: 60, Cycle: time.Second, OnFor: 200 * time.Millisecond}, Businesses: 1, Duration: d,
		},
		{
			Name: "stack", Title: "Three-limit stack, 50 businesses",
			Doc: "Peak 400/s burst 40 + per-business 10/s burst 10 + a daily quota of 2,000 per UTC calendar day (a real Day window with a small quota, " +
				"so it is exhausted within the run), offered 2,000 req/s over 50 businesses of which 5 hot ones get half, fail fast.",
			Vendor: []Limit{
				{Name: "peak", Kind: KindGCRA, Rate: 400, Period: time.Second, Burst: 40},
				{Name: "business", Kind: KindGCRA, Rate: 10, Period: time.Second, Burst: 10, PerBusiness: true},
				{Name: "daily", Kind: KindDay, Rate: 2000},
			},
			Allowance: 20 * time.Millisecond,
			Load:      Load{OnRate: 2000}, Businesses: 50, Hot: 5, Duration: d + d/5,
		},
		{
			Name: "wait", Title: "Wait mode (2× the limit, max wait 1 s)",
			Doc:    "Offered 400 req/s against 200/s burst 20; every client waits for a slot up to 1 s (compare with the fail-fast scenarios).",
			Vendor: alpha, Allowance: 20 * time.Millisecond,
			Load: Load{OnRate: 400}, Businesses: 1, Wait: true, MaxWait: time.Second, Duration: d,
		},
		{
			Name: "redis-restart", Title: "Redis restart in the middle",
			Doc: "Steady overload against 200/s burst 20 plus a daily quota of 400 per UTC day, which runs out after about 2 s; " +
				"at half time redis-server is killed and restarted 300 ms later, empty (no persistence, as a cache Redis runs), " +
				"so every Redis-backed limiter forgets what it counted today.",
			Vendor:    restartStack,
			Allowance: 20 * time.Millisecond,
			Load:      Load{OnRate: 2000}, Businesses: 1, Duration: d + d/2, Event: "restart",
			Algos: []string{AlgoThrottle, AlgoFixedWindow, AlgoRedisRate, AlgoLockGCRA, AlgoLocalRate, AlgoThrottleLocal},
		},
		{
			Name: "redis-restart-aof", Title: "Redis restart, with an append-only file",
			Doc: "The restart above with Redis persisting every write (appendonly yes, appendfsync always): the mitigation. " +
				"Throttle only: the point is what persistence does to its overshoot and latency.",
			Vendor:    restartStack,
			Allowance: 20 * time.Millisecond,
			Load:      Load{OnRate: 2000}, Businesses: 1, Duration: d + d/2, Event: "restart", AOF: true,
			Algos: []string{AlgoThrottle},
		},
		{
			Name: "redis-restart-sync", Title: "Redis restart, the vendor's counters synced",
			Doc: "The restart above, the vendor sending its daily count on every response (X-RateLimit-Limit, -Remaining, " +
				"-Reset at midnight UTC) and Retry-After: 1 on every 429, whatever its limits say (a vendor that asks for a " +
				"retry in a second while its quota ends at midnight); throttle is configured with sync: the first response " +
				"after the empty restart drains the store to the vendor's count, and one that says 0 remain pauses the " +
				"provider until midnight (capped at max_delay, 10 min). throttle-nosync is the same without sync: each " +
				"429 pauses it for the second asked. The others do not read the counters either (see redis-restart).",
			Vendor:    restartSyncStack,
			Allowance: 20 * time.Millisecond,
			Load:      Load{OnRate: 2000}, Businesses: 1, Duration: d + d/2, Event: "restart", RetryAfter: time.Second,
			Algos: []string{AlgoThrottle, AlgoThrottleNoSync},
		},
		{
			Name: "shared-account", Title: "Shared account: another client spends 30% of the vendor's window",
			Doc: "A vendor counting 400 per fixed 2 s window (GitHub's 5,000 an hour, scaled down), sending X-RateLimit-Limit, " +
				"-Remaining and -Reset on every response, and Retry-After: 1 on a 429 whatever its window says; another client " +
				"the fleet cannot see spends 120 of each window (30%: 60 req/s, unthrottled). Offered 1,000 req/s, fail fast. " +
				"Clients are configured with a GCRA of the vendor's figure at headroom 95% (380 per 2 s, burst 380), throttle " +
				"with sync: x-ratelimit; throttle-nosync is the same configuration without sync (throttle before it read the " +
				"counters). Overshoot per window: the fleet's arrivals plus the other client's requests beyond the vendor's 400 " +
				"(the other client's share counts first: it is outside the fleet's control, so every request of it the vendor " +
				"refused counts against the fleet); utilization is of what the other client left. lock-gcra and x/time/rate " +
				"are left out to keep the run short: they do not read the counters either.",
			Vendor:    []Limit{{Name: "core", Kind: KindWindow, Rate: 400, Period: 2 * time.Second, Counters: true}},
			Allowance: 20 * time.Millisecond,
			Load:      Load{OnRate: 1000}, Businesses: 1, Duration: d,
			Algos:       []string{AlgoThrottle, AlgoThrottleNoSync, AlgoFixedWindow, AlgoRedisRate},
			PhantomFrom: 0, PhantomTo: d, PhantomRate: 60, RetryAfter: time.Second,
		},
		{
			Name: "concurrency", Title: "Concurrency: at most 16 requests in flight",
			Doc: "A vendor that serves each request in 100 ms and at most 16 at once (a model API's concurrent streams, " +
				"GitHub's 100 concurrent requests, scaled down), counting a request in flight from its arrival until its " +
				"response is written, and answering 429 beyond. Offered 800 req/s (5× the 160 req/s the cap lets through), " +
				"4 processes sharing the cap; throttle is configured with `limit: 16 concurrent lease 5s`, on_limit: wait, " +
				"max_wait 1s, and releases a lease when the response body is read. A request that finds every lease held waits " +
				"for a release up to its max wait, deciding again on each wake; one that gets none within it is refused " +
				"(counted as refused), and a request offered while all 256 goroutines wait is dropped. Utilization: the " +
				"mean of the vendor's in-flight count over the cap.",
			Vendor:    []Limit{{Name: "streams", Kind: KindConcurrent, Rate: 16, Period: 100 * time.Millisecond}},
			Allowance: 20 * time.Millisecond,
			Load:      Load{OnRate: 800}, Businesses: 1, Wait: true, MaxWait: time.Second, Duration: d,
			Algos: []string{AlgoThrottle},
		},
		{
			Name: "settled", Title: "Costs settled after the response (a model API's tokens)",
			Doc: "A model API with 4,000 tokens/s burst 400 (a tokens-per-minute limit, scaled down) that charges each " +
				"request the tokens it actually used, a fifth to all of its max_tokens of 100, and says so in the response's " +
				"usage; offered 400 req/s, fail fast. throttle reserves the estimate (WithCost 100) and settles the usage " +
				"when the body has been read (WithSettle(ctx, OpenAIUsage(\"tokens\"))): the unused tokens are refunded while " +
				"no later reservation holds the limit. Utilization: tokens served over what the limit allows in the run " +
				"(burst + rate × duration); overshoot in tokens.",
			Vendor:    []Limit{{Name: "tokens", Kind: KindGCRA, Rate: 4000, Period: time.Second, Burst: 400}},
			Allowance: 20 * time.Millisecond,
			Load:      Load{OnRate: 400}, Businesses: 1, Duration: d, Estimate: 100,
			Algos: []string{AlgoThrottle},
		},
		{
			Name: "rolling", Title: "Rolling window: at most 400 in any trailing 2 s",
			Doc: "A vendor that admits at most 400 requests in any trailing 2 s (Salesforce's rolling 24 h API quota, " +
				"scaled down), exactly (a sliding log), offered 1,000 req/s, fail fast, for three periods. throttle is " +
				"configured with a rolling window of 400 per 2 s plus the 20 ms allowance (`400/2.02s rolling`). " +
				"Utilization: what the vendor served in each of the run's periods over 400, averaged.",
			Vendor:    []Limit{{Name: "api", Kind: KindRolling, Rate: 400, Period: 2 * time.Second}},
			Allowance: 20 * time.Millisecond,
			Load:      Load{OnRate: 1000}, Businesses: 1, Duration: d + d/2,
			Algos: []string{AlgoThrottle},
		},
		farRedis("far-redis-1000", "1,000/s", 50, Limit{Name: "peak", Kind: KindGCRA, Rate: 1000, Period: time.Second, Burst: 1000}, d),
		farRedis("far-redis-10", "10/s", 50, Limit{Name: "peak", Kind: KindGCRA, Rate: 10, Period: time.Second, Burst: 10}, d),
		// Twice as long: what taking ahead gives up of the burst when a
		// busy spell starts from idle (the lead, once) weighs less in a
		// utilisation of the whole run, as in a longer one it would.
		farRedis("far-redis-over", "1,000/s, demand above it", 400,
			Limit{Name: "peak", Kind: KindGCRA, Rate: 1000, Period: time.Second, Burst: 1000}, 2*d),
		{
			Name: "redis-slow", Title: "Redis made slow (CLIENT PAUSE)",
			Doc: "Wait mode at 2× as above; at 30% and 60% of the run Redis is paused for 300 ms (CLIENT PAUSE 300 ALL), " +
				"longer than throttle's default store timeout (200 ms).",
			Vendor: alpha, Allowance: 20 * time.Millisecond,
			Load: Load{OnRate: 400}, Businesses: 1, Wait: true, MaxWait: time.Second, Duration: d, Event: "pause",
			Algos: []string{AlgoThrottle, AlgoFixedWindow, AlgoRedisRate, AlgoLockGCRA, AlgoLocalRate, AlgoThrottleLocal},
		},
		{
			Name: "vendor-429", Title: "Vendor answers 429 with Retry-After",
			Doc: "A Shopify-style leaky bucket per shop (40, leaking 20/s), 10 shops, offered 400 req/s, fail fast. From 30% to 70% of the run " +
				"another tool with the same credentials fills every shop's bucket (a burst of 40, then 10 req/s per shop), which the " +
				"fleet cannot see: the vendor answers 429 with Retry-After. Throttle pauses the shop fleet-wide; the others back off per goroutine.",
			Vendor:    []Limit{{Name: "bucket", Kind: KindLeaky, Rate: 20, Burst: 40, PerBusiness: true}},
			Allowance: 20 * time.Millisecond,
			Load:      Load{OnRate: 400}, Businesses: 10, Duration: d,
			PhantomFrom: d * 3 / 10, PhantomTo: d * 7 / 10, PhantomRate: 10, PhantomBurst: 40,
		},
		priorityScenario(d),
		dailyPacingScenario(d),
		noisyTenantScenario(d),
	}
}

// farRedisDelay is the far-redis scenarios' delay each way: a round trip
// of 40 ms, two regions of one continent.
const farRedisDelay = 20 * time.Millisecond

// farRedisPeriod is throttle-ahead's period in the far-redis scenarios:
// a batch covers 300 ms of a process's demand, 15 requests at 50/s, so
// that a store call serves well over ten requests (at 200 ms it would be
// ten exactly, the target's edge, before the first requests' calls).
const farRedisPeriod = 300 * time.Millisecond

// farRedis is one of the far-redis scenarios (issue 22): Redis 20 ms away
// each way, 4 processes each offering perProcess req/s (fail fast) to
// one limit, throttle without and with quota taken ahead.
func farRedis(name, what string, perProcess float64, l Limit, d time.Duration) Scenario {
	return Scenario{
		Name: name, Group: "far-redis", Title: "A Redis 20 ms away: " + what,
		Doc: fmt.Sprintf("Every round trip to Redis goes through a proxy that holds each byte %v each way (a Redis in another "+
			"region). 4 processes × %.0f req/s against %s, fail fast. throttle makes one Reserve per request; throttle-ahead "+
			"takes quota ahead with period %v. Added latency is, per request, the time from the client's call to the "+
			"request leaving for the vendor (or to its refusal); Redis calls are every command the workers sent after "+
			"their warm-up, per request.", farRedisDelay, perProcess, l.String(), farRedisPeriod),
		Vendor: []Limit{l}, Allowance: 20 * time.Millisecond,
		Load: Load{OnRate: 4 * perProcess}, Businesses: 1, Duration: d,
		Algos:    []string{AlgoThrottle, AlgoThrottleAhead},
		FarRedis: farRedisDelay, AheadPeriod: farRedisPeriod,
	}
}

// runs reports whether the scenario runs algo.
func (s *Scenario) runs(algo string) bool {
	if len(s.Algos) == 0 {
		return !variants[algo]
	}
	return selected(s.Algos, algo)
}

// phantoms returns the scenario's unseen traffic for a run starting at
// start (ns since the epoch).
func (s *Scenario) phantoms(start int64) []throttletest.Other {
	if s.PhantomRate <= 0 && s.PhantomBurst <= 0 {
		return nil
	}
	var out []throttletest.Other
	for b := 0; b < s.Businesses; b++ {
		biz := businessName(b)
		from := start + int64(s.PhantomFrom)
		for i := 0; i < s.PhantomBurst; i++ {
			out = append(out, throttletest.Other{At: time.Unix(0, from), Scope: biz})
		}
		if s.PhantomRate > 0 {
			step := int64(float64(time.Second) / s.PhantomRate)
			for t := from + step; t < start+int64(s.PhantomTo); t += step {
				out = append(out, throttletest.Other{At: time.Unix(0, t), Scope: biz})
			}
		}
	}
	return out
}

func businessName(i int) string {
	const digits = "0123456789"
	return "biz" + string(digits[i/10%10]) + string(digits[i%10])
}
