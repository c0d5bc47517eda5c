package quota

import (
	"context"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// A ReasonPauser is a Store that keeps, beside a pause, why it was set,
// for operators to read (the Redis store's status page). It is optional:
// a Store that does not implement it only pauses, and a reason given to
// PauseWithReason is dropped. A reason never changes a decision.
type ReasonPauser interface {
	// PauseWithReason is Store.Pause that also records reason (made
	// safe by CleanReason) with the pause, in the same atomic step. A
	// pause that changes nothing (a longer one is in force) records
	// nothing: the reason shown is the one of the pause in force. An
	// empty reason records none, and forgets the reason of the pause it
	// replaces.
	PauseWithReason(ctx context.Context, tag, key string, d time.Duration, reason string) error
}

// PauseWithReason pauses key (in tag) for d in st, recording reason
// beside the pause when st is a ReasonPauser, and pausing alone when it is
// not.
func PauseWithReason(ctx context.Context, st Store, tag, key string, d time.Duration, reason string) error {
	if rp, ok := st.(ReasonPauser); ok {
		return rp.PauseWithReason(ctx, tag, key, d, reason)
	}
	return st.Pause(ctx, tag, key, d)
}

// MaxReasonLen bounds a pause's reason, in bytes: a line an operator
// reads, not a log. CleanReason cuts longer ones.
const MaxReasonLen = 200

// CleanReason returns reason as a store keeps it: valid UTF-8, every run
// of spaces and control characters (newlines, tabs, escapes a terminal
// would obey) made one space, format characters (bidirectional
// overrides, zero-width characters) dropped, trimmed, and cut to at most MaxReasonLen
// bytes at a character boundary, ending in "…" when cut. A reason comes
// from a command line or a vendor's response and is shown on a terminal
// and a web page, so it must not be able to break either.
func CleanReason(reason string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(reason, "\uFFFD") {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = b.Len() > 0
			continue
		}
		if unicode.Is(unicode.Cf, r) { // bidi overrides, zero-width characters
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
		if b.Len() > MaxReasonLen {
			break
		}
	}
	s := b.String()
	if len(s) <= MaxReasonLen {
		return s
	}
	const ellipsis = "…"
	cut := MaxReasonLen - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimRight(s[:cut], " ") + ellipsis
}
