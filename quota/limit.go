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

// Implausible reports whether actual, the cost a response reported for
// one request, is above rate, what its limit admits in one period or
// window (Limit.Rate; for a learning limit the Status.Rate it was decided
// at): no vendor enforcing the limit could have served that much to one
// request, so the figure is malformed, and Settle books the estimate
// instead (package doc "Settle").
func Implausible(actual, rate int64) bool { return actual > rate }

// DebtReach is how far past now, in µs, a settled debt may take a GCRA
// limit's theoretical arrival time: its period plus its tolerance, so
// that the next request waits at most one period (and its own interval)
// for the debt (package doc "Settle"). The vendor's limit has refilled
// by then, whatever a response said.
func (l *Limit) DebtReach() int64 { return l.Period.Microseconds() + l.Tolerance() }

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
	// Concurrency caps the requests in flight at once: Rate leases, each
	// held by one request from its decision until it is released (the
	// response done) or its lease expires, Period after the request's
	// slot or its last renewal. It models GitHub's 100 concurrent
	// requests and the model APIs' concurrent-stream caps. See package doc
	// "Leases".
	Concurrency
	// Rolling is a rolling window: at most Rate events in any trailing
	// Period, e.g. Salesforce's API allocation over a rolling 24 hours.
	// Events are counted in RollingBuckets buckets per Period, each held
	// until one Period after its end: never more than Rate in any
	// trailing Period, at the price of up to one bucket width of time
	// per event (package doc "The decision").
	Rolling
)

// RollingBuckets is how many buckets a Rolling limit splits its Period
// into: the bucket width is BucketWidth. A steady demand above the limit
// is admitted at no less than Rate*(1 - 1/RollingBuckets) per Period
// (less the rounding of the width up to a whole µs), and a key holds at
// most 2*RollingBuckets+2 buckets.
const RollingBuckets = 100

// MinRollingPeriod is the shortest Period of a Rolling limit: with a
// bucket of at least 10µs, the rounding of the width up to a whole µs
// costs at most a tenth of a bucket.
const MinRollingPeriod = time.Millisecond

// String returns "gcra", "window", "concurrent" or "rolling".
func (k Kind) String() string {
	switch k {
	case GCRA:
		return "gcra"
	case Window:
		return "window"
	case Concurrency:
		return "concurrent"
	case Rolling:
		return "rolling"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Unit is the length of a calendar window.
type Unit uint8

const (
	// Hour windows start every time the local clock reads Calendar.Reset
	// past an hour. See Calendar for daylight-saving changes.
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
//
// Windows tile time: each ends where the next starts, none is empty, and
// every instant is in exactly one. Where a zone's clock jumps, that takes a
// rule:
//
//   - A Day or Month window starts at the first instant at which the local
//     clock reads its reset time or later. A reset time that a
//     spring-forward skips (midnight in America/Santiago, which jumps from
//     00:00 to 01:00) starts the window at the jump, the first instant
//     after the gap; one that a fall-back repeats starts it at its first
//     occurrence. Only a date the zone skips whole (Pacific/Apia,
//     2011-12-30) has no window.
//   - An Hour window starts at every instant at which the local clock reads
//     Reset past an hour, and at no other. Where offsets change by whole
//     hours that is every 60 minutes of real time, daylight saving or not:
//     the repeated hour of a fall-back is a window of its own, and a reset
//     minute inside a spring-forward gap is simply not read. A change by a
//     fraction of an hour (Australia/Lord_Howe moves 30 minutes) makes the
//     window holding it that much shorter or longer: 30 or 90 minutes.
//
// Bounds relies on what holds for every zone of the tz database: offsets
// within a day of UTC and offset changes more than two days apart.
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
	t = t.In(loc)
	switch c.Unit {
	case Hour:
		start, end = c.hourBounds(t)
	case Month:
		// The window of month m is [first(m), first(m+1)); first never
		// decreases from one month to the next, so the window holding t
		// is the last month whose first is at or before t.
		y, m, _ := t.Date()
		start = c.first(y, m, 1, loc)
		for start.After(t) {
			m--
			start = c.first(y, m, 1, loc)
		}
		for end = c.first(y, m+1, 1, loc); !end.After(t); end = c.first(y, m+1, 1, loc) {
			m++
			start = end
		}
	default: // Day, as for Month
		y, m, d := t.Date()
		start = c.first(y, m, d, loc)
		for start.After(t) {
			d--
			start = c.first(y, m, d, loc)
		}
		for end = c.first(y, m, d+1, loc); !end.After(t); end = c.first(y, m, d+1, loc) {
			d++
			start = end
		}
	}
	return start.In(loc), end.In(loc)
}

// maxOffset bounds a zone's offset from UTC: tzdata has none beyond 16
// hours.
const maxOffset = 24 * time.Hour

// first returns the start of the Day or Month window of the given local
// date: the first instant at which the clock in loc reads the date's reset
// time or later.
func (c Calendar) first(y int, m time.Month, d int, loc *time.Location) time.Time {
	// wall is the reset time as a reading of the clock; the instant at
	// which a clock of offset o reads it is wall-o. Every instant that
	// reads it lies within maxOffset of wall, where the offset changes at
	// most once.
	wall := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Add(c.Reset)
	lo, hi := wall.Add(-maxOffset), wall.Add(maxOffset)
	before, after := offset(lo, loc), offset(hi, loc)
	if before == after {
		return wall.Add(-before)
	}
	jump := change(lo, hi, before, loc)
	if at := wall.Add(-before); at.Before(jump) {
		return at // read before the change (the first of two readings, if it repeats)
	}
	if at := wall.Add(-after); at.After(jump) {
		return at
	}
	return jump // skipped by a spring-forward, or read at the change itself
}

// hourBounds returns the Hour window holding t (in the calendar's zone):
// from the last instant at or before t at which the clock reads Reset past
// an hour to the next such instant.
func (c Calendar) hourBounds(t time.Time) (start, end time.Time) {
	_, o := t.Zone()
	off := time.Duration(o) * time.Second
	start = t.Add(-c.sinceReset(t, off))
	end = start.Add(time.Hour)
	if before := offset(start, t.Location()); before != off {
		// The offset changed after start: the clock at t's offset has
		// not read the reset minute since the change, so the window
		// started at the last reading before the change.
		last := change(start, t, before, t.Location()).Add(-time.Nanosecond)
		start = last.Add(-c.sinceReset(last, before))
	}
	if after := offset(end, t.Location()); after != off {
		// The offset changes before end: the window ends at the first
		// reading at the new offset.
		jump := change(t, end, off, t.Location())
		end = jump.Add((time.Hour - c.sinceReset(jump, after)) % time.Hour)
	}
	return start, end
}

// sinceReset is how long ago, at t, a clock of offset off last read Reset
// past an hour: in [0, 1h).
func (c Calendar) sinceReset(t time.Time, off time.Duration) time.Duration {
	wall := t.Unix() + int64(off/time.Second)
	d := (time.Duration(wall%3600)*time.Second + time.Duration(t.Nanosecond()) - c.Reset%time.Hour) % time.Hour
	if d < 0 {
		d += time.Hour
	}
	return d
}

// offset is the offset from UTC of loc's clock at t.
func offset(t time.Time, loc *time.Location) time.Duration {
	_, o := t.In(loc).Zone()
	return time.Duration(o) * time.Second
}

// change returns the instant in (lo, hi] at which loc's offset stops being
// before, the offset at lo, given that it changes once in that span. Zones
// change offset on whole seconds, so it bisects the seconds. (ZoneBounds
// would say directly, but in zones ruled by a TZ string it ends the last
// period of a leap year a day early.)
func change(lo, hi time.Time, before time.Duration, loc *time.Location) time.Time {
	a, b := lo.Unix(), hi.Unix() // offset at a is before, at b is not
	for b-a > 1 {
		mid := a + (b-a)/2
		if offset(time.Unix(mid, 0), loc) == before {
			a = mid
		} else {
			b = mid
		}
	}
	return time.Unix(b, 0)
}

// A Limit is one limit of a stack. Its state lives in a Store under the key
// that the Request gives it, so one Limit serves every scope (tenant,
// account) it is applied to.
type Limit struct {
	// Name identifies the limit in results, errors and keys.
	Name string
	// Kind selects the algorithm.
	Kind Kind
	// Rate is the number of events per Period (GCRA, Rolling) or per
	// window (Window), or the number of leases (Concurrency).
	Rate int64
	// Period is the GCRA period, e.g. time.Second for "100 per second",
	// the length of a Rolling window, e.g. 24*time.Hour, or a Concurrency
	// limit's lease TTL: how long a lease outlives its last renewal, so
	// that the leases of a process that died come back.
	Period time.Duration
	// Burst is how many events GCRA admits at once from idle. Zero means
	// Rate: "100 per second" admits 100 at once.
	Burst int64
	// Calendar places the windows of a Window limit.
	Calendar Calendar
	// Learn lets a GCRA limit follow the limit the vendor states (package
	// doc "Learning"): Rate and Burst are the floor, and a larger figure
	// stated through Reservation.Sync scales both, fleet-wide.
	Learn bool
	// Ceiling caps the rate a learning limit may learn; zero means
	// DefaultLearnCeiling times Rate (LearnBounds).
	Ceiling int64
	// Reserve divides the limit among priority classes 0 (the top) ..
	// len(Reserve) (the bottom): Reserve[k] is the share of the limit, in
	// basis points (1/10,000), that class k keeps from the classes below
	// it (package doc "Priority classes"). Nil: no classes;
	// Request.Class is ignored.
	Reserve []int64
	// ActiveFor is how long after a class's last admitted request its
	// reserve stays held in a Window, Rolling or Concurrency limit (GCRA
	// lanes need none: a lower class borrows only a full lane). Zero
	// means DefaultActiveFor.
	ActiveFor time.Duration
	// Pace spreads a Window limit's quota over its window (package doc
	// "Pacing"): the quota lasts until the window's end instead of
	// running out early.
	Pace bool
	// PaceReserve (basis points) is kept by a paced window for class 0
	// until the last PaceLead of the window. Needs Pace, and classes
	// (a Reserve) to tell class 0 from the others.
	PaceReserve int64
	// Fair shares a GCRA limit among the tenants of its requests
	// (Request.Share): see package doc "Fair share". Only a GCRA limit
	// without Reserve or Learn.
	Fair bool
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
	if l.Learn && l.Kind != GCRA {
		return bad("only a GCRA limit can learn, not a %v limit", l.Kind)
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
		if l.Ceiling != 0 && (!l.Learn || l.Ceiling < l.Rate) {
			return bad("ceiling %d needs learn and at least the rate %d", l.Ceiling, l.Rate)
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
	case Concurrency:
		if l.Rate > MaxExact {
			return bad("rate %d is above 2^51", l.Rate)
		}
		if l.Period < time.Millisecond || l.Period.Microseconds() > MaxExact {
			return bad("lease TTL %v must be from 1ms to 2^51µs (71 years)", l.Period)
		}
	case Rolling:
		if l.Rate > MaxExact {
			return bad("rate %d is above 2^51", l.Rate)
		}
		if l.Period < MinRollingPeriod || l.Period.Microseconds() > MaxExact {
			return bad("rolling period %v must be from %v to 2^51µs (71 years)", l.Period, MinRollingPeriod)
		}
	default:
		return bad("unknown kind %d", l.Kind)
	}
	if l.Reserve != nil || l.Pace || l.PaceReserve != 0 || l.ActiveFor != 0 {
		if err := l.validateClasses(bad); err != nil {
			return err
		}
	}
	if l.Fair {
		return l.validateFair(bad)
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
// burst of a GCRA limit, the quota of a window or a rolling window, the
// leases of a Concurrency limit (where a request holds one lease whatever
// its cost; see Request.CostOf).
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

// BucketWidth is the width in microseconds of a Rolling limit's buckets,
// ceil(Period / RollingBuckets): rounded up, so that the buckets of one
// Period never number more than RollingBuckets. Buckets are aligned to
// multiples of the width since the Unix epoch, so every store places them
// alike.
func (l *Limit) BucketWidth() int64 {
	p := l.Period.Microseconds()
	return (p + RollingBuckets - 1) / RollingBuckets
}

// Tolerance is the GCRA delay variation tolerance in microseconds,
// Burst * Interval.
func (l *Limit) Tolerance() int64 {
	return l.burst() * l.Interval()
}
