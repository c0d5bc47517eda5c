package quota

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalid is wrapped by every error that reports an impossible limit,
// request or key: a zero rate, a cost above the burst, an unknown time zone.
var ErrInvalid = errors.New("quota: invalid")

// MaxExact bounds a GCRA tolerance (in µs) and a window's rate: stores keep
// every sum below 2^53, where a Lua number (a double) is still an exact
// integer, while now stays below 2^51 µs since 1970 (until 2041). 2^51 µs
// is 71 years, far beyond any vendor's limit.
const MaxExact = 1 << 51

// Kind says which algorithm a Limit uses.
type Kind uint8

const (
	// GCRA is the generic cell rate algorithm: Rate events per Period, with
	// Burst of them admitted at once from idle. It models per-second and
	// per-minute peaks, leaky buckets and token buckets.
	GCRA Kind = iota + 1
	// Window is a calendar window: Rate events per window, counted in
	// windows aligned to a reset time in a time zone. It models a vendor's
	// daily (or hourly, or monthly) quota.
	Window
)

// String returns "gcra" or "window".
func (k Kind) String() string {
	switch k {
	case GCRA:
		return "gcra"
	case Window:
		return "window"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Unit is the length of a calendar window.
type Unit uint8

const (
	// Hour windows start every hour at Calendar.Reset past the hour.
	Hour Unit = iota + 1
	// Day windows start every day at Calendar.Reset past local midnight.
	// On a daylight-saving change day a window is 23 or 25 hours long.
	Day
	// Month windows start on the first of every month at Calendar.Reset
	// past local midnight.
	Month
)

// String returns "hour", "day" or "month".
func (u Unit) String() string {
	switch u {
	case Hour:
		return "hour"
	case Day:
		return "day"
	case Month:
		return "month"
	}
	return fmt.Sprintf("Unit(%d)", uint8(u))
}

// Calendar places the windows of a Window limit.
type Calendar struct {
	// Unit is the window length.
	Unit Unit
	// Reset is when a window starts, as an offset from the natural start of
	// the unit in Location: 9*time.Hour means 09:00 for Day and Month
	// windows; 30*time.Minute means half past every hour for Hour windows.
	// The zero value starts windows at local midnight (or on the hour).
	Reset time.Duration
	// Location is the time zone the windows follow. Nil means UTC.
	Location *time.Location
}

// Bounds returns the start and end of the window that holds t.
// Windows are half-open: start <= t < end.
func (c Calendar) Bounds(t time.Time) (start, end time.Time) {
	loc := c.Location
	if loc == nil {
		loc = time.UTC
	}
	local := t.In(loc)
	switch c.Unit {
	case Hour:
		// Hours are measured in absolute time so that the repeated hour of
		// a daylight-saving fall-back is two windows, not one ambiguous one.
		off := time.Duration(local.Minute())*time.Minute +
			time.Duration(local.Second())*time.Second +
			time.Duration(local.Nanosecond()) - c.Reset
		if off < 0 {
			off += time.Hour
		}
		start = t.Add(-off)
		return start, start.Add(time.Hour)
	case Month:
		y, m, _ := local.Date()
		start = c.at(y, m, 1, loc)
		if start.After(t) {
			start = c.at(y, m-1, 1, loc)
		}
		sy, sm, _ := start.In(loc).Date()
		return start, c.at(sy, sm+1, 1, loc)
	default: // Day
		y, m, d := local.Date()
		start = c.at(y, m, d, loc)
		if start.After(t) {
			start = c.at(y, m, d-1, loc)
		}
		sy, sm, sd := start.In(loc).Date()
		return start, c.at(sy, sm, sd+1, loc)
	}
}

// at is the reset time on the given local date, as wall-clock fields (not
// midnight plus a duration, which is an hour off on a daylight-saving change
// day); time.Date normalises a reset that falls in a daylight-saving gap.
func (c Calendar) at(y int, m time.Month, d int, loc *time.Location) time.Time {
	r := c.Reset
	h := r / time.Hour
	r -= h * time.Hour
	mi := r / time.Minute
	r -= mi * time.Minute
	sec := r / time.Second
	r -= sec * time.Second
	return time.Date(y, m, d, int(h), int(mi), int(sec), int(r), loc)
}

// A Limit is one limit of a stack. Its state lives in a Store under the key
// that the Request gives it, so one Limit serves every scope (tenant,
// account) it is applied to.
type Limit struct {
	// Name identifies the limit in results, errors and keys.
	Name string
	// Kind selects the algorithm.
	Kind Kind
	// Rate is the number of events per Period (GCRA) or per window (Window).
	Rate int64
	// Period is the GCRA period, e.g. time.Second for "100 per second".
	Period time.Duration
	// Burst is how many events GCRA admits at once from idle. Zero means
	// Rate: "100 per second" admits 100 at once.
	Burst int64
	// Calendar places the windows of a Window limit.
	Calendar Calendar
}

// Validate reports whether the limit is possible, naming the limit.
func (l *Limit) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w limit %q: %s", ErrInvalid, l.Name, fmt.Sprintf(format, args...))
	}
	if l.Name == "" {
		return fmt.Errorf("%w limit: empty name", ErrInvalid)
	}
	if l.Rate <= 0 {
		return bad("rate %d must be at least 1", l.Rate)
	}
	switch l.Kind {
	case GCRA:
		if l.Period < time.Microsecond {
			return bad("period %v must be at least 1µs", l.Period)
		}
		if l.Burst < 0 {
			return bad("burst %d must be at least 1 (or 0 for the rate)", l.Burst)
		}
		if l.Period.Microseconds()/l.Rate == 0 {
			return bad("rate %d per %v is finer than 1 event per µs", l.Rate, l.Period)
		}
		if l.burst() > MaxExact/l.Interval() {
			return bad("burst %d times the interval %dµs is above 2^51µs (71 years)", l.burst(), l.Interval())
		}
	case Window:
		if l.Rate > MaxExact {
			return bad("rate %d is above 2^51", l.Rate)
		}
		switch l.Calendar.Unit {
		case Hour:
			if l.Calendar.Reset < 0 || l.Calendar.Reset >= time.Hour {
				return bad("reset %v must be within the hour", l.Calendar.Reset)
			}
		case Day, Month:
			if l.Calendar.Reset < 0 || l.Calendar.Reset >= 24*time.Hour {
				return bad("reset %v must be within the day", l.Calendar.Reset)
			}
		default:
			return bad("window unit must be hour, day or month")
		}
	default:
		return bad("unknown kind %d", l.Kind)
	}
	return nil
}

// burst is the GCRA burst with its default applied.
func (l *Limit) burst() int64 {
	if l.Burst == 0 {
		return l.Rate
	}
	return l.Burst
}

// Capacity is the largest cost one request may have under this limit: the
// burst of a GCRA limit, the quota of a window.
func (l *Limit) Capacity() int64 {
	if l.Kind == GCRA {
		return l.burst()
	}
	return l.Rate
}

// Interval is the GCRA emission interval in microseconds, ceil(Period /
// Rate): rounded up, so the limit is never faster than configured.
func (l *Limit) Interval() int64 {
	p := l.Period.Microseconds()
	return (p + l.Rate - 1) / l.Rate
}

// Tolerance is the GCRA delay variation tolerance in microseconds,
// Burst * Interval.
func (l *Limit) Tolerance() int64 {
	return l.burst() * l.Interval()
}
