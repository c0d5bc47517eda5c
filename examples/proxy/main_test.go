package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestProxyDemo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, "127.0.0.1:0", true); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^one request: +200 from the vendor$`),
		regexp.MustCompile(`(?m)^five at once: +200 200 200 200 200 `),
		regexp.MustCompile(`(?m)^Throttle-Business: acme, request 2: +200 from the vendor$`),
		regexp.MustCompile(`(?m)^Throttle-Business: acme, request 3: +429 limited: .*"limit":"per-tenant","scope":"acme"`),
		regexp.MustCompile(`(?m)^Throttle-Limit-Cost: nosuch=1: +400 bad_request: .*no limit \\"nosuch\\"`),
		regexp.MustCompile(`(?m)^the vendor served 8 requests and had to refuse 0$`),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("output does not match %s:\n%s", want, out.String())
		}
	}
}

// Without --demo it prints the lines to paste and serves until stopped.
func TestProxyServesUntilStopped(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, out, "127.0.0.1:0", false) }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "Ctrl-C stops it") {
		if time.Now().After(deadline) {
			t.Fatalf("no paste lines after 30s:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	for _, want := range []string{"curl -i http://127.0.0.1:", "python3 -c 'import requests"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
