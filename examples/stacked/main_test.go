package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestStacked(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	day := time.Now().UTC().YearDay()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []*regexp.Regexp{
		// Each limit decided at least one refusal, and the caller saw it
		// as a LimitError matching ErrLimited.
		regexp.MustCompile(`(?m)^ *\d+\.\d+s +acme +3 +per-business +\S+ +moves on to the next business$`),
		regexp.MustCompile(`(?m) peak +\S+ +waits RetryAfter, tries again$`),
		regexp.MustCompile(`(?m) daily +\S+ +stops until the quota resets$`),
		regexp.MustCompile(`Limit="per-business" Scope="acme"`),
		regexp.MustCompile(`Limit="peak" Scope=""`),
		regexp.MustCompile(`Limit="daily" Scope=""`),
		regexp.MustCompile(`errors.Is\(err, throttle.ErrLimited\): +true`),
		regexp.MustCompile(`the vendor served \d+ and throttled 0`),
	} {
		if !want.MatchString(got) {
			t.Errorf("output does not match %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "errors.Is(err, throttle.ErrLimited):  false") {
		t.Errorf("a refusal does not match ErrLimited:\n%s", got)
	}
	// The daily quota resets at midnight UTC; a run across it may send more.
	if time.Now().UTC().YearDay() == day && !strings.Contains(got, "sent 30;") {
		t.Errorf("want exactly the daily quota, 30, sent:\n%s", got)
	}
}
