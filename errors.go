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

// Error says which provider, limit and scope refused the request, and
// when to retry.
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

// ErrQuotaExhausted is wrapped by the error NewClient's client returns
// when the vendor says the account's quota or spend limit is used up
// (OpenAI's 429 "insufficient_quota", with signals body: openai): a
// billing stop, which waiting does not cure. Test for it with errors.Is;
// errors.As with *QuotaError gives the details.
var ErrQuotaExhausted = errors.New("throttle: vendor quota exhausted")

// A QuotaError reports a vendor's billing stop (see ErrQuotaExhausted). It
// was not retried and paused nothing: other requests, other tenants' with
// their own accounts included, go on as before.
type QuotaError struct {
	// Provider is the provider that answered.
	Provider string
	// StatusCode is the response's status, e.g. 429.
	StatusCode int
	// Body is the start of the response's body (at most
	// backoff.MaxBodyPeek bytes), the vendor's explanation. It is
	// untrusted: Error does not repeat it.
	Body []byte
}

// Error names the provider and the vendor's status.
func (e *QuotaError) Error() string {
	return fmt.Sprintf("throttle: %s: the vendor's quota is exhausted (status %d, a billing stop): not retried", e.Provider, e.StatusCode)
}

// Is reports whether target is ErrQuotaExhausted.
func (e *QuotaError) Is(target error) bool { return target == ErrQuotaExhausted }
