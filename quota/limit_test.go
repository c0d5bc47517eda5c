package quota_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

func TestCalendarBounds(t *testing.T) {
	t.Parallel()
	la := zone(t, "America/Los_Angeles")
	kolkata := zone(t, "Asia/Kolkata")
	apia := zone(t, "Pacific/Apia")
	lordHowe := zone(t, "Australia/Lord_Howe")
	tests := []struct {
		name       string
		cal        quota.Calendar
		at         time.Time
		start, end time.Time
	}{
		{"day in UTC", quota.Calendar{Unit: quota.Day},
			time.Date(2026, 5, 1, 13, 0, 0, 0, time.UTC),
			time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC)},
		{"day, exactly at the reset", quota.Calendar{Unit: quota.Day, Location: la},
			time.Date(2026, 5, 1, 0, 0, 0, 0, la),
			time.Date(2026, 5, 1, 0, 0, 0, 0, la), time.Date(2026, 5, 2, 0, 0, 0, 0, la)},
		{"day before its 09:00 reset belongs to yesterday", quota.Calendar{Unit: quota.Day, Reset: 9 * time.Hour, Location: la},
			time.Date(2026, 5, 1, 8, 59, 59, 0, la),
			time.Date(2026, 4, 30, 9, 0, 0, 0, la), time.Date(2026, 5, 1, 9, 0, 0, 0, la)},
		{"spring-forward day is 23 hours", quota.Calendar{Unit: quota.Day, Location: la},
			time.Date(2026, 3, 8, 12, 0, 0, 0, la),
			time.Date(2026, 3, 8, 0, 0, 0, 0, la), time.Date(2026, 3, 9, 0, 0, 0, 0, la)},
		{"fall-back day is 25 hours", quota.Calendar{Unit: quota.Day, Location: la},
			time.Date(2026, 11, 1, 23, 0, 0, 0, la),
			time.Date(2026, 11, 1, 0, 0, 0, 0, la), time.Date(2026, 11, 2, 0, 0, 0, 0, la)},
		{"09:00 reset after spring-forward is 09:00 PDT", quota.Calendar{Unit: quota.Day, Reset: 9 * time.Hour, Location: la},
			time.Date(2026, 3, 8, 10, 0, 0, 0, la),
			time.Date(2026, 3, 8, 9, 0, 0, 0, la), time.Date(2026, 3, 9, 9, 0, 0, 0, la)},
		{"hour at :30", quota.Calendar{Unit: quota.Hour, Reset: 30 * time.Minute},
			time.Date(2026, 5, 1, 13, 10, 0, 0, time.UTC),
			time.Date(2026, 5, 1, 12, 30, 0, 0, time.UTC), time.Date(2026, 5, 1, 13, 30, 0, 0, time.UTC)},
		{"hour in a half-hour zone follows local time", quota.Calendar{Unit: quota.Hour, Location: kolkata},
			time.Date(2026, 5, 1, 13, 10, 0, 0, time.UTC), // 18:40 IST
			time.Date(2026, 5, 1, 12, 30, 0, 0, time.UTC), time.Date(2026, 5, 1, 13, 30, 0, 0, time.UTC)},
		{"the repeated fall-back hour is its own window", quota.Calendar{Unit: quota.Hour, Location: la},
			time.Date(2026, 11, 1, 9, 15, 0, 0, time.UTC), // 01:15 PST, the second 01:15
			time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)},
		{"a reset repeated by a fall-back starts at its first occurrence", quota.Calendar{Unit: quota.Day, Reset: time.Hour + 30*time.Minute, Location: la},
			time.Date(2026, 11, 1, 9, 45, 0, 0, time.UTC), // 01:45 PST, the second 01:45
			time.Date(2026, 11, 1, 8, 30, 0, 0, time.UTC), time.Date(2026, 11, 2, 9, 30, 0, 0, time.UTC)},
		{"a reset skipped by a spring-forward starts at the jump", quota.Calendar{Unit: quota.Day, Reset: 2*time.Hour + 30*time.Minute, Location: la},
			time.Date(2026, 3, 8, 12, 0, 0, 0, la),
			time.Date(2026, 3, 8, 3, 0, 0, 0, la), time.Date(2026, 3, 9, 2, 30, 0, 0, la)},
		{"a date skipped whole has no window", quota.Calendar{Unit: quota.Day, Location: apia},
			time.Date(2011, 12, 31, 0, 0, 0, 0, apia), // Dec 29 23:59:59 -10 was followed by Dec 31 00:00 +14
			time.Date(2011, 12, 31, 0, 0, 0, 0, apia), time.Date(2012, 1, 1, 0, 0, 0, 0, apia)},
		{"an hour reset skipped by a spring-forward is not read", quota.Calendar{Unit: quota.Hour, Reset: 30 * time.Minute, Location: la},
			time.Date(2026, 3, 8, 10, 0, 0, 0, time.UTC), // 03:00 PDT, the jump
			time.Date(2026, 3, 8, 9, 30, 0, 0, time.UTC), time.Date(2026, 3, 8, 10, 30, 0, 0, time.UTC)},
		{"a 30-minute spring-forward lengthens the hour holding it", quota.Calendar{Unit: quota.Hour, Location: lordHowe},
			time.Date(2026, 10, 4, 2, 45, 0, 0, lordHowe), // +11; 02:00 +1030 became 02:30 +11
			time.Date(2026, 10, 4, 1, 0, 0, 0, lordHowe), time.Date(2026, 10, 4, 3, 0, 0, 0, lordHowe)},
		{"a 30-minute fall-back shortens the hour holding it", quota.Calendar{Unit: quota.Hour, Reset: 30 * time.Minute, Location: lordHowe},
			time.Date(2026, 4, 4, 14, 50, 0, 0, time.UTC), // 01:50 +11; 02:00 +11 becomes 01:30 +1030 at 15:00 UTC
			time.Date(2026, 4, 4, 14, 30, 0, 0, time.UTC), time.Date(2026, 4, 4, 15, 0, 0, 0, time.UTC)},
		{"month", quota.Calendar{Unit: quota.Month, Location: la},
			time.Date(2026, 2, 28, 23, 0, 0, 0, la),
			time.Date(2026, 2, 1, 0, 0, 0, 0, la), time.Date(2026, 3, 1, 0, 0, 0, 0, la)},
		{"month before its reset on the 1st", quota.Calendar{Unit: quota.Month, Reset: 9 * time.Hour},
			time.Date(2027, 1, 1, 8, 0, 0, 0, time.UTC),
			time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 9, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		start, end := tt.cal.Bounds(tt.at)
		if !start.Equal(tt.start) || !end.Equal(tt.end) {
			t.Errorf("%s: Bounds(%v) = [%v, %v), want [%v, %v)", tt.name, tt.at, start, end, tt.start, tt.end)
		}
	}
}

func TestLimitValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		lim  quota.Limit
		want string // "" = valid
	}{
		{quota.Limit{Name: "ok", Kind: quota.GCRA, Rate: 100, Period: time.Second}, ""},
		{quota.Limit{Name: "ok", Kind: quota.Window, Rate: 250000, Calendar: quota.Calendar{Unit: quota.Day}}, ""},
		{quota.Limit{Kind: quota.GCRA, Rate: 1, Period: time.Second}, "empty name"},
		{quota.Limit{Name: "r", Kind: quota.GCRA, Rate: 0, Period: time.Second}, `limit "r": rate 0`},
		{quota.Limit{Name: "b", Kind: quota.GCRA, Rate: 1, Period: time.Second, Burst: -1}, `limit "b": burst -1`},
		{quota.Limit{Name: "p", Kind: quota.GCRA, Rate: 1, Period: 999 * time.Nanosecond}, `limit "p": period`},
		{quota.Limit{Name: "f", Kind: quota.GCRA, Rate: 2000, Period: time.Millisecond}, `finer than 1 event per µs`},
		{quota.Limit{Name: "u", Kind: quota.Window, Rate: 1}, `limit "u": window unit`},
		{quota.Limit{Name: "h", Kind: quota.Window, Rate: 1, Calendar: quota.Calendar{Unit: quota.Hour, Reset: time.Hour}}, `within the hour`},
		{quota.Limit{Name: "d", Kind: quota.Window, Rate: 1, Calendar: quota.Calendar{Unit: quota.Day, Reset: -time.Minute}}, `within the day`},
		{quota.Limit{Name: "k", Rate: 1}, `unknown kind`},
		{quota.Limit{Name: "l", Kind: quota.GCRA, Rate: 10, Period: time.Second, Learn: true, Ceiling: 40}, ""},
		{quota.Limit{Name: "lw", Kind: quota.Window, Rate: 1, Learn: true, Calendar: quota.Calendar{Unit: quota.Day}}, `only a GCRA limit can learn`},
		{quota.Limit{Name: "c", Kind: quota.GCRA, Rate: 10, Period: time.Second, Ceiling: 40}, `ceiling 40 needs learn`},
		{quota.Limit{Name: "cl", Kind: quota.GCRA, Rate: 10, Period: time.Second, Learn: true, Ceiling: 5}, `at least the rate 10`},
	}
	for _, tt := range tests {
		err := tt.lim.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: unexpected error %v", tt.lim, err)
		case tt.want != "" && (err == nil || !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: got error %v, want one wrapping ErrInvalid containing %q", tt.lim, err, tt.want)
		}
	}
}

func TestIntervalRoundsUp(t *testing.T) {
	t.Parallel()
	l := quota.Limit{Name: "x", Kind: quota.GCRA, Rate: 3, Period: 10 * time.Second}
	if got, want := l.Interval(), int64(3333334); got != want {
		t.Errorf("Interval() = %d, want %d", got, want)
	}
	if got, want := l.Tolerance(), int64(3*3333334); got != want {
		t.Errorf("Tolerance() = %d, want %d", got, want)
	}
}

// TestLearned: a learning limit runs at the stated rate within [Rate,
// Ceiling] (and within 1 event per µs), its burst scaled alike, so that
// its tolerance stays the configured one up to rounding.
func TestLearned(t *testing.T) {
	t.Parallel()
	l := &quota.Limit{Name: "core", Kind: quota.GCRA, Rate: 4500, Period: time.Hour, Burst: 500, Learn: true}
	for _, tc := range []struct{ stated, rate, burst int64 }{
		{0, 4500, 500}, {100, 4500, 500}, {5000, 5000, 555}, {9000, 9000, 1000},
		{1 << 60, 45000, 5000}, // DefaultLearnCeiling times the floor
	} {
		got := l.Learned(tc.stated)
		if got.Rate != tc.rate || got.Burst != tc.burst {
			t.Errorf("Learned(%d) = rate %d burst %d, want %d, %d", tc.stated, got.Rate, got.Burst, tc.rate, tc.burst)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("Learned(%d): %v", tc.stated, err)
		}
	}
	if got := l.Learned(4500); got != l {
		t.Errorf("Learned at the floor made a copy: %+v", got)
	}
	capped := *l
	capped.Ceiling = 6000
	if got := capped.Learned(9000).Rate; got != 6000 {
		t.Errorf("Learned(9000) with a ceiling of 6000: rate %d", got)
	}
	capped.Ceiling = 1 << 60 // above 1 event per µs
	if got := capped.Learned(1 << 60); got.Rate != time.Hour.Microseconds() || got.Burst != 400000000 {
		t.Errorf("Learned(2^60) with a ceiling of 2^60: rate %d burst %d, want 1 per µs", got.Rate, got.Burst)
	}
	plain := &quota.Limit{Name: "p", Kind: quota.GCRA, Rate: 10, Period: time.Second}
	if got := plain.Learned(30); got != plain {
		t.Errorf("a limit that does not learn learned: %+v", got)
	}
}

func TestLimitValidateExactness(t *testing.T) {
	t.Parallel()
	// Both stores must refuse the same limits: beyond 2^51 µs the Redis
	// script's arithmetic would no longer be exact.
	for _, l := range []quota.Limit{
		{Name: "tolerance", Kind: quota.GCRA, Rate: 1, Period: time.Hour, Burst: 1 << 30},
		{Name: "rate", Kind: quota.Window, Rate: 1 << 52, Calendar: quota.Calendar{Unit: quota.Day}},
	} {
		if err := l.Validate(); !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), "2^51") {
			t.Errorf("%q: Validate() = %v, want ErrInvalid naming 2^51", l.Name, err)
		}
	}
}

func TestMicrosSaturates(t *testing.T) {
	t.Parallel()
	const most = time.Duration(1<<63-1) / time.Microsecond * time.Microsecond
	for _, tt := range []struct {
		us   int64
		want time.Duration
	}{
		{0, 0},
		{-5, 0},
		{1500, 1500 * time.Microsecond},
		{int64(most / time.Microsecond), most},
		{int64(most/time.Microsecond) + 1, most},
		{1<<63 - 1, most},
	} {
		if got := quota.Micros(tt.us); got != tt.want {
			t.Errorf("Micros(%d) = %v, want %v", tt.us, got, tt.want)
		}
	}
	r := quota.Request{MaxWait: time.Duration(1<<63 - 1)}
	if got := r.MaxWaitMicros(); got != quota.MaxExact {
		t.Errorf("MaxWaitMicros of the longest Duration = %d, want MaxExact %d", got, int64(quota.MaxExact))
	}
}
