package backoff

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// A Format names how a vendor publishes its counters. Its YAML name
// (String, ParseFormat) is lower case with hyphens. The zero value is no
// format: ReadCounters refuses it.
//
// The facts each reader relies on, with their sources (read 2026-11-24;
// [2nd] = known only from a third-party page):
//
//   - XRateLimit. GitHub (docs.github.com/en/rest/using-the-rest-api/
//     rate-limits-for-the-rest-api): x-ratelimit-limit, -remaining, -used
//     (requests made in the window), -reset (UTC epoch seconds) and
//     x-ratelimit-resource naming the counter ("core", "search",
//     "code_search", "graphql"; seen as "x-ratelimit-resource: core"
//     [2nd]). Intercom (developers.intercom.com .../errors/rate-limiting):
//     X-RateLimit-Limit, -Remaining, -Reset as a Unix timestamp, e.g.
//     "X-RateLimit-Limit: 167" per 10-second window. SendGrid: the same
//     three, reset a Unix time (VENDORS.md). Others send the reset as
//     seconds from now; parseReset tells the two apart by size.
//   - HubSpot (developers.hubspot.com changelog 2018-11-06 and "rate
//     limit headers will now appear for OAuth authenticated calls";
//     VENDORS.md, usage-details): X-HubSpot-RateLimit-Max, -Remaining,
//     -Interval-Milliseconds (the rolling window, e.g. 10000), -Daily,
//     -Daily-Remaining; OAuth calls have no daily headers. No reset header:
//     the interval rolls and the day ends at midnight in the account's
//     time zone.
//   - Zendesk (developer.zendesk.com/api-reference/introduction/
//     rate-limits and .../best-practices-for-avoiding-rate-limiting):
//     "X-Rate-Limit: 700", "X-Rate-Limit-Remaining: 699" per minute for the
//     account; list endpoints add "ratelimit-limit: 700",
//     "ratelimit-remaining: 699", "ratelimit-reset: 41" (seconds) and
//     "zendesk-ratelimit-tickets-index: total=100; remaining=99;
//     resets=41" for an endpoint's own limit.
//   - IETF (draft-ietf-httpapi-ratelimit-headers-10, datatracker, 27
//     September 2025; http.dev/ratelimit-policy): RateLimit-Policy is a
//     Structured Field list of named policies with q (quota, required), w
//     (window, seconds), qu (quota unit) and pk (partition key);
//     RateLimit lists the same names with r (remaining) and t (seconds
//     until reset). Draft -07 used "RateLimit: limit=100, remaining=50,
//     reset=30" with "RateLimit-Policy: 100;w=60"; drafts up to -06 used
//     separate RateLimit-Limit (possibly "10, 10;w=1"), RateLimit-
//     Remaining and RateLimit-Reset (delta seconds).
//   - OpenAI (platform.openai.com/docs/guides/rate-limits, "rate limits
//     in headers"): x-ratelimit-limit-requests "60", -limit-tokens
//     "150000", -remaining-requests "59", -remaining-tokens "149984",
//     -reset-requests "1s", -reset-tokens "6m0s": the time until the
//     counter "resets to its initial state". Seen in the wild: "12ms",
//     "23h47m36.648s" (community.openai.com [2nd]); Azure OpenAI sends
//     "-1" counts and reset "0" (learn.microsoft.com Q&A [2nd]).
//   - Anthropic (docs.anthropic.com/en/api/rate-limits, quoted by
//     restack.io [2nd]): anthropic-ratelimit-{requests,tokens,
//     input-tokens,output-tokens}-{limit,remaining,reset}, the reset an
//     RFC 3339 time, e.g. "2025-08-21T12:40:59Z" (a recorded response in
//     the tidyllm tests [2nd]).
//   - Shopify (shopify.dev/docs/api/admin-rest/usage/rate-limits):
//     "X-Shopify-Shop-Api-Call-Limit: 32/40", requests in the bucket over
//     its size; the bucket leaks 2/s on standard plans, 4/s Advanced, 20/s
//     Plus. The response does not say the plan, so no reset is derived.
//   - ShopifyGraphQL (shopify.dev/docs/apps/build/apis/graphql-admin/
//     rate-limits): the body's extensions.cost holds requestedQueryCost,
//     actualQueryCost (null when throttled, community.shopify.com [2nd])
//     and throttleStatus {maximumAvailable: 1000.0, currentlyAvailable:
//     988.0, restoreRate: 50.0}, numbers in JSON that may be fractional.
//   - Discord (docs.discord.com/developers/topics/rate-limits):
//     X-RateLimit-Limit, -Remaining, -Reset (epoch seconds with decimals),
//     -Reset-After (seconds with decimals), -Bucket (a unique string for
//     the limit, shared by routes), and on 429s only -Global (true for
//     the global limit) and -Scope ("user", "global" or "shared").
//   - Salesforce (developer.salesforce.com .../api_rest/
//     headers_api_usage.htm): "Sforce-Limit-Info: api-usage=18/5000",
//     daily usage over the org's limit; newer pages add "; api-bursts=
//     1/750", older ones "per-app-api-usage=17/250(appName=...)".
type Format uint8

// The formats ReadCounters knows.
const (
	// XRateLimit reads X-RateLimit-Limit, -Remaining (or -Used), -Reset
	// and X-RateLimit-Resource (GitHub, Intercom, SendGrid). One counter,
	// named by X-RateLimit-Resource or "default".
	XRateLimit Format = iota + 1

	// HubSpot reads X-HubSpot-RateLimit-*: counters "interval" (Max,
	// Remaining, Interval-Milliseconds as Window) and "daily" (Daily,
	// Daily-Remaining, Window 24 h). No resets.
	HubSpot

	// Zendesk reads X-Rate-Limit and X-Rate-Limit-Remaining (or
	// ratelimit-limit and ratelimit-remaining) with ratelimit-reset as
	// counter "account", and each Zendesk-RateLimit-<name> header
	// ("total=100; remaining=99; resets=41") as counter <name> in lower
	// case, e.g. "tickets-index".
	Zendesk

	// IETF reads RateLimit and RateLimit-Policy (draft -10/-11), one
	// reading per policy named in either, matched by name; or, in older
	// drafts' forms, one reading "default".
	IETF

	// OpenAI reads x-ratelimit-{limit,remaining,reset}-{requests,tokens}:
	// counters "requests" and "tokens", resets as Go-like durations.
	OpenAI

	// Anthropic reads anthropic-ratelimit-<counter>-{limit,remaining,
	// reset}: counters "requests", "tokens", "input-tokens" and
	// "output-tokens", resets as RFC 3339 times.
	Anthropic

	// Shopify reads X-Shopify-Shop-Api-Call-Limit ("32/40", used over
	// size) as counter "default", with no reset.
	Shopify

	// ShopifyGraphQL reads the JSON body's extensions.cost.throttleStatus
	// as counter "default": Limit maximumAvailable, Remaining
	// currentlyAvailable (both rounded down), Reset the time to restore
	// the difference at restoreRate per second.
	ShopifyGraphQL

	// Discord reads X-RateLimit-Limit, -Remaining, -Reset-After (or
	// -Reset, an epoch), -Bucket (the counter's name, or "default"),
	// -Scope and -Global (Reading.Scope). Classify reads its 429 body
	// too, with Signals.Body BodyDiscord.
	Discord

	// Salesforce reads Sforce-Limit-Info ("api-usage=18/5000;
	// api-bursts=1/750"): one counter per name, "api-usage" with Window
	// 24 h. No resets: the day rolls.
	Salesforce
)

// formatNames are the YAML names of the formats, by Format.
var formatNames = [...]string{
	XRateLimit:     "x-ratelimit",
	HubSpot:        "hubspot",
	Zendesk:        "zendesk",
	IETF:           "ietf",
	OpenAI:         "openai",
	Anthropic:      "anthropic",
	Shopify:        "shopify",
	ShopifyGraphQL: "shopify-graphql",
	Discord:        "discord",
	Salesforce:     "salesforce",
}

// formatReaders are the readers of the formats, by Format.
var formatReaders = map[Format]func(*reader, *http.Response){
	XRateLimit:     readXRateLimit,
	HubSpot:        readHubSpot,
	Zendesk:        readZendesk,
	IETF:           readIETF,
	OpenAI:         readOpenAI,
	Anthropic:      readAnthropic,
	Shopify:        readShopify,
	ShopifyGraphQL: readShopifyGraphQL,
	Discord:        readDiscord,
	Salesforce:     readSalesforce,
}

// String returns the format's YAML name, e.g. "x-ratelimit".
func (f Format) String() string {
	if int(f) < len(formatNames) && formatNames[f] != "" {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// ParseFormat returns the format named name, as String writes it. An
// unknown name gives an error wrapping ErrUnknownFormat that lists the
// known ones.
func ParseFormat(name string) (Format, error) {
	for f, n := range formatNames {
		if n != "" && n == name {
			return Format(f), nil
		}
	}
	return 0, fmt.Errorf("%w: %q (want one of %s)", ErrUnknownFormat, name, strings.Join(formatNames[1:], ", "))
}

// readXRateLimit reads the XRateLimit format.
func readXRateLimit(r *reader, _ *http.Response) {
	counter, ok := r.name("X-RateLimit-Resource", defaultCounter)
	if !ok {
		return
	}
	rd := Reading{Counter: counter}
	rd.Limit, rd.HasLimit = r.count("X-RateLimit-Limit", down)
	rd.Remaining, rd.HasRemaining = r.count("X-RateLimit-Remaining", down)
	if !rd.HasRemaining && rd.HasLimit {
		if used, ok := r.count("X-RateLimit-Used", up); ok {
			rd.Remaining, rd.HasRemaining = max(rd.Limit-used, 0), true
		}
	}
	rd.Reset, rd.HasReset = r.reset("X-RateLimit-Reset", epochOrSeconds)
	r.add(rd)
}

// readHubSpot reads the HubSpot format.
func readHubSpot(r *reader, _ *http.Response) {
	in := Reading{Counter: "interval"}
	in.Limit, in.HasLimit = r.count("X-HubSpot-RateLimit-Max", down)
	in.Remaining, in.HasRemaining = r.count("X-HubSpot-RateLimit-Remaining", down)
	if in.HasLimit || in.HasRemaining {
		if w, ok := r.reset("X-HubSpot-RateLimit-Interval-Milliseconds", millis); ok {
			in.Window = w
		}
	}
	r.add(in)
	day := Reading{Counter: "daily", Window: 24 * time.Hour}
	day.Limit, day.HasLimit = r.count("X-HubSpot-RateLimit-Daily", down)
	day.Remaining, day.HasRemaining = r.count("X-HubSpot-RateLimit-Daily-Remaining", down)
	r.add(day)
}

// zendeskPrefix starts the canonical names of Zendesk's per-endpoint
// counter headers.
const zendeskPrefix = "Zendesk-Ratelimit-"

// readZendesk reads the Zendesk format.
func readZendesk(r *reader, _ *http.Response) {
	acct := Reading{Counter: "account"}
	if acct.Limit, acct.HasLimit = r.count("X-Rate-Limit", down); !acct.HasLimit {
		acct.Limit, acct.HasLimit = r.count("Ratelimit-Limit", down)
	}
	if acct.Remaining, acct.HasRemaining = r.count("X-Rate-Limit-Remaining", down); !acct.HasRemaining {
		acct.Remaining, acct.HasRemaining = r.count("Ratelimit-Remaining", down)
	}
	acct.Reset, acct.HasReset = r.reset("Ratelimit-Reset", seconds)
	r.add(acct)

	// The endpoints' own counters, in the order of their names (a map
	// has none).
	var more []Reading
	for _, key := range r.zendeskKeys(maxReadings - len(r.readings)) {
		key = http.CanonicalHeaderKey(key)
		name, ok := strings.CutPrefix(key, zendeskPrefix)
		if !ok {
			continue
		}
		rd := Reading{Counter: strings.ToLower(name)}
		if !validName(rd.Counter) {
			r.malformed(key, name, "not a counter name")
			continue
		}
		r.pairs(key, func(k, v string) {
			field := key + " " + k
			switch k {
			case "total":
				if n, ok := r.pairCount(field, v); ok {
					rd.Limit, rd.HasLimit = restrict(r, field, rd.Limit, rd.HasLimit, n, true), true
				}
			case "remaining":
				if n, ok := r.pairCount(field, v); ok {
					rd.Remaining, rd.HasRemaining = restrict(r, field, rd.Remaining, rd.HasRemaining, n, true), true
				}
			case "resets":
				if d, why := parseResetValue(v, seconds, r.now); why != "" {
					r.malformed(field, v, why)
				} else {
					rd.Reset, rd.HasReset = restrict(r, field, rd.Reset, rd.HasReset, d, false), true
				}
			}
		})
		if rd, ok := r.check(rd); ok {
			more = append(more, rd)
		}
	}
	sortReadings(more)
	r.readings = append(r.readings, more...)
}

// zendeskKeys returns the first n, in byte order, of the response's header
// names that start with zendeskPrefix in any case, recording an error if
// there are more: a response of thousands of them costs no more than one
// of n.
func (r *reader) zendeskKeys(n int) []string {
	var keys []string
	extra := 0
	for key := range r.h {
		if len(key) < len(zendeskPrefix) || !strings.EqualFold(key[:len(zendeskPrefix)], zendeskPrefix) {
			continue
		}
		i, _ := slices.BinarySearch(keys, key)
		switch {
		case len(keys) < n:
			keys = slices.Insert(keys, i, key)
			continue
		case i < len(keys):
			copy(keys[i+1:], keys[i:len(keys)-1])
			keys[i] = key
		}
		extra++
	}
	if extra > 0 {
		total := len(r.readings) + len(keys) + extra
		r.malformed("response", fmt.Sprint(total), fmt.Sprintf("more than %d counters; the rest left out", maxReadings))
	}
	return keys
}

// pairs calls f with each key=value pair of header name, pairs separated
// by ";" and keys in lower case: the first maxValues pairs, recording an
// error if there are more. A pair without "=" is malformed.
func (r *reader) pairs(name string, f func(k, v string)) {
	for p := range r.split(name, ";", "pairs") {
		k, v, ok := strings.Cut(p, "=")
		if k = strings.TrimSpace(k); !ok || len(k) > maxName {
			r.malformed(name, p, `not "key=value" with a key of at most 64 bytes`)
			continue
		}
		f(strings.ToLower(k), strings.TrimSpace(v))
	}
}

// pairCount reads value v of field (a header and a key) as a count.
func (r *reader) pairCount(field, v string) (int64, bool) {
	n, why := parseCount(v, down)
	if why != "" {
		r.malformed(field, v, why)
		return 0, false
	}
	return n, true
}

// readOpenAI reads the OpenAI format.
func readOpenAI(r *reader, _ *http.Response) {
	for _, c := range []string{"requests", "tokens"} {
		rd := Reading{Counter: c}
		rd.Limit, rd.HasLimit = r.count("x-ratelimit-limit-"+c, down)
		rd.Remaining, rd.HasRemaining = r.count("x-ratelimit-remaining-"+c, down)
		rd.Reset, rd.HasReset = r.reset("x-ratelimit-reset-"+c, goDuration)
		r.add(rd)
	}
}

// readAnthropic reads the Anthropic format.
func readAnthropic(r *reader, _ *http.Response) {
	for _, c := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		rd := Reading{Counter: c}
		p := "anthropic-ratelimit-" + c
		rd.Limit, rd.HasLimit = r.count(p+"-limit", down)
		rd.Remaining, rd.HasRemaining = r.count(p+"-remaining", down)
		rd.Reset, rd.HasReset = r.reset(p+"-reset", rfc3339)
		r.add(rd)
	}
}

// shopifyCallLimit is Shopify REST's counter header.
const shopifyCallLimit = "X-Shopify-Shop-Api-Call-Limit"

// readShopify reads the Shopify format. Repeated values give the smallest
// remaining.
func readShopify(r *reader, _ *http.Response) {
	rd := Reading{Counter: defaultCounter}
	for e := range r.elements(shopifyCallLimit) {
		limit, remaining, why := usedOf(e)
		if why != "" {
			r.malformed(shopifyCallLimit, e, why)
			continue
		}
		if rd.HasLimit && (limit != rd.Limit || remaining != rd.Remaining) {
			r.inconsistent(shopifyCallLimit, "repeated with different values; took the smallest remaining")
			if remaining >= rd.Remaining {
				continue
			}
		}
		rd.Limit, rd.Remaining = limit, remaining
		rd.HasLimit, rd.HasRemaining = true, true
	}
	r.add(rd)
}

// readDiscord reads the Discord format.
func readDiscord(r *reader, _ *http.Response) {
	counter, ok := r.name("X-RateLimit-Bucket", defaultCounter)
	if !ok {
		return
	}
	rd := Reading{Counter: counter}
	rd.Limit, rd.HasLimit = r.count("X-RateLimit-Limit", down)
	rd.Remaining, rd.HasRemaining = r.count("X-RateLimit-Remaining", down)
	// Reset-After is relative, so a clock off from Discord's does not
	// skew it; the epoch in Reset is the fallback.
	if rd.Reset, rd.HasReset = r.reset("X-RateLimit-Reset-After", seconds); !rd.HasReset {
		rd.Reset, rd.HasReset = r.reset("X-RateLimit-Reset", epochOrSeconds)
	}
	if scope, ok := r.name("X-RateLimit-Scope", ""); ok {
		rd.Scope = scope
	}
	if r.boolean("X-RateLimit-Global") && rd.Scope == "" {
		rd.Scope = "global"
	}
	r.add(rd)
}

// sforceLimitInfo is Salesforce's counter header.
const sforceLimitInfo = "Sforce-Limit-Info"

// readSalesforce reads the Salesforce format, in the order of the header.
func readSalesforce(r *reader, _ *http.Response) {
	seen := make(map[string]int)
	r.pairs(sforceLimitInfo, func(k, v string) {
		// "per-app-api-usage=17/250(appName=sample-connected-app)":
		// the app's name does not change the counter.
		if i := strings.IndexByte(v, '('); i >= 0 && strings.HasSuffix(v, ")") {
			v = v[:i]
		}
		if !validName(k) {
			r.malformed(sforceLimitInfo, k, "not a counter name")
			return
		}
		limit, remaining, why := usedOf(v)
		if why != "" {
			r.malformed(sforceLimitInfo+" "+k, v, why)
			return
		}
		rd := Reading{Counter: k, Limit: limit, HasLimit: true, Remaining: remaining, HasRemaining: true}
		if k == "api-usage" {
			rd.Window = 24 * time.Hour
		}
		if i, dup := seen[k]; dup {
			prev := &r.readings[i]
			if prev.Limit != limit || prev.Remaining != remaining {
				r.inconsistent(sforceLimitInfo+" "+k, "repeated with different values; took the smallest remaining")
				if remaining < prev.Remaining {
					prev.Limit, prev.Remaining = limit, remaining
				}
			}
			return
		}
		seen[k] = len(r.readings)
		r.add(rd)
	})
}
