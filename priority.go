package throttle

import (
	"context"

	"github.com/fleetquota/throttle/providers"
)

// ErrUnknownClass is wrapped by the error of a request whose priority
// class (WithPriority, or the proxy's Throttle-Priority header) its
// provider does not declare. It is returned before anything is sent; the
// error names the provider and its classes.
var ErrUnknownClass = providers.ErrUnknownClass

// WithPriority returns a context whose requests are of the priority
// class called class: who slows first when a limit is short. A class
// keeps the reserve its provider's priority field gives it from the
// classes below it, and takes nothing of the reserves of the classes
// above it while they are in use (docs/configuration.md, "Priority
// classes").
//
// Without WithPriority a request is of its route's class (the route's
// priority field), else of its provider's default class (the last class
// unless the provider says otherwise). A provider without classes ignores
// the class; a provider that does not declare it refuses the request
// with an error matching ErrUnknownClass. An empty class means the
// default, as if WithPriority had not been called.
func WithPriority(ctx context.Context, class string) context.Context {
	return context.WithValue(ctx, priorityKey, class)
}

func priorityFrom(ctx context.Context) string {
	s, _ := ctx.Value(priorityKey).(string)
	return s
}
