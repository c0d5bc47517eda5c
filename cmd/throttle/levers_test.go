package main

import (
	"context"
	"strings"
	"testing"
)

// TestPauseForMessages: a --for that is not a duration says what is wrong
// with it and shows durations that work, instead of the flag package's
// bare "parse error".
func TestPauseForMessages(t *testing.T) {
	t.Parallel()
	f := &fixture{url: "redis://127.0.0.1:1", prefix: "x:"}
	for _, tc := range []struct {
		value string
		want  []string
	}{
		{"10", []string{`"10"`, "no unit", "10s", "10m"}},
		{"ten minutes", []string{`"ten minutes"`, "not a duration", "10s", "5m"}},
		{"5 m", []string{`"5 m"`, "not a duration", "10s", "5m"}},
		{"-1s", []string{"positive", "10m"}},
	} {
		code, _, errOut := cli(context.Background(), f.args("pause", "acme", "--for", tc.value)...)
		if code != exitUsage {
			t.Errorf("pause --for %q: exit %d, want %d", tc.value, code, exitUsage)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("pause --for %q: stderr lacks %q:\n%s", tc.value, w, errOut)
			}
		}
		if strings.Contains(errOut, "parse error") {
			t.Errorf("pause --for %q: stderr says only the parser's word:\n%s", tc.value, errOut)
		}
	}
}
