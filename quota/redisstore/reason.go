package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/quota"
)

// Why a pause was set (quota.ReasonPauser), for operators.
//
// pause.lua writes the reason beside the pause key, in the same call and
// tag, with the same TTL:
//
//	<prefix>{<tag>}:!reason:<key>   "<paused-until µs> <set at µs> <reason>"
//
// Decisions never read it: a decision's keys and commands are the same
// with or without it. "!reason:" is not a namespace ParseKey returns (no
// item key starts with "!"), so tools that walk the keys pass over it. The
// paused-until it starts with is the pause's when it was written: a
// reader shows the reason only beside a pause that ends then, so that a
// reason is never shown beside another pause (one set by a process
// without reasons, between the two reads).

var _ quota.ReasonPauser = (*Store)(nil)

// PauseWithReason is Pause that records why, as quota.ReasonPauser says:
// reason, made safe by quota.CleanReason, is written beside the pause by
// the same script call, and PauseNotes reads it back. It costs the pause
// one SET more (or a DEL with no reason), and decisions nothing.
func (s *Store) PauseWithReason(ctx context.Context, tag, key string, d time.Duration, reason string) error {
	_, _, err := s.pause(ctx, tag, key, d, reason)
	return err
}

// A PauseNote is what a pause recorded of itself when it was set.
type PauseNote struct {
	// Until is the end of the pause the note was written with.
	Until time.Time
	// Set is when the pause was set, on the store's clock.
	Set time.Time
	// Reason is why it was set, as given to PauseWithReason (made safe).
	Reason string
}

// PauseNotes reads the notes of the given pauses (each a quota.PauseKey:
// a tag and a pause key within it), in one pipelined round (per shard of
// a Redis Cluster or Ring): one per pause, in order, the zero PauseNote
// for a pause without one (none in force, set without a reason, or by a
// version of the store that records none). A note belongs to the pause
// in force only when its Until is the pause's end as Inspect reads it.
// For a provider's pause of every tenant, pass the pause itself, not a
// request's Over: its copies have no notes.
func (s *Store) PauseNotes(ctx context.Context, pauses []quota.PauseKey) ([]PauseNote, error) {
	for _, p := range pauses {
		if p.Tag == "" || p.Key == "" {
			return nil, fmt.Errorf("%w pause notes: empty tag or key", quota.ErrInvalid)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]PauseNote, len(pauses))
	if len(pauses) == 0 {
		return out, nil
	}
	vals, err := bounded[[]string](ctx, s, callFunc[[]string](func(ctx context.Context) ([]string, error) {
		pipe := s.client.Pipeline()
		cmds := make([]*redis.StringCmd, len(pauses))
		for i, p := range pauses {
			cmds[i] = pipe.Get(ctx, s.reasonKey(p.Tag, p.Key))
		}
		_, _ = pipe.Exec(ctx) // each command carries its own error
		vals := make([]string, len(cmds))
		for i, c := range cmds {
			v, err := c.Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, err
			}
			vals[i] = v
		}
		return vals, nil
	}))
	if err != nil {
		return nil, s.fail(ctx, "pause notes", err)
	}
	for i, v := range vals {
		out[i] = parseNote(v)
	}
	return out, nil
}

// parseNote parses a reason key's value; the zero PauseNote for "" (no
// key) or a value pause.lua could not have written.
func parseNote(v string) PauseNote {
	until, rest, ok1 := strings.Cut(v, " ")
	set, reason, ok2 := strings.Cut(rest, " ")
	u, err1 := strconv.ParseInt(until, 10, 64)
	a, err2 := strconv.ParseInt(set, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || u <= 0 || a <= 0 {
		return PauseNote{}
	}
	return PauseNote{Until: time.UnixMicro(u), Set: time.UnixMicro(a), Reason: reason}
}
