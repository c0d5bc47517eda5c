package backoff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// This file reads what vendors say in response bodies and in a few
// headers about retrying: Shopify GraphQL's cost extension, Discord's 429
// body, OpenAI's billing 429 and the should-retry headers. Bodies are read
// as Classify reads them: at most MaxBodyPeek bytes, given back whole in
// resp.Body, so a reader must not run concurrently with other uses of
// resp.

// decodeBody decodes the peeked body of resp into v. It returns false and
// no error when there is no body, and an ErrMalformed error naming what
// is wrong when the body is not the JSON v expects.
func decodeBody(resp *http.Response, field string, v any) (bool, error) {
	body := peekBody(resp)
	if len(bytes.TrimSpace(body)) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		why := "not JSON of the expected shape: " + err.Error()
		if len(body) == MaxBodyPeek {
			why = fmt.Sprintf("longer than the %d bytes read", MaxBodyPeek)
		}
		return false, fmt.Errorf("%w: %s: %s", ErrMalformed, field, why)
	}
	return true, nil
}

// shopifyCost is the part of a Shopify GraphQL response ReadCounters uses.
// Pointers tell an absent or null field from a zero.
type shopifyCost struct {
	Extensions *struct {
		Cost *struct {
			ThrottleStatus *struct {
				MaximumAvailable   *float64 `json:"maximumAvailable"`
				CurrentlyAvailable *float64 `json:"currentlyAvailable"`
				RestoreRate        *float64 `json:"restoreRate"`
			} `json:"throttleStatus"`
		} `json:"cost"`
	} `json:"extensions"`
}

// costField names the body field the Shopify readers report on.
const costField = "body extensions.cost"

// readShopifyCost decodes resp's body; nil cost and no error when it has
// no extensions.cost.
func readShopifyCost(resp *http.Response) (*shopifyCost, error) {
	var c shopifyCost
	ok, err := decodeBody(resp, costField, &c)
	if !ok || c.Extensions == nil || c.Extensions.Cost == nil {
		return nil, err
	}
	return &c, nil
}

// floatCount reads a JSON number as a count, rounded as asked; it returns
// why it is malformed, or "".
func floatCount(f float64, round rounding) (int64, string) {
	switch {
	case f < 0:
		return 0, "negative"
	case f > maxCount:
		return 0, "too large"
	case round == up:
		return int64(math.Ceil(f)), ""
	}
	return int64(f), ""
}

// floatSeconds converts seconds, at most maxReset, to a Duration, rounded
// to the nanosecond (64.57 is not exact in binary).
func floatSeconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}

// readShopifyGraphQL reads the ShopifyGraphQL format.
func readShopifyGraphQL(r *reader, resp *http.Response) {
	c, err := readShopifyCost(resp)
	if err != nil {
		r.errs = append(r.errs, err)
	}
	if c == nil || c.Extensions.Cost.ThrottleStatus == nil {
		return
	}
	ts := c.Extensions.Cost.ThrottleStatus
	const f = costField + ".throttleStatus"
	number := func(name string, v *float64) (float64, bool) {
		if v == nil {
			r.errs = append(r.errs, fmt.Errorf("%w: %s.%s: missing or null", ErrMalformed, f, name))
			return 0, false
		}
		if _, why := floatCount(*v, down); why != "" {
			r.malformed(f+"."+name, fmt.Sprint(*v), why)
			return 0, false
		}
		return *v, true
	}
	maxAv, hasMax := number("maximumAvailable", ts.MaximumAvailable)
	cur, hasCur := number("currentlyAvailable", ts.CurrentlyAvailable)
	rate, hasRate := number("restoreRate", ts.RestoreRate)
	rd := Reading{Counter: defaultCounter}
	if hasMax {
		rd.Limit, _ = floatCount(maxAv, down)
		rd.HasLimit = true
	}
	if hasCur {
		rd.Remaining, _ = floatCount(cur, down)
		rd.HasRemaining = true
	}
	if hasMax && hasCur {
		switch missing := maxAv - cur; {
		case missing <= 0:
			rd.Reset, rd.HasReset = 0, true
		case !hasRate:
		case rate <= 0:
			r.malformed(f+".restoreRate", fmt.Sprint(rate), "zero: the bucket would never refill")
		case missing/rate > maxReset.Seconds():
			r.malformed(f+".restoreRate", fmt.Sprint(rate), "refill more than a year ahead")
		default:
			rd.Reset, rd.HasReset = floatSeconds(missing/rate), true
		}
	}
	r.add(rd)
}

// discordRateLimit is what Discord's 429 body says (docs.discord.com
// developers/topics/rate-limits, "rate limit response structure", read
// 2026-11-24): {"message": "You are being rate limited.", "retry_after":
// 64.57, "global": false}.
type discordRateLimit struct {
	// RetryAfter is retry_after: how long to wait, from decimal seconds.
	RetryAfter time.Duration
	// Global is global: the bot's global limit was hit, not a route's,
	// so every request of the bot must wait.
	Global bool
}

// readDiscordRateLimit reads Discord's 429 body. It reads only a 429's
// body and reports ok only when the body has a retry_after; a retry_after
// that is negative, more than a year or not a number, or a body that is
// not JSON, gives an error wrapping ErrMalformed. It reads the body as
// ReadCounters does.
func readDiscordRateLimit(resp *http.Response) (discordRateLimit, bool, error) {
	var d discordRateLimit
	if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		return d, false, nil
	}
	var body struct {
		RetryAfter *float64 `json:"retry_after"`
		Global     *bool    `json:"global"`
	}
	if ok, err := decodeBody(resp, "body", &body); !ok {
		return d, false, err
	}
	if body.Global != nil {
		d.Global = *body.Global
	}
	if body.RetryAfter == nil {
		return d, false, nil
	}
	switch s := *body.RetryAfter; {
	case s < 0:
		return d, false, fmt.Errorf("%w: body retry_after: %v: negative", ErrMalformed, s)
	case s > maxReset.Seconds():
		return d, false, fmt.Errorf("%w: body retry_after: %v: more than a year", ErrMalformed, s)
	default:
		d.RetryAfter = floatSeconds(s)
	}
	return d, true, nil
}

// openAIBillingStop reports whether resp is OpenAI's 429 for an exhausted
// quota or spend limit: error code or type "insufficient_quota" ("You
// exceeded your current quota, please check your plan and billing
// details", help.openai.com article 6891831 and the API's error-codes
// guide, read 2026-11-24). It is a billing stop, not a rate limit:
// waiting does not help, so it must not be retried or paused on. Only a
// 429's body is read, as ReadCounters reads it; anything else, including
// a body that is not OpenAI's error JSON, is false. (Reports of a
// "billing_hard_limit_reached" code show it on 400s, which are never
// retried, and OpenAI does not document it; it is not recognised.)
func openAIBillingStop(resp *http.Response) bool {
	if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		return false
	}
	var body struct {
		Error *struct {
			// any: a code of another type must not fail the decoding.
			Code any `json:"code"`
			Type any `json:"type"`
		} `json:"error"`
	}
	if ok, _ := decodeBody(resp, "body", &body); !ok || body.Error == nil {
		return false
	}
	const code = "insufficient_quota"
	return body.Error.Code == code || body.Error.Type == code
}

// The should-retry headers: Stripe's, which its SDKs obey (stripe-python
// #621, stripe-php #755 "Respect Stripe-Should-Retry and Retry-After
// headers"), and the one the SDKs of OpenAI and Anthropic obey ("Note:
// this is not a standard header", _base_client.py _should_retry), read
// 2026-11-24.
const (
	headerStripeShouldRetry = "Stripe-Should-Retry"
	headerShouldRetry       = "X-Should-Retry"
)

// shouldRetry reads the vendor's own say on retrying a response:
// Stripe-Should-Retry or X-Should-Retry, "true" or "false" in any case.
// ok is false when neither says (absent, or another value). When they, or
// repeated values, disagree, false wins: a retry the vendor may have
// refused can repeat a side effect, a retry skipped only fails one
// request.
func shouldRetry(h http.Header) (retry, ok bool) {
	for _, name := range []string{headerStripeShouldRetry, headerShouldRetry} {
		for _, v := range h.Values(name) {
			switch v = strings.TrimSpace(v); {
			case strings.EqualFold(v, "false"):
				return false, true
			case strings.EqualFold(v, "true"):
				retry, ok = true, true
			}
		}
	}
	return retry, ok
}
