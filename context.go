package throttle

import (
	"context"
	"time"
)

type ctxKey int

const (
	businessKey ctxKey = iota
	labelsKey
	costKey
	limitCostsKey
	maxWaitKey
	settlerKey
	priorityKey
)

// WithBusiness returns a context whose requests count against the limits
// scoped per business (tenant, connected account) of id.
func WithBusiness(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, businessKey, id)
}

// label is one node of an immutable list, so WithLabel never copies a map
// and a context's labels are never shared mutable state.
type label struct {
	name, value string
	next        *label
}

// WithLabel returns a context whose requests carry the label name=value,
// for limits scoped by a label (e.g. class=batch). A later WithLabel of the
// same name overrides an earlier one.
func WithLabel(ctx context.Context, name, value string) context.Context {
	prev, _ := ctx.Value(labelsKey).(*label)
	return context.WithValue(ctx, labelsKey, &label{name, value, prev})
}

// WithCost returns a context whose requests count n each in the limits of
// their stack, overriding the route's cost (e.g. a GraphQL query's known
// cost). Limits with a cost of their own (a route's costs entry, or
// WithLimitCost) keep it. n must be at least 1 and at most the capacity of
// every limit it applies to.
func WithCost(ctx context.Context, n int64) context.Context {
	return context.WithValue(ctx, costKey, n)
}

// WithLimitCost returns a context whose requests count n in the limit
// called limit, whatever their cost in the rest of the stack: the tokens
// of a request to a model API whose provider limits both requests and
// tokens per minute. Both limits are still decided and charged at once.
// n must be at least 1 and at most that limit's capacity; a limit not in
// the request's stack is ignored.
func WithLimitCost(ctx context.Context, limit string, n int64) context.Context {
	prev, _ := ctx.Value(limitCostsKey).(*limitCost)
	return context.WithValue(ctx, limitCostsKey, &limitCost{limit, n, prev})
}

// limitCost is one node of an immutable list, as label is.
type limitCost struct {
	limit string
	n     int64
	next  *limitCost
}

// WithMaxWait returns a context whose requests wait at most d for their
// slot, overriding the provider's max_wait. Zero means fail at once; a d
// above quota.LongestWait (about 71 years) counts as that.
func WithMaxWait(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, maxWaitKey, d)
}

func businessFrom(ctx context.Context) string {
	s, _ := ctx.Value(businessKey).(string)
	return s
}

func costFrom(ctx context.Context) int64 {
	n, _ := ctx.Value(costKey).(int64)
	return n
}

func maxWaitFrom(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Value(maxWaitKey).(time.Duration)
	return d, ok
}
