// Package throttletest runs fake vendor APIs for tests: in-process HTTP
// servers (from net/http/httptest) that enforce a rate limit of their own,
// as real vendors do whatever their clients believe, answer the requests
// beyond it with a real vendor's throttling signals, and record when every
// request arrived. A test points its own code (a client going through
// throttle.Transport, a proxy, a worker) at the vendor, and then checks
// what the vendor saw rather than what the client believes it sent: no
// 429s, no more than the limit in any second, the right bodies.
//
// It needs no network, no Redis and no *testing.T (example programs and
// load harnesses use it too), and it imports only the standard library.
//
// # A vendor
//
//	v := throttletest.NewVendor(throttletest.Options{
//		Enforcer: throttletest.GCRA(20, time.Second, 5), // or another kind, or All(...); zero: no limit
//		Signal:   throttletest.RetryAfterSeconds,        // how a throttled request is answered
//	})
//	defer v.Close()
//
//	v.URL                 // "http://127.0.0.1:port", for requests
//	v.Host()              // "127.0.0.1:port", for a provider's hosts
//	v.Client()            // a plain client, to reach the vendor around the throttle
//	v.ThrottleNext(n)     // answer the next n requests throttled, whatever the limit says
//	v.Arrivals()          // every request: when it came and was answered, admitted or
//	                      // throttled, scope, method, path, body, cost, tag
//	v.Counts()            // (served, throttled) since it started
//	v.MaxIn(time.Second)  // most admitted requests in any window [t, t+1s)
//	v.MaxInScope("acme", time.Second) // the same, for one scope
//	throttletest.MaxIn(times, window) // the same, for any list of times
//
// Options also set the delay every throttled response advertises
// (RetryAfter), its body (ThrottleBody), the handler of admitted requests
// (Handler), a per-header scope (ScopeHeader), counter headers on every
// response (Counters), what a request costs (Cost), a header each arrival
// keeps (TagHeader), requests left alone (Exempt), another client's
// traffic on the same account (Others, OthersRefused), a cap on requests
// in flight (MaxInFlight), the clock, and the recording bounds.
//
// To send a provider's requests to the vendor, name v.Host() in the
// provider's hosts (a providers.yaml read in the test, or expanded from a
// variable with providers.WithLookupEnv) and send to v.URL.
//
// # Enforcers
//
//   - GCRA(rate, period, burst): the generic cell rate algorithm: burst at
//     once from idle, then one every period/rate.
//   - Window(n, length): n per fixed window; windows start at multiples of
//     length since the Unix epoch (a minute window starts on the minute),
//     as vendors' calendar windows do.
//     Window(n, 24*time.Hour) is a quota per UTC calendar day.
//   - LeakyBucket(size, leakPerSecond): a bucket of size that leaks
//     continuously (Shopify REST: LeakyBucket(40, 2)). A request fits while
//     the level plus one is at most size.
//   - Concurrent(n, serve): n requests in flight at once, each served in
//     serve: in flight from its arrival until its response is written.
//   - Rolling(n, length): n in any trailing length, exactly (a sliding log
//     of the admitted arrivals; Salesforce's rolling 24 hours).
//   - All(e1, e2, ...): a stack; a request must fit every one and is
//     charged to every one. The advertised counters are e1's.
//
// With Options.ScopeHeader set, every value of that request header has an
// enforcer state of its own, as a vendor that limits per account does;
// e.Shared() is a limit with one state for every scope (an account-wide
// daily quota beside per-shop buckets). With Options.Cost, the GCRA and
// Window limits marked e.Costs() charge each request its cost (a model
// API's tokens per minute); the others count requests. The enforcers do their own arithmetic,
// independent of package quota's, so that a test judges the throttle by
// a second implementation.
//
// # Ledgers
//
// A Ledger is an enforcer's state without a server: Admit, Earliest and
// Charge at times the caller gives, in any order. A load harness uses one
// to ask what the vendor would have served of an offered load (a perfect
// client's share); a Vendor keeps one of its own.
//
// # Signals
//
// A throttled request is answered in one of these styles:
//
//   - RetryAfterSeconds: 429 with an integer Retry-After (rounded up).
//   - RetryAfterDecimal: 429 with a decimal Retry-After ("2.0"), and
//     X-Shopify-Shop-Api-Call-Limit: used/size on every response (Shopify).
//   - RetryAfterDate: 429 with Retry-After as an HTTP-date (IMF-fixdate).
//   - GitHub403: 403 with X-RateLimit-Remaining: 0 and X-RateLimit-Reset
//     in Unix seconds; X-RateLimit-Limit, -Remaining, -Used and -Reset on
//     every response when there is an enforcer.
//
// With Options.Counters, the X-RateLimit headers GitHub403 sends come on
// every response of any style, the reset being the enforcer's own even
// when the Retry-After says less (a vendor that asks for a retry in a
// second while its window ends in forty).
//
// The advertised delay is the enforcer's own (when the request would
// fit), unless Options.RetryAfter fixes it. Options.ThrottleBody replaces
// the style's body, e.g. with OpenAI's insufficient_quota error.
//
// # Time
//
// Options.Clock is the vendor's clock, for its enforcement and for the
// recorded arrival times; the default is time.Now. A test that injects a
// clock it steps (the same one it gives the throttle, e.g.
// quotatest.NewClock) checks each limit exactly, without sleeping.
//
// # Bounds
//
// At most Options.MaxArrivals arrivals are recorded (default 1,000,000;
// later ones are counted but not kept), bodies only with
// Options.RecordBodies and at most 4 KiB each, and at most 10,000 scope
// states are kept (further scopes share one). A Vendor is safe for
// concurrent use.
//
// The enforcer constructors panic on a limit that means nothing (a zero
// rate, a negative period), as regexp.MustCompile does on a bad pattern:
// their arguments are constants of the test that calls them.
package throttletest
