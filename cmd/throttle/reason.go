package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// operatorReason is the reason "throttle pause" records beside the pause
// it sets: who paused, from where, and why when --reason says, so that an
// operator reading the status page mid-incident knows whom to ask. The
// store cuts it to quota.MaxReasonLen.
func operatorReason(why string) string {
	var b strings.Builder
	b.WriteString("throttle pause")
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	switch {
	case name != "" && host != "":
		b.WriteString(" by " + name + "@" + host)
	case name != "":
		b.WriteString(" by " + name)
	case host != "":
		b.WriteString(" on " + host)
	}
	if why = strings.TrimSpace(why); why != "" {
		b.WriteString(": " + why)
	}
	return b.String()
}

// printPaused writes what "throttle pause" left in force on pk, which it
// paused for d: until when, and why, which is the reason of a longer pause
// that was already in force and kept.
func printPaused(ctx context.Context, stdout io.Writer, e *env, what string, pk quota.PauseKey, d time.Duration) error {
	snap, err := e.store.Inspect(ctx, &quota.Request{Tag: pk.Tag, Pauses: []string{pk.Key}})
	if err != nil {
		return err
	}
	notes, err := e.store.PauseNotes(ctx, []quota.PauseKey{pk})
	if err != nil {
		return err
	}
	left := snap.PausedUntil.Sub(snap.Now)
	kept := ""
	if left > d+time.Second {
		kept = " (a longer pause in force, kept)"
	}
	why := "no reason recorded"
	if n := notes[0]; n.Reason != "" && n.Until.Equal(snap.PausedUntil) {
		why = n.Reason
	}
	_, err = fmt.Fprintf(stdout, "paused %s until %s (%s from now)%s: %s\n", what,
		snap.PausedUntil.UTC().Format(time.RFC3339), left.Round(time.Second), kept, why)
	return err
}
