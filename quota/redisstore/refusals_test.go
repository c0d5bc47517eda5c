package redisstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// TestRefusalLog: a log's refusals reach the record at its writes, one
// call each whatever their number, counted per minute of the store's
// clock with the latest and its retry-after; the record keeps an hour.
func TestRefusalLog(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	clock := quotatest.NewClock(start)
	st := newStore(t, client, clock)
	ctx := context.Background()
	log, err := st.NewRefusalLog(time.Hour) // only Flush writes
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close(ctx)
	global, pause := RefusalKey{"stripe", "global"}, RefusalKey{"stripe", "pause"}
	read := func() []Refusals {
		t.Helper()
		now, rs, err := st.Refusals(ctx, []RefusalKey{global, pause, {"github", "core"}})
		if err != nil || len(rs) != 3 || !now.Equal(clock.Now()) {
			t.Fatalf("Refusals: %v at %v, %v", rs, now, err)
		}
		return rs
	}
	if rs := read(); rs[0].Within(60) != 0 || !rs[0].Last.IsZero() {
		t.Errorf("before any refusal: %+v", rs[0])
	}

	for range 1000 {
		log.NoteRefusal("stripe", "global", 2*time.Second)
	}
	log.NoteRefusal("stripe", "pause", 30*time.Second)
	before := commandCalls(t, client)
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if ran := callsSince(before, commandCalls(t, client)); ran["evalsha"]+ran["eval"] != 1 {
		t.Errorf("a write of 1,001 refusals ran %v, want one script call", ran)
	}
	rs := read()
	if rs[0].Minutes[0] != 1000 || !rs[0].Last.Equal(start) || rs[0].RetryAfter != 2*time.Second {
		t.Errorf("stripe/global: %d this minute, last %v told %v; want 1000 at %v told 2s", rs[0].Minutes[0], rs[0].Last, rs[0].RetryAfter, start)
	}
	if rs[1].Within(1) != 1 || rs[1].RetryAfter != 30*time.Second || rs[2].Within(60) != 0 {
		t.Errorf("stripe/pause %+v, github/core %+v", rs[1], rs[2])
	}
	if err := log.Flush(ctx); err != nil { // nothing to write
		t.Fatal(err)
	}

	clock.Advance(2 * time.Minute)
	log.NoteRefusal("stripe", "global", time.Second)
	clock.Advance(10 * time.Second) // the write comes after the refusal
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rs = read()
	if rs[0].Minutes[0] != 1 || rs[0].Minutes[2] != 1000 || rs[0].Within(5) != 1001 || rs[0].Within(1) != 1 {
		t.Errorf("two minutes on: minutes %v", rs[0].Minutes[:5])
	}
	if want := start.Add(2 * time.Minute); !rs[0].Last.Equal(want) || rs[0].RetryAfter != time.Second {
		t.Errorf("the latest refusal at %v told %v, want %v (its age placed it) told 1s", rs[0].Last, rs[0].RetryAfter, want)
	}

	// An hour of minutes and more: the oldest are dropped from the key.
	for range 70 {
		clock.Advance(time.Minute)
		log.NoteRefusal("stripe", "pause", time.Second)
		if err := log.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := client.HLen(ctx, st.refusalKey(pause)).Val(); n > 63 {
		t.Errorf("the record of stripe/pause holds %d fields after 70 minutes, want at most an hour of them", n)
	}
	rs = read()
	if rs[1].Within(60) != 60 || rs[0].Within(60) != 0 || !rs[0].Last.IsZero() {
		t.Errorf("after 70 minutes: stripe/pause %d in the hour, stripe/global %d and last %v (over an hour ago)", rs[1].Within(60), rs[0].Within(60), rs[0].Last)
	}
	if k := st.refusalKey(global); k != st.Prefix()+"{!refusals}:stripe:global" {
		t.Errorf("refusal key %q", k)
	} else if tag, key, kind, ok := st.ParseKey(k); ok {
		t.Errorf("ParseKey(%q) = %q, %q, %v; want none", k, tag, key, kind)
	}
	if _, _, err := st.Refusals(ctx, []RefusalKey{{"", "x"}}); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("Refusals of an empty provider: %v, want ErrInvalid", err)
	}
	if _, err := st.NewRefusalLog(-time.Second); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("NewRefusalLog(-1s): %v, want ErrInvalid", err)
	}
}

// TestRefusalLogTimed: the log writes by itself within its interval,
// while refusals come from many goroutines, none lost; Close writes the
// rest and stops counting.
func TestRefusalLogTimed(t *testing.T) {
	t.Parallel()
	st := newStore(t, redistest.Start(t).Client(t), nil)
	ctx := context.Background()
	log, err := st.NewRefusalLog(20 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 8, 500
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				log.NoteRefusal("openai", "tokens", time.Second)
				if i%100 == 0 {
					time.Sleep(5 * time.Millisecond) // spread over several writes
				}
			}
		}()
	}
	wg.Wait()
	// The timer writes what is left within an interval; a loaded machine
	// may take much longer, so wait up to a minute for it.
	key := []RefusalKey{{"openai", "tokens"}}
	var got int64
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_, rs, err := st.Refusals(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if got = rs[0].Within(60); got == goroutines*each {
			break
		}
	}
	if got != goroutines*each {
		t.Fatalf("the record holds %d refusals a minute on, want %d", got, goroutines*each)
	}
	log.NoteRefusal("openai", "tokens", time.Second)
	if err := log.Close(ctx); err != nil {
		t.Fatal(err)
	}
	log.NoteRefusal("openai", "tokens", time.Second) // after Close: not counted
	if err := log.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, rs, _ := st.Refusals(ctx, key); rs[0].Within(60) != goroutines*each+1 {
		t.Errorf("after Close: %d, want %d", rs[0].Within(60), goroutines*each+1)
	}
	if d := log.Dropped(); d != 0 {
		t.Errorf("Dropped() = %d", d)
	}
}

// TestRefusalLogStoreDown: a write that fails loses its refusals, counted
// in Dropped, and Flush returns the error; the log goes on.
func TestRefusalLogStoreDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	st, err := New(srv.Client(t), Options{Prefix: uniquePrefix(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	log, err := st.NewRefusalLog(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv.Stop(t)
	log.NoteRefusal("stripe", "global", time.Second)
	log.NoteRefusal("stripe", "global", time.Second)
	if err := log.Flush(ctx); !errors.Is(err, quota.ErrStore) {
		t.Errorf("Flush with Redis down: %v, want ErrStore", err)
	}
	if d := log.Dropped(); d != 2 {
		t.Errorf("Dropped() = %d, want 2", d)
	}
	srv.Restart(t)
	log.NoteRefusal("stripe", "global", time.Second)
	if err := log.Close(ctx); err != nil {
		t.Errorf("Close with Redis back: %v", err)
	}
}

// TestNoteRefusalAllocs: counting a refusal allocates nothing once its
// limit has been counted in the interval.
func TestNoteRefusalAllocs(t *testing.T) {
	st := newStore(t, redistest.Start(t).Client(t), nil)
	log, err := st.NewRefusalLog(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close(context.Background())
	log.NoteRefusal("stripe", "global", time.Second)
	if n := testing.AllocsPerRun(1000, func() { log.NoteRefusal("stripe", "global", time.Second) }); n != 0 {
		t.Errorf("NoteRefusal allocates %v times, want 0", n)
	}
}

// BenchmarkNoteRefusal: what a refusal costs its request in the process
// (the write is the log's, once per interval).
func BenchmarkNoteRefusal(b *testing.B) {
	st := newStore(b, redistest.Start(b).Client(b), nil)
	log, err := st.NewRefusalLog(time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close(context.Background())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			log.NoteRefusal("stripe", "global", time.Second)
		}
	})
}

// BenchmarkRefusalWrite: one write of a log that counted refusals by
// limits distinct limits (what each process sends at most once per
// interval while it refuses). ns/op is the call as the client sees it on
// loopback; server-µs/op Redis's own time per call (INFO commandstats),
// which is what the fleet's writes take from the server that decides.
//
//	go test -run '^$' -bench RefusalWrite ./quota/redisstore/
func BenchmarkRefusalWrite(b *testing.B) {
	srv := redistest.Start(b)
	client := srv.Client(b)
	st := newStore(b, client, nil)
	ctx := context.Background()
	for _, limits := range []int{1, 10} {
		b.Run("limits="+strconv.Itoa(limits), func(b *testing.B) {
			log, err := st.NewRefusalLog(time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			defer log.Close(ctx)
			note := func() {
				for i := range limits {
					for range 100 {
						log.NoteRefusal("vendor", "limit"+strconv.Itoa(i), time.Second)
					}
				}
			}
			note()
			if err := log.Flush(ctx); err != nil { // loads the script
				b.Fatal(err)
			}
			before := serverMicros(b, client)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				note()
				b.StartTimer()
				if err := log.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric((serverMicros(b, client)-before)/float64(b.N), "server-µs/op")
		})
	}
}

// serverMicros returns the µs redis-server spent in EVALSHA calls so far
// (INFO commandstats): 0 before the first.
func serverMicros(b *testing.B, c *redis.Client) float64 {
	n, _ := evalshaStat(b, c, "usec")
	return n
}
