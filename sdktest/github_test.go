package sdktest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-github/v84/github"
)

// go-github (v84) does not retry. It remembers the last rate-limit state
// it saw: while x-ratelimit-remaining was 0 and the reset is ahead, or
// until a secondary limit's Retry-After has passed, it refuses calls
// itself with *github.RateLimitError or *github.AbuseRateLimitError
// without sending them. Only with the context value
// github.SleepUntilPrimaryRateLimitResetWhenRateLimited does it sleep
// until a primary reset and send once more.

// githubHeaders sets GitHub's rate-limit headers, sent on every response:
// an hour-long primary window with remaining requests left in it.
func githubHeaders(w http.ResponseWriter, remaining int, reset time.Time) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-RateLimit-Used", strconv.Itoa(5000-remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
}

func githubUser(w http.ResponseWriter, _ *http.Request) {
	githubHeaders(w, 4990, time.Now().Add(time.Hour))
	fmt.Fprint(w, `{"login":"octocat","id":1}`)
}

// githubPrimaryLimited is GitHub's answer when the primary limit is
// spent: 403, x-ratelimit-remaining 0, and the window's reset (here the
// next second) in x-ratelimit-reset.
func githubPrimaryLimited(w http.ResponseWriter, _ *http.Request) {
	githubHeaders(w, 0, time.Now().Add(time.Second))
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprint(w, `{"message":"API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000.",`+
		`"documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api","status":"403"}`)
}

// githubSecondaryLimited is GitHub's answer when a secondary limit
// refuses: 403 with retry-after, while the primary window (and its
// x-ratelimit-reset, an hour away) still has requests left.
func githubSecondaryLimited(w http.ResponseWriter, _ *http.Request) {
	githubHeaders(w, 4990, time.Now().Add(time.Hour))
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprint(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000.",`+
		`"documentation_url":"https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits","status":"403"}`)
}

// githubClient wires hc into go-github as docs/sdks.md does.
func githubClient(hc *http.Client) *github.Client {
	return github.NewClient(hc).WithAuthToken("ghp_sdktest")
}

// getUser asks for a user with a deadline well beyond the delays the
// fake vendor names, as docs/sdks.md advises for GitHub, whose reset may
// be an hour away.
func getUser(ctx context.Context, gc *github.Client) (*github.User, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u, _, err := gc.Users.Get(ctx, "octocat")
	return u, err
}

func TestGitHubRefusalReachesCallerOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, githubUser), tinyLimits)
	gc := githubClient(r.client)
	if _, err := getUser(failFast(), gc); err != nil {
		t.Fatalf("first request: %v", err)
	}
	_, err := getUser(failFast(), gc)
	refusal(t, err)
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Errorf("got %T, want the *url.Error of http.Client.Do", err)
	}
	r.want(t, counts{Admitted: 1, Refused: 1, Sent: 1, Seen: 1})
}

// A primary-limit 403 is retried by the throttle after x-ratelimit-reset;
// go-github sees only the success.
func TestGitHubPrimaryLimitRetriedByThrottle(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, githubPrimaryLimited, githubUser), nil, fastRetries)
	u, err := getUser(t.Context(), githubClient(r.client))
	if err != nil || u.GetLogin() != "octocat" {
		t.Fatalf("got %v, %v; want octocat", u, err)
	}
	r.want(t, counts{Admitted: 2, Throttled: 1, Sent: 2, Seen: 2})
}

// A secondary-limit 403 is retried after its Retry-After (1 s), not after
// the primary window's x-ratelimit-reset an hour away.
func TestGitHubSecondaryLimitRetriedAfterRetryAfter(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, githubSecondaryLimited, githubUser), nil, fastRetries)
	u, err := getUser(t.Context(), githubClient(r.client))
	if err != nil || u.GetLogin() != "octocat" {
		t.Fatalf("got %v, %v; want octocat", u, err)
	}
	r.want(t, counts{Admitted: 2, Throttled: 1, Sent: 2, Seen: 2})
}

// When the throttle's retries run out the caller gets go-github's
// *AbuseRateLimitError, after 1 + retries requests; go-github then
// refuses the next call itself, without asking the throttle.
func TestGitHubSecondaryLimitReachesCallerAsGitHubError(t *testing.T) {
	t.Parallel()
	r := newRig(t, startVendor(t, githubSecondaryLimited), nil, fastRetries)
	gc := githubClient(r.client)
	_, err := getUser(t.Context(), gc)
	var ae *github.AbuseRateLimitError
	if !errors.As(err, &ae) || ae.GetRetryAfter() != time.Second {
		t.Fatalf("got %v, want a *github.AbuseRateLimitError with RetryAfter 1s", err)
	}
	want := counts{Admitted: 2, Throttled: 2, Sent: 2, Seen: 2}
	r.want(t, want)
	if _, err := getUser(t.Context(), gc); !errors.As(err, &ae) {
		t.Fatalf("next call: got %v, want go-github's own *github.AbuseRateLimitError", err)
	}
	r.want(t, want)
}
