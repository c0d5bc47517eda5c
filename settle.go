package throttle

import (
	"context"
	"io"
	"net/http"

	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/quota"
)

// A Settler reads what a request actually cost from its response, for
// limits whose cost is only known afterwards: a model API's tokens, a
// GraphQL query's actual cost. The request reserves an estimate (its
// route's cost, WithCost, WithLimitCost: the max_tokens it asked for);
// once the caller has read the response body to its end, the transport
// settles the actual costs in one round trip (quota.Reservation.Settle):
// an excess is charged as a debt that delays the next requests, a refund
// comes back when it safely can. A body closed before its end settles
// nothing: the estimate stays charged.
//
// The Settler is called with the response before the caller gets it and
// returns the Meter that will see the body, or nil when there is nothing
// to settle. It must not read the body itself.
type Settler func(resp *http.Response) Meter

// A Meter sees a response body as it passes to the caller, so that no
// body is buffered or taken from the caller, a stream included: Write is
// given each chunk the caller reads, in order, and Costs, once the body
// has been read to its end, the actual cost per limit name (limits it does
// not name keep their estimate; nil settles nothing). The built-in meters
// live with the other vendor formats, in package backoff.
type Meter = backoff.Meter

// WithSettle returns a context whose requests settle their actual costs
// with s (see Settler), e.g. WithSettle(ctx, OpenAIUsage("tpm")). It takes
// precedence over the provider's settle field, which configures the same
// built-in Settlers without code (docs/configuration.md, "settle").
func WithSettle(ctx context.Context, s Settler) context.Context {
	return context.WithValue(ctx, settlerKey, s)
}

func settlerFrom(ctx context.Context) Settler {
	s, _ := ctx.Value(settlerKey).(Settler)
	return s
}

// OpenAIUsage settles the limit named tokens (a tokens-per-minute limit)
// from the usage of an OpenAI response (backoff.OpenAIUsage): total_tokens
// (else prompt_tokens + completion_tokens) of a JSON response's "usage",
// or of a stream's final chunk, which OpenAI sends when the request sets
// stream_options {"include_usage": true}. A stream without it settles
// nothing.
func OpenAIUsage(tokens string) Settler {
	return func(resp *http.Response) Meter { return backoff.OpenAIUsage(resp, tokens) }
}

// AnthropicUsage settles the limits named input and output (Anthropic's
// input and output tokens per minute; either may be "") from the usage of
// an Anthropic Messages response (backoff.AnthropicUsage): "usage" of a
// JSON response; in a stream, message_start's message.usage and then each
// message_delta's usage, whose counts are cumulative (the latest wins).
// Input counts input_tokens plus cache_creation_input_tokens: cache reads
// do not count towards Anthropic's input limit.
func AnthropicUsage(input, output string) Settler {
	return func(resp *http.Response) Meter { return backoff.AnthropicUsage(resp, input, output) }
}

// ShopifyQueryCost settles the limit named limit (the GraphQL cost bucket)
// from extensions.cost.actualQueryCost of a Shopify GraphQL response,
// rounded up (backoff.ShopifyQueryCost).
func ShopifyQueryCost(limit string) Settler {
	return func(*http.Response) Meter { return backoff.ShopifyQueryCost(limit) }
}

// meteredBody feeds a Meter what the caller reads and settles the
// request's reservation when the body reaches its end.
type meteredBody struct {
	io.ReadCloser
	m      Meter
	settle func(map[string]int64)
	done   bool
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.done {
		return n, err
	}
	if n > 0 {
		_, _ = b.m.Write(p[:n])
	}
	if err == io.EOF {
		b.done = true
		if costs := b.m.Costs(); costs != nil {
			b.settle(costs)
		}
	} else if err != nil {
		b.done = true // cut short: the usage is unknown, the estimate stays
	}
	return n, err
}

// settleFunc returns what a meteredBody calls at the end of the body:
// Settle of rsv, a reservation of q for provider (of the priority class
// class), with the actual costs by limit name; observe is told what was
// settled, or the store's error.
func settleFunc(ctx context.Context, observe func(context.Context, Event), provider, class string, q *quota.Request, rsv *quota.Reservation) func(map[string]int64) {
	names := make([]string, len(q.Items))
	estimates := make([]int64, len(q.Items))
	rates := make([]int64, len(q.Items)) // as decided: a learning limit at its learned rate
	for i, it := range q.Items {
		names[i] = it.Limit.Name
		estimates[i] = -1 // not settled: the estimate stays (quota.Reservation.Settle)
		if k := it.Limit.Kind; k == quota.GCRA || k == quota.Window {
			estimates[i] = q.CostOf(i)
			rates[i] = it.Limit.Learned(rsv.Limits[i].Rate).Rate
		}
	}
	ctx = context.WithoutCancel(ctx)
	return func(costs map[string]int64) {
		actual := make([]int64, len(names))
		any := false
		for i, name := range names {
			actual[i] = -1
			c, ok := costs[name]
			if !ok || c < 0 {
				continue
			}
			// The store keeps the estimate for such a figure too; this
			// says so (a sum of two figures may even be above 2^51).
			if estimates[i] >= 0 && quota.Implausible(c, rates[i]) {
				observe(ctx, Event{Kind: SettleMalformed, Provider: provider, Class: class, Limit: name, Delta: c - estimates[i]})
				continue
			}
			actual[i], any = c, true
		}
		if !any {
			return
		}
		if err := rsv.Settle(ctx, actual); err != nil {
			observe(ctx, Event{Kind: StoreError, Provider: provider, Class: class, Err: err})
			return
		}
		for i, c := range actual {
			if c >= 0 && estimates[i] >= 0 && c != estimates[i] {
				observe(ctx, Event{Kind: Settled, Provider: provider, Class: class, Limit: names[i], Delta: c - estimates[i]})
			}
		}
	}
}
