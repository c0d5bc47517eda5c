package throttle

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrLimited is wrapped by every error that refuses a request because a
// limit (or a pause after an upstream throttle) would not admit it in time.
// Test for it with errors.Is; errors.As with *LimitError gives the details.
var ErrLimited = errors.New("throttle: limited")

// ErrStoreUnavailable is wrapped by the error of a request refused because
// the quota store failed and the provider's policy is fail_closed. The
// store's own error is wrapped too.
var ErrStoreUnavailable = errors.New("throttle: quota store unavailable")

// A LimitError reports a request refused by its limit stack: it could not
// have been sent within the provider's max wait or the request context's
// deadline. It is returned before anything is sent or slept.
type LimitError struct {
	// Provider is the provider whose stack refused the request.
	Provider string
	// Limit names the limit that decided, or "pause" when an upstream
	// throttle's pause did.
	Limit string
	// Scope is the scope value of that limit ("" for a provider-wide one)
	// as it is stored: kept as given when short and made of safe
	// characters, else "#" and a hash of it (see quota.SafePart), so an
	// untrusted value is never echoed back. It may be a tenant id: log it
	// with care.
	Scope string
	// RetryAfter is how long until the stack would admit the request, if
	// nobody else reserved meanwhile.
	RetryAfter time.Duration
	// Deadline is true when the request's context deadline, not the max
	// wait, is what the wait did not fit in. Such an error also matches
	// context.DeadlineExceeded.
	Deadline bool
}

func (e *LimitError) Error() string {
	scope := ""
	if e.Scope != "" {
		scope = fmt.Sprintf(" (scope %q)", e.Scope)
	}
	why := "beyond max wait"
	if e.Deadline {
		why = "past the context deadline"
	}
	return fmt.Sprintf("throttle: %s limit %q%s: retry after %v, %s", e.Provider, e.Limit, scope, e.RetryAfter, why)
}

// Is reports whether target is ErrLimited, or context.DeadlineExceeded
// when the deadline is what the wait did not fit in.
func (e *LimitError) Is(target error) bool {
	return target == ErrLimited || (e.Deadline && target == context.DeadlineExceeded)
}
