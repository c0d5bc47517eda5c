package quota_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fleetquota/throttle/quota"
)

func TestCleanReason(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                               "",
		"  429 from api.stripe.com  ":    "429 from api.stripe.com",
		"a\nb\r\n\tc":                    "a b c",
		"x\x1b[2Jy":                      "x [2Jy",
		"bad \xff utf-8":                 "bad \uFFFD utf-8",
		"rtl \u202eevil\u202c done":      "rtl evil done",
		"line\u2028sep":                  "line sep",
		"\x00\x01":                       "",
		"zero\u200bwidth":                "zerowidth",
		"Retry-After 30s (global: true)": "Retry-After 30s (global: true)",
	} {
		if got := quota.CleanReason(in); got != want {
			t.Errorf("CleanReason(%q) = %q, want %q", in, got, want)
		}
	}
	for _, in := range []string{strings.Repeat("a", 1000), strings.Repeat("日本", 200), strings.Repeat("a ", 300)} {
		got := quota.CleanReason(in)
		if len(got) > quota.MaxReasonLen || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || strings.HasSuffix(got, " …") {
			t.Errorf("CleanReason of %d bytes = %d bytes %q, want at most %d, valid, ending in …", len(in), len(got), got, quota.MaxReasonLen)
		}
	}
	exact := strings.Repeat("a", quota.MaxReasonLen)
	if got := quota.CleanReason(exact); got != exact {
		t.Errorf("a reason of exactly MaxReasonLen bytes was cut: %q", got)
	}
}

// TestPauseWithReasonFallsBack: a Store that keeps no reasons (one with
// only the Store interface's methods, as a user's own store may be) is
// paused all the same.
func TestPauseWithReasonFallsBack(t *testing.T) {
	t.Parallel()
	st := quota.NewMemoryStore(quota.MemoryOptions{})
	plain := struct{ quota.Store }{st} // no ReasonPauser, whatever the memory store has
	ctx := context.Background()
	if err := quota.PauseWithReason(ctx, plain, "t", "pause", time.Minute, "why"); err != nil {
		t.Fatal(err)
	}
	res, err := st.Reserve(ctx, &quota.Request{Tag: "t", Pauses: []string{"pause"}})
	if err != nil || res.Allowed || res.Decider != quota.PausedDecider {
		t.Errorf("after PauseWithReason on the memory store: %+v, %v; want held by the pause", res, err)
	}
}
