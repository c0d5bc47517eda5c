package redisstore

import (
	"context"
	_ "embed" // the script
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// The fleet's recent refusals, for operators (throttle status).
//
// A decision that refuses writes nothing, by design: a refusal storm must
// not become a write storm on the store that decides. So the record is
// kept apart, and written at a pace of its own: a RefusalLog counts its
// process's refusals in memory (a map increment under a lock: no call, no
// allocation once a provider's limit has been counted in the interval),
// and adds them to Redis at most once per interval, in one script call
// (refusals.lua) whatever the number of refusals. A fleet of n processes
// that refuse writes at most n calls per interval, all to one hash tag,
// {!refusals}, which no request's tag can equal (quota.SafeKey never
// starts a tag with "!"), so ParseKey passes over it:
//
//	<prefix>{!refusals}:<provider>:<limit>   a hash: minute -> count, "last"
//
// where provider and limit pass through quota.SafePart. Counts are kept
// per minute of the store's clock for an hour. What is lost: the refusals
// of an interval whose write fails, or of a process that dies before its
// next write (at most one interval of them).

var (
	//go:embed refusals.lua
	refusalsLua    string
	refusalsScript = newScript(refusalsLua)
)

// DefaultRefusalInterval is how often a RefusalLog writes when its
// interval is zero.
const DefaultRefusalInterval = time.Second

// maxRefusalKeys bounds the providers' limits a RefusalLog counts per
// interval: they come from configuration, so this is never reached by a
// fleet's own; past it, refusals are dropped (and counted in Dropped).
const maxRefusalKeys = 512

// A RefusalKey names the limit that refused: a provider's name and the
// limit's ("pause" for a pause), as throttle's Event has them.
type RefusalKey struct {
	Provider, Limit string
}

// A RefusalLog counts this process's refusals and adds them to the
// fleet's record in Redis at most once per interval (see Store.Refusals).
// Its Note is what an observer of the transport calls on each refusal
// (throttle.RefusalObserver). It starts no goroutine of its own: the
// first refusal of an interval sets a timer whose function writes, and
// Close stops it. It is safe for concurrent use.
type RefusalLog struct {
	s        *Store
	interval time.Duration

	mu      sync.Mutex
	counts  map[RefusalKey]noted // since the last write
	spare   map[RefusalKey]noted // the map before, emptied, reused
	timer   *time.Timer          // the pending write, nil when none
	closed  bool
	writing sync.WaitGroup // writes in flight
	dropped int64
	errs    error // the last write's error
}

// noted is one limit's refusals since the last write.
type noted struct {
	n     int64
	last  time.Time     // the latest, on the process's clock
	retry time.Duration // what it was told
}

// NewRefusalLog returns a log that writes to s at most once per interval
// (zero means DefaultRefusalInterval). Close it when done.
func (s *Store) NewRefusalLog(interval time.Duration) (*RefusalLog, error) {
	if interval < 0 {
		return nil, fmt.Errorf("%w refusal log: interval %v is negative", quota.ErrInvalid, interval)
	}
	if interval == 0 {
		interval = DefaultRefusalInterval
	}
	return &RefusalLog{s: s, interval: interval, counts: map[RefusalKey]noted{}, spare: map[RefusalKey]noted{}}, nil
}

// NoteRefusal counts one refusal by provider's limit, which told the
// caller to retry after retryAfter; the log writes it within an interval.
// It makes no call: it is for the request's own goroutine.
func (l *RefusalLog) NoteRefusal(provider, limit string, retryAfter time.Duration) {
	k := RefusalKey{provider, limit}
	now := l.s.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	c, ok := l.counts[k]
	if !ok && len(l.counts) >= maxRefusalKeys {
		l.dropped++
		return
	}
	c.n++
	c.last, c.retry = now, retryAfter
	l.counts[k] = c
	if l.timer == nil {
		l.writing.Add(1)
		l.timer = time.AfterFunc(l.interval, func() {
			defer l.writing.Done()
			ctx, cancel := context.WithTimeout(context.Background(), l.s.timeout)
			defer cancel()
			_ = l.write(ctx, true)
		})
	}
}

// Dropped returns how many refusals the log could not count: past its
// bound on distinct limits per interval, or lost with a write that
// failed.
func (l *RefusalLog) Dropped() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// Flush writes what the log holds now, in one call; nothing when it holds
// nothing. It returns the write's error, or the last timed write's since
// the last Flush.
func (l *RefusalLog) Flush(ctx context.Context) error {
	l.mu.Lock()
	err := l.errs
	l.errs = nil
	l.mu.Unlock()
	return errors.Join(err, l.write(ctx, false))
}

// Close writes what the log holds and stops it: later refusals are not
// counted. It waits for a timed write in flight.
func (l *RefusalLog) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	if l.timer != nil && l.timer.Stop() {
		l.writing.Done() // its function will not run
		l.timer = nil
	}
	l.mu.Unlock()
	l.writing.Wait()
	return l.Flush(ctx)
}

// write takes what the log holds and adds it to the record, in one
// call; timed is set for the timer's write, which clears the timer.
func (l *RefusalLog) write(ctx context.Context, timed bool) error {
	l.mu.Lock()
	if timed {
		l.timer = nil
	}
	counts, next := l.counts, l.spare
	if next == nil { // another write holds it
		next = map[RefusalKey]noted{}
	}
	l.counts, l.spare = next, nil
	l.mu.Unlock()

	var err error
	if len(counts) > 0 {
		now := l.s.now()
		keys := make([]string, 0, len(counts))
		args := make([]any, 0, 2+3*len(counts))
		args = append(args, l.s.nowArg(), l.s.slack)
		var n int64
		for k, c := range counts {
			keys = append(keys, l.s.refusalKey(k))
			args = append(args, c.n, max(now.Sub(c.last), 0).Microseconds(), c.retry.Microseconds())
			n += c.n
		}
		if _, err = l.s.run(ctx, refusalsScript, keys, args); err != nil {
			err = l.s.fail(ctx, "refusals", err)
			l.mu.Lock()
			l.dropped += n
			l.mu.Unlock()
		}
	}
	clear(counts)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spare == nil {
		l.spare = counts
	}
	if timed && err != nil {
		l.errs = err
	}
	return err
}

// Refusals is the fleet's recent refusals by one provider's limit, as
// the processes' RefusalLogs wrote them.
type Refusals struct {
	RefusalKey
	// Minutes are the refusals counted in each of the last 60 minutes of
	// the store's clock, Minutes[0] the current minute (so far). A
	// refusal is counted in the minute of its log's write, at most an
	// interval after it.
	Minutes [60]int64
	// Last is when the latest refusal recorded was, on the store's clock
	// (to within the clocks of the processes, which place it by its age
	// when written); zero when none is recorded in the last hour.
	Last time.Time
	// RetryAfter is what the latest refusal was told to wait.
	RetryAfter time.Duration
}

// Within returns the refusals counted in the last n minutes, the current
// one included (1 to 60).
func (r *Refusals) Within(n int) int64 {
	var sum int64
	for _, c := range r.Minutes[:min(max(n, 0), len(r.Minutes))] {
		sum += c
	}
	return sum
}

// Refusals reads the fleet's recent refusals of the given limits, in one
// round trip: the store's now, and one Refusals per key, in order. It
// writes nothing (EVAL_RO), so it works on a replica and for a user that
// may not write.
func (s *Store) Refusals(ctx context.Context, keys []RefusalKey) (time.Time, []Refusals, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, nil, err
	}
	if len(keys) == 0 {
		return time.Time{}, nil, nil
	}
	rk := make([]string, len(keys))
	for i, k := range keys {
		if k.Provider == "" || k.Limit == "" {
			return time.Time{}, nil, fmt.Errorf("%w refusals: empty provider or limit", quota.ErrInvalid)
		}
		rk[i] = s.refusalKey(k)
	}
	v, err := bounded[any](ctx, s, callFunc[any](func(ctx context.Context) (any, error) {
		return refusalsScript.RunRO(ctx, s.client, rk, s.nowArg(), "read").Result()
	}))
	if err != nil {
		return time.Time{}, nil, s.fail(ctx, "refusals", err)
	}
	now, out, err := parseRefusals(keys, v)
	if err != nil {
		return time.Time{}, nil, s.fail(ctx, "refusals", err)
	}
	return now, out, nil
}

// parseRefusals parses a read of refusals.lua for keys.
func parseRefusals(keys []RefusalKey, v any) (time.Time, []Refusals, error) {
	vals, ok := v.([]any)
	if !ok || len(vals) != 1+len(keys) {
		return time.Time{}, nil, fmt.Errorf("%w: refusals reply %T, want an array of %d", errReply, v, 1+len(keys))
	}
	nowUS, ok := vals[0].(int64)
	if !ok || nowUS <= 0 {
		return time.Time{}, nil, fmt.Errorf("%w: refusals reply's now %v", errReply, vals[0])
	}
	minute := nowUS / 60_000_000
	out := make([]Refusals, len(keys))
	for i, k := range keys {
		r := &out[i]
		r.RefusalKey = k
		fields, ok := vals[1+i].([]any)
		if !ok || len(fields)%2 != 0 {
			return time.Time{}, nil, fmt.Errorf("%w: refusals of %s/%s: %T", errReply, k.Provider, k.Limit, vals[1+i])
		}
		for j := 0; j < len(fields); j += 2 {
			f, _ := fields[j].(string)
			val, _ := fields[j+1].(string)
			if f == "last" {
				at, retry, _ := strings.Cut(val, " ")
				a, err1 := strconv.ParseInt(at, 10, 64)
				w, err2 := strconv.ParseInt(retry, 10, 64)
				if err1 == nil && err2 == nil && a > 0 && nowUS-a < time.Hour.Microseconds() {
					r.Last, r.RetryAfter = time.UnixMicro(a), quota.Micros(w)
				}
				continue
			}
			m, err1 := strconv.ParseInt(f, 10, 64)
			c, err2 := strconv.ParseInt(val, 10, 64)
			if err1 != nil || err2 != nil || c < 0 {
				continue // not a field refusals.lua writes
			}
			if age := minute - m; age >= 0 && age < int64(len(r.Minutes)) {
				r.Minutes[age] += c
			}
		}
	}
	return time.UnixMicro(nowUS), out, nil
}
