package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// TestPauseReason: PauseWithReason writes the reason beside the pause,
// made safe, with the pause's end and TTL, and PauseNotes reads it back;
// a pause that changes nothing keeps the reason in force; a longer pause
// without a reason deletes it; Pause alone writes no reason key; ParseKey
// passes over the reason key.
func TestPauseReason(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	pk := quota.PauseKey{Tag: "stripe", Key: "pause"}
	notes := func() PauseNote {
		t.Helper()
		n, err := st.PauseNotes(ctx, []quota.PauseKey{pk})
		if err != nil || len(n) != 1 {
			t.Fatalf("PauseNotes: %v, %v", n, err)
		}
		return n[0]
	}
	if n := notes(); n != (PauseNote{}) {
		t.Errorf("the note of a pause never set: %+v, want none", n)
	}

	if err := st.PauseWithReason(ctx, pk.Tag, pk.Key, 30*time.Second, "429 from api.stripe.com,\n\x1b[31mRetry-After 30s"); err != nil {
		t.Fatal(err)
	}
	want := PauseNote{Until: start.Add(30 * time.Second), Set: start, Reason: "429 from api.stripe.com, [31mRetry-After 30s"}
	if n := notes(); !n.Until.Equal(want.Until) || !n.Set.Equal(want.Set) || n.Reason != want.Reason {
		t.Errorf("note %+v, want %+v", n, want)
	}
	req := quota.Request{Tag: pk.Tag, Pauses: []string{pk.Key}}
	if snap, err := st.Inspect(ctx, &req); err != nil || !snap.PausedUntil.Equal(notes().Until) {
		t.Errorf("Inspect: paused until %v, %v; want the note's end %v", snap.PausedUntil, err, notes().Until)
	}
	rk := st.reasonKey(pk.Tag, pk.Key)
	if rk != st.Prefix()+"{stripe}:!reason:pause" {
		t.Errorf("reason key %q", rk)
	}
	if p, r := client.PTTL(ctx, st.PauseKey(pk.Tag, pk.Key)).Val(), client.PTTL(ctx, rk).Val(); r <= 0 || p-r > time.Second || r-p > time.Second {
		t.Errorf("the reason's TTL %v, the pause's %v: want the same", r, p)
	}
	if tag, key, kind, ok := st.ParseKey(rk); ok {
		t.Errorf("ParseKey(%q) = %q, %q, %v; want none (tools pass over reasons)", rk, tag, key, kind)
	}

	clock.Advance(time.Second)
	if err := st.PauseWithReason(ctx, pk.Tag, pk.Key, 10*time.Second, "a shorter one"); err != nil {
		t.Fatal(err)
	}
	if n := notes(); n.Reason != want.Reason || !n.Until.Equal(want.Until) {
		t.Errorf("after a shorter pause, which changes nothing: %+v, want the first reason kept", n)
	}
	if err := st.Pause(ctx, pk.Tag, pk.Key, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := notes(); n != (PauseNote{}) {
		t.Errorf("after a longer pause without a reason: %+v, want none (the reason was the replaced pause's)", n)
	}
	if err := st.Pause(ctx, "other", "pause", time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := client.Exists(ctx, st.reasonKey("other", "pause")).Val(); n != 0 {
		t.Errorf("Pause wrote a reason key")
	}

	long := strings.Repeat("é", quota.MaxReasonLen)
	if err := st.PauseWithReason(ctx, pk.Tag, pk.Key, 2*time.Hour, long); err != nil {
		t.Fatal(err)
	}
	if n := notes(); len(n.Reason) > quota.MaxReasonLen || !strings.HasSuffix(n.Reason, "é…") {
		t.Errorf("a long reason came back as %d bytes %q, want it cut to %d", len(n.Reason), n.Reason, quota.MaxReasonLen)
	}

	if _, err := st.PauseNotes(ctx, []quota.PauseKey{{Tag: "", Key: "pause"}}); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("PauseNotes of an empty tag: %v, want ErrInvalid", err)
	}
	if n, err := st.PauseNotes(ctx, nil); err != nil || len(n) != 0 {
		t.Errorf("PauseNotes(nil) = %v, %v", n, err)
	}
}

// TestPauseOverReason: PauseOverWithReason records the reason beside the
// pause, on a cluster too, where the pause's copies carry none; the notes
// of pauses in many slots come back in one call.
func TestPauseOverReason(t *testing.T) {
	t.Parallel()
	client := redistest.StartCluster(t).Client(t)
	// 16,384 writes in one call: a timeout a loaded machine cannot exceed.
	st, err := New(client, Options{Prefix: uniquePrefix(), Clock: quotatest.NewClock(start), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.PauseOverWithReason(ctx, "provider", "pause:all", time.Hour, "throttle pause by ops: incident 42"); err != nil {
		t.Fatal(err)
	}
	tags := tenantsOnEveryMaster("provider")
	for i, tag := range tags {
		if err := st.PauseWithReason(ctx, tag, "pause:"+tag, time.Duration(i+1)*time.Minute, "tenant "+tag); err != nil {
			t.Fatal(err)
		}
	}
	keys := []quota.PauseKey{{Tag: "provider", Key: "pause:all"}}
	for _, tag := range tags {
		keys = append(keys, quota.PauseKey{Tag: tag, Key: "pause:" + tag})
	}
	notes, err := st.PauseNotes(ctx, keys)
	if err != nil || len(notes) != 4 {
		t.Fatalf("PauseNotes: %v, %v", notes, err)
	}
	if n := notes[0]; n.Reason != "throttle pause by ops: incident 42" || !n.Until.Equal(start.Add(time.Hour)) {
		t.Errorf("the provider's note: %+v", n)
	}
	for i, tag := range tags {
		if n := notes[i+1]; n.Reason != "tenant "+tag || !n.Until.Equal(start.Add(time.Duration(i+1)*time.Minute)) {
			t.Errorf("%s's note: %+v", tag, n)
		}
	}
	if res := reserve(t, st, tenantRequest(tags[0]), 1, 0); res.Allowed {
		t.Errorf("a tenant during PauseOverWithReason: %+v, want held", res.Result)
	}
}

// TestParseNote: values pause.lua could not have written are no note.
func TestParseNote(t *testing.T) {
	t.Parallel()
	if n := parseNote("100 50 why not"); n.Until != time.UnixMicro(100) || n.Set != time.UnixMicro(50) || n.Reason != "why not" {
		t.Errorf("parseNote: %+v", n)
	}
	for _, v := range []string{"", "100", "100 50", "x 50 r", "100 y r", "-1 50 r", "100 0 r"} {
		if n := parseNote(v); n != (PauseNote{}) {
			t.Errorf("parseNote(%q) = %+v, want none", v, n)
		}
	}
}
