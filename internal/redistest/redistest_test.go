package redistest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestStartPing(t *testing.T) {
	t.Parallel()
	s := Start(t)
	ctx := context.Background()
	c := s.Client(t)
	if got, err := c.Ping(ctx).Result(); err != nil || got != "PONG" {
		t.Fatalf("PING = %q, %v; want PONG, nil", got, err)
	}
	// No persistence: a test must never leave an RDB or AOF file behind.
	cfg, err := c.ConfigGet(ctx, "save").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg["save"]; got != "" {
		t.Errorf("save = %q, want \"\"", got)
	}
	cfg, err = c.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg["appendonly"]; got != "no" {
		t.Errorf("appendonly = %q, want \"no\"", got)
	}
}

// TestStartWith: the extra arguments reach the server, an empty value
// included (rename-command X "" disables X).
func TestStartWith(t *testing.T) {
	t.Parallel()
	s := StartWith(t, "--maxmemory-policy", "allkeys-lru", "--rename-command", "FLUSHALL", "")
	c := s.Client(t)
	ctx := context.Background()
	cfg, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg["maxmemory-policy"]; got != "allkeys-lru" {
		t.Errorf("maxmemory-policy = %q, want allkeys-lru", got)
	}
	if err := c.FlushAll(ctx).Err(); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("FLUSHALL on a server that renamed it to \"\": err = %v, want unknown command", err)
	}
}

func TestServersAreIndependent(t *testing.T) {
	t.Parallel()
	a, b := Start(t), Start(t)
	if a.Addr == b.Addr {
		t.Fatalf("two servers share %s", a.Addr)
	}
	ctx := context.Background()
	if err := a.Client(t).Set(ctx, "k", "a", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Client(t).Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET k on the second server: err = %v, want redis.Nil", err)
	}
}

func TestStopRestartSamePort(t *testing.T) {
	t.Parallel()
	s := Start(t)
	addr := s.Addr
	c := redis.NewClient(&redis.Options{
		Addr:        s.Addr,
		DialTimeout: 500 * time.Millisecond,
		MaxRetries:  -1,
	})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	s.Stop(t)
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Stop succeeded, want an error")
	}
	s.Stop(t) // stopping twice is harmless

	s.Restart(t)
	if s.Addr != addr {
		t.Fatalf("Addr after Restart = %s, want %s", s.Addr, addr)
	}
	// The same client reconnects to the same address.
	var err error
	for i := 0; i < 3; i++ { // the pool may hand out a dead connection first
		if err = c.Ping(ctx).Err(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	// Nothing survives a restart: the server has no persistence.
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET k after Restart: err = %v, want redis.Nil", err)
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	cl := StartCluster(t)
	if got, want := len(cl.Addrs), 3; got != want {
		t.Fatalf("len(Addrs) = %d, want %d", got, want)
	}
	ctx := context.Background()
	c := cl.Client(t)

	// Enough keys to land on every master.
	masters := map[string]bool{}
	for i := 0; i < 100; i++ {
		k := fmt.Sprintf("key-%d", i)
		if err := c.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		got, err := c.Get(ctx, k).Int()
		if err != nil || got != i {
			t.Fatalf("GET %s = %d, %v; want %d, nil", k, got, err, i)
		}
		slot, err := c.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		for j := range cl.Addrs {
			if lo, hi := slotBounds(j); int(slot) >= lo && int(slot) <= hi {
				masters[cl.Addrs[j]] = true
			}
		}
	}
	if len(masters) != len(cl.Addrs) {
		t.Errorf("keys landed on %d masters, want %d", len(masters), len(cl.Addrs))
	}

	// Keys sharing a hash tag live in one slot; a multi-key command on them works.
	if err := c.MSet(ctx, "{tag}:a", 1, "{tag}:b", 2).Err(); err != nil {
		t.Errorf("MSET with one hash tag: %v", err)
	}

	// A multi-key command over two slots is refused by Redis itself. Send it
	// straight to the node that owns the first key so go-redis cannot split it.
	a, b := "{a}", "{b}"
	sa, _ := c.ClusterKeySlot(ctx, a).Result()
	sb, _ := c.ClusterKeySlot(ctx, b).Result()
	if sa == sb {
		t.Fatalf("%s and %s share slot %d", a, b, sa)
	}
	node, err := c.MasterForKey(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	err = node.Do(ctx, "MSET", a, 1, b, 2).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Errorf("MSET across slots: err = %v, want CROSSSLOT", err)
	}
	// The same through a Lua script, as the Redis store sends its keys.
	err = c.Eval(ctx, "return redis.call('MGET', KEYS[1], KEYS[2])", []string{a, b}).Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Errorf("EVAL over keys in two slots: err = %v, want CROSSSLOT", err)
	}
}

func TestStartFailsWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ft := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(ft)
	}()
	<-done
	if !strings.Contains(ft.msg, "redis-server not found in PATH") ||
		!strings.Contains(ft.msg, "apt-get install redis-server") {
		t.Errorf("failure message = %q, want it to say how to install redis-server", ft.msg)
	}
}

// fatalTB records the message of a Fatal call and ends the goroutine, as
// testing.T does, without failing the enclosing test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestStartFailureShowsLog(t *testing.T) {
	t.Parallel()
	ft := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		start(ft, func(string) ([]string, error) {
			return []string{"--no-such-option", "x"}, nil
		})
	}()
	<-done
	// redis-server's own complaint about the option must reach the test log.
	if !strings.Contains(ft.msg, "no-such-option") || !strings.Contains(ft.msg, "redis-server log") {
		t.Errorf("failure message = %q, want it to include the redis-server log", ft.msg)
	}
}

// TestDelay: commands through a Delay reach the server and come back, a
// round trip taking at least twice the delay; closing it ends its
// connections.
func TestDelay(t *testing.T) {
	t.Parallel()
	s := Start(t)
	const delay = 50 * time.Millisecond
	d := StartDelay(t, s.Addr, delay)
	c := redis.NewClient(&redis.Options{Addr: d.Addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil { // dials
		t.Fatal(err)
	}
	begin := time.Now()
	big := strings.Repeat("x", 1<<20) // more than one chunk each way
	if err := c.Set(ctx, "k", big, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != big {
		t.Fatalf("GET through the delay: %d bytes, %v; want the %d set", len(got), err, len(big))
	}
	if took := time.Since(begin); took < 4*delay {
		t.Errorf("two round trips through a %v delay took %v, want at least %v", delay, took, 4*delay)
	}
	d.close()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Error("PING after the delay proxy closed succeeded")
	}
}
