package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/internal/redistest"
)

// TestMain lets the test binary be a worker: run re-executes os.Args[0],
// which under go test is this binary.
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(workerMain())
	}
	os.Exit(m.Run())
}

func TestFleet(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, &out, options{workers: 3, duration: 2 * time.Second, redisURL: "redis://" + srv.Addr + "/0"})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	head := regexp.MustCompile(`(?m)^ *second +worker 1 +worker 2 +worker 3 +total +limit$`)
	if !head.MatchString(got) {
		t.Errorf("no table header %s in:\n%s", head, got)
	}
	// Every row: each worker was served, and the total is within the limit.
	row := regexp.MustCompile(`(?m)^ *(\d+) +(\d+) +(\d+) +(\d+) +(\d+) +20$`)
	rows := row.FindAllStringSubmatch(got, -1)
	if len(rows) < 2 {
		t.Fatalf("want a row per second of the run, got %d rows in:\n%s", len(rows), got)
	}
	served := make([]bool, 3)
	for _, r := range rows {
		for i := range served {
			if r[2+i] != "0" {
				served[i] = true
			}
		}
		if total, _ := strconv.Atoi(r[5]); total > vendorLimit {
			t.Errorf("second %s: total %d over the limit %d", r[1], total, vendorLimit)
		}
	}
	for i, ok := range served {
		if !ok {
			t.Errorf("worker %d was never served:\n%s", i+1, got)
		}
	}
	if !regexp.MustCompile(`the vendor served \d+ and throttled 0\n`).MatchString(got) {
		t.Errorf("the vendor throttled requests:\n%s", got)
	}
}

func TestFleetWithoutRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	srv.Stop(t) // a port that was Redis a moment ago, now closed
	var out bytes.Buffer
	err := run(context.Background(), &out, options{workers: 1, duration: time.Second, redisURL: "redis://" + srv.Addr + "/0"})
	if !errors.Is(err, errNoRedis) {
		t.Fatalf("run without Redis: got %v, want errNoRedis", err)
	}
	for _, want := range []string{"redis-server --port 6379 --save ''", "apt-get install redis-server", "REDIS_URL="} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if out.Len() != 0 {
		t.Errorf("run without Redis printed %q, want nothing (the error says it all)", out.String())
	}
}

func TestWorkerOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		path string
		n    int
		ok   bool
	}{
		{"/workers/3/jobs", 3, true},
		{"/workers/12", 12, true},
		{"/workers/0/jobs", 0, false},
		{"/workers/x/jobs", 0, false},
		{"/other/1", 0, false},
	} {
		n, ok := workerOf(c.path)
		if n != c.n || ok != c.ok {
			t.Errorf("workerOf(%q) = %d, %v; want %d, %v", c.path, n, ok, c.n, c.ok)
		}
	}
}
