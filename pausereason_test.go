package throttle

import (
	"net/http"
	"testing"
	"time"

	"github.com/fleetquota/throttle/backoff"
)

func TestPauseReasons(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		got, want string
	}{
		{throttledReason("api.stripe.com", 429, backoff.Verdict{Source: "Retry-After", Delay: 30 * time.Second}, 30*time.Second),
			"429 from api.stripe.com, Retry-After 30s"},
		{throttledReason("api.openai.com", 429, backoff.Verdict{Source: "retry-after-ms", Delay: 1500 * time.Millisecond}, 1500*time.Millisecond),
			"429 from api.openai.com, retry-after-ms 1.5s"},
		{throttledReason("discord.com", 429, backoff.Verdict{Source: "body retry_after", Global: true}, 2*time.Minute),
			"429 from discord.com, body retry_after 2m (the account's global limit)"},
		{throttledReason("api.github.com", 403, backoff.Verdict{}, 10*time.Second),
			"403 from api.github.com, no delay given: paused 10s (the default)"},
		{countersReason("api.github.com", 200, 90*time.Minute),
			"200 from api.github.com, its counters say none remain: paused 1h30m, until their reset"},
		{responseHost(&http.Response{}), "the vendor"},
		{shortDuration(250 * time.Millisecond), "250ms"},
		{shortDuration(time.Hour), "1h"},
		{shortDuration(61*time.Second + 400*time.Millisecond), "1m1s"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
