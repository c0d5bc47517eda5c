package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/backoff"
)

// retrier sends a request through the throttle's transport, and again
// after a vendor's throttle (or a 5xx or connection error of an idempotent
// request), by the rules of throttle.NewClient's client (backoff.Policy),
// with one more: the request's hold. Its waits for a slot and before each
// retry all end by the request's hold deadline (reqInfo.deadline): a retry
// that would start later is not made, and the client gets the vendor's
// last answer. go-retryablehttp, which NewClient's client retries with,
// knows only a wait per attempt and a context deadline, and a context
// deadline would cut off the vendor's answer too.
type retrier struct {
	next     http.RoundTripper // the throttle.Transport
	policy   *backoff.Policy
	max      int
	min, cap time.Duration
}

func (r *retrier) RoundTrip(req *http.Request) (*http.Response, error) {
	info := infoFrom(req.Context())
	// The policy reads the method and Idempotency-Key from here.
	ctx := backoff.WithRequest(req.Context(), req)
	for attempt := 0; ; attempt++ {
		out := req.WithContext(throttle.WithMaxWait(ctx, max(time.Until(info.deadline), 0)))
		if attempt > 0 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			out.Body = body
		}
		resp, err := r.next.RoundTrip(out)
		if attempt == r.max || errors.Is(err, throttle.ErrLimited) || errors.Is(err, throttle.ErrStoreUnavailable) {
			return resp, err
		}
		if again, _ := r.policy.CheckRetry(ctx, resp, err); !again {
			return resp, err
		}
		wait := r.policy.Backoff(r.min, r.cap, attempt, resp)
		if time.Now().Add(wait).After(info.deadline) {
			return resp, err // the hold allows no retry: the vendor's answer goes back
		}
		if resp != nil {
			// Read a little so that the connection is reused.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			_ = resp.Body.Close()
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// sleep waits for d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
