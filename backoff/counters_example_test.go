package backoff_test

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/fleetquota/throttle/backoff"
)

func ExampleReadCounters() {
	now := time.Date(2026, time.November, 21, 6, 0, 0, 0, time.UTC)
	// A GitHub response: the core counter, reset (a Unix time) in 40 min.
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "4966")
	h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(40*time.Minute).Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
	h.Set("X-RateLimit-Used", "34")

	f, err := backoff.ParseFormat("x-ratelimit") // as a configuration names it
	if err != nil {
		panic(err)
	}
	readings, errs := backoff.ReadCounters(&http.Response{StatusCode: 200, Header: h}, f, now)
	for _, r := range readings {
		fmt.Printf("%s: %d of %d left, full again in %v\n", r.Counter, r.Remaining, r.Limit, r.Reset)
	}
	fmt.Println(errs)
	// Output:
	// core: 4966 of 5000 left, full again in 40m0s
	// []
}

func ExampleReadCounters_malformed() {
	now := time.Date(2026, time.November, 21, 6, 0, 0, 0, time.UTC)
	// Azure OpenAI sends -1 for counts it does not track: those fields are
	// errors, the reset still reads.
	h := http.Header{}
	h.Set("X-Ratelimit-Remaining-Tokens", "-1")
	h.Set("X-Ratelimit-Reset-Tokens", "0")
	h.Set("X-Ratelimit-Remaining-Requests", "59")
	h.Set("X-Ratelimit-Reset-Requests", "1s")
	readings, errs := backoff.ReadCounters(&http.Response{Header: h}, backoff.OpenAI, now)
	for _, r := range readings {
		fmt.Printf("%+v\n", r)
	}
	for _, err := range errs {
		fmt.Println(err)
	}
	// Output:
	// {Counter:requests Limit:0 HasLimit:false Remaining:59 HasRemaining:true Reset:1s HasReset:true Window:0s Scope:}
	// {Counter:tokens Limit:0 HasLimit:false Remaining:0 HasRemaining:false Reset:0s HasReset:true Window:0s Scope:}
	// backoff: malformed counter field: x-ratelimit-remaining-tokens: "-1": negative
}
