package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
)

// checkOutput checks the summary of a successful run.
func checkOutput(t *testing.T, out string) {
	t.Helper()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^sent +50 of 50$`),
		regexp.MustCompile(`(?m)^waited +p50 \S+, max \S+$`),
		regexp.MustCompile(`(?m)^refused +0$`),
		regexp.MustCompile(`(?m)^vendor 429s +0$`),
		regexp.MustCompile(`(?m)^elapsed +\S+$`),
		regexp.MustCompile(`\[#{20}\] 50/50 done`),
	} {
		if !want.MatchString(out) {
			t.Errorf("output does not match %s:\n%s", want, out)
		}
	}
	// Not a terminal: plain lines, no carriage returns.
	if strings.Contains(out, "\r") {
		t.Errorf("output to a non-terminal holds a carriage return:\n%q", out)
	}
}

func TestQuickstartMemory(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := runWith(ctx, &out, ""); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	checkOutput(t, out.String())
	if !strings.Contains(out.String(), "store: memory") {
		t.Errorf("output does not name the memory store:\n%s", out.String())
	}
}

func TestQuickstartRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := runWith(ctx, &out, "redis://"+srv.Addr+"/0"); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	checkOutput(t, out.String())
	if !strings.Contains(out.String(), "store: redis redis://"+srv.Addr) {
		t.Errorf("output does not name the Redis store:\n%s", out.String())
	}
}

func TestQuickstartUnreachableRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	srv.Stop(t) // a port that was Redis a moment ago, now closed
	var out bytes.Buffer
	err := runWith(context.Background(), &out, "redis://"+srv.Addr+"/0")
	if err == nil || !strings.Contains(err.Error(), "not reachable") {
		t.Fatalf("run with a stopped Redis: got %v, want an error saying it is not reachable", err)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"redis://localhost:6379/0", "redis://localhost:6379/0"},
		{"redis://:secret@localhost:6379/0", "redis://:xxxxx@localhost:6379/0"},
		{"rediss://user:secret@host:6380", "rediss://user:xxxxx@host:6380"},
		{"redis://u:se cret@h%zz:1", "(a URL that does not parse)"},
	} {
		if got := redactURL(c.in); got != c.want {
			t.Errorf("redactURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	d := []time.Duration{1, 2, 3, 4}
	for _, c := range []struct {
		p    int
		want time.Duration
	}{{50, 2}, {100, 4}, {1, 1}, {75, 3}} {
		if got := percentile(d, c.p); got != c.want {
			t.Errorf("percentile(%v, %d) = %v, want %v", d, c.p, got, c.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile(nil, 50) = %v, want 0", got)
	}
}
