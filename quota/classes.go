package quota

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// This file is the arithmetic of priority classes and pacing (package doc
// "Priority classes" and "Pacing"): how a limit with a Reserve is divided
// among classes, and where a paced window's line lies. Every store
// computes it the same way, Redis in reserve.lua.

// BasisPoints is what a whole limit counts in Reserve and PaceReserve: a
// reserve of 2000 is 20% of the limit.
const BasisPoints = 10000

// MaxClasses bounds how many classes a limit may have (len(Reserve)+1): a
// decision reads one lane or one activity record per class, so the bound
// keeps a decision's work, and the keys of a classed limit, small.
const MaxClasses = 16

// DefaultActiveFor is how long a class's reserve stays held in a Window,
// Rolling or Concurrency limit after the class's last admitted request,
// when the limit's ActiveFor is zero: long enough to span the pauses of
// an interactive user, short enough that a reserve nobody uses goes back
// to the lower classes within a minute.
const DefaultActiveFor = time.Minute

// Portion returns bp basis points of of, rounded down, exactly and without
// overflow for any of >= 0 and bp in [0, BasisPoints]:
// of/10000*bp + of%10000*bp/10000.
func Portion(bp, of int64) int64 {
	return of/BasisPoints*bp + of%BasisPoints*bp/BasisPoints
}

// Equal reports whether l and o are the same limit, field for field. A
// Limit holds a slice (Reserve), so it cannot be compared with ==.
func (l *Limit) Equal(o *Limit) bool {
	return l.Name == o.Name && l.Kind == o.Kind && l.Rate == o.Rate && l.Period == o.Period &&
		l.Burst == o.Burst && l.Calendar == o.Calendar && l.Learn == o.Learn && l.Ceiling == o.Ceiling &&
		(l.Reserve == nil) == (o.Reserve == nil) && slices.Equal(l.Reserve, o.Reserve) &&
		l.ActiveFor == o.ActiveFor && l.Pace == o.Pace && l.PaceReserve == o.PaceReserve && l.Fair == o.Fair
}

// Clone returns a copy of l that shares no memory with it (its Reserve is
// copied), for a cache that must notice a limit changed in place.
func (l *Limit) Clone() Limit {
	c := *l
	c.Reserve = slices.Clone(l.Reserve)
	return c
}

// Classes returns how many priority classes the limit has:
// len(Reserve)+1 when Reserve is set, else 0 (no classes).
func (l *Limit) Classes() int {
	if l.Reserve == nil {
		return 0
	}
	return len(l.Reserve) + 1
}

// Hold returns what class k keeps from the classes below it in a Window,
// Rolling or Concurrency limit, while it is active: Portion(Reserve[k],
// Rate) events (or leases). k must be below len(Reserve).
func (l *Limit) Hold(k int) int64 { return Portion(l.Reserve[k], l.Rate) }

// ActiveSpan returns ActiveFor with its default applied: how long after
// a class's last admitted request its reserve is held.
func (l *Limit) ActiveSpan() time.Duration {
	if l.ActiveFor == 0 {
		return DefaultActiveFor
	}
	return l.ActiveFor
}

// Lanes returns the lanes of a GCRA limit with a Reserve, one per class:
// lane k < len(Reserve) has the limit's Name and Period, rate
// Portion(Reserve[k], Rate) and burst Portion(Reserve[k], Burst); the bottom
// lane has what the others leave of each. Each lane's interval is rounded
// up, so the lanes together never admit more than the limit. Nil for any
// other limit.
func (l *Limit) Lanes() []Limit {
	if l.Kind != GCRA || l.Reserve == nil {
		return nil
	}
	lanes := make([]Limit, len(l.Reserve)+1)
	for k := range lanes {
		lanes[k] = l.lane(k)
	}
	return lanes
}

// lane returns lane k of a GCRA limit with a Reserve (see Lanes) without
// allocating.
func (l *Limit) lane(k int) Limit {
	r, b := l.laneRate(k)
	return Limit{Name: l.Name, Kind: GCRA, Rate: r, Period: l.Period, Burst: b}
}

// laneRate returns the rate and burst of lane k (see Lanes).
func (l *Limit) laneRate(k int) (rate, burst int64) {
	if k < len(l.Reserve) {
		return Portion(l.Reserve[k], l.Rate), Portion(l.Reserve[k], l.burst())
	}
	rate, burst = l.Rate, l.burst()
	for _, bp := range l.Reserve {
		rate -= Portion(bp, l.Rate)
		burst -= Portion(bp, l.burst())
	}
	return rate, burst
}

// PaceLead returns the lead of a paced window d µs long, d/100 (whole
// µs): the paced line starts that much before the window and ends that
// much before its end, and a PaceReserve is released for the last of it.
func PaceLead(d int64) int64 { return d / 100 }

// paceTime returns when a paced window [s, s+d) with lead f admits its
// x-th event at rate rl: s - f + ceil(x * (d / rl)), in float64 exactly
// in this order, as every store computes it (Lua: math.ceil(x * (D /
// Rl))), so that all of them find the same µs.
func paceTime(s, d, f, rl, x int64) int64 {
	return s - f + int64(math.Ceil(float64(x)*(float64(d)/float64(rl))))
}

// paceRate is the rate a paced window paces a request of class c at
// before its last PaceLead: the whole Rate for class 0 (and for every
// class without a PaceReserve), Rate less Portion(PaceReserve, Rate) for
// the classes below.
func (l *Limit) paceRate(c int) int64 {
	if c == 0 || l.PaceReserve == 0 {
		return l.Rate
	}
	return l.Rate - Portion(l.PaceReserve, l.Rate)
}

// validateClasses checks Reserve, ActiveFor, Pace and PaceReserve of a
// limit whose other fields are valid.
func (l *Limit) validateClasses(bad func(string, ...any) error) error {
	if l.Reserve != nil {
		if n := len(l.Reserve) + 1; n > MaxClasses {
			return bad("%d classes: at most %d", n, MaxClasses)
		}
		if l.Learn {
			return bad("a learning limit cannot keep class reserves; set its reserve to 0")
		}
		var sum int64
		for k, bp := range l.Reserve {
			if bp < 0 || bp >= BasisPoints {
				return bad("class %d's reserve of %d basis points must be from 0 to %d", k, bp, BasisPoints-1)
			}
			sum += bp
		}
		if sum >= BasisPoints {
			return bad("the reserves sum to %d basis points, which leaves the bottom class nothing: lower them below %d", sum, BasisPoints)
		}
		if l.Kind == GCRA {
			if err := l.validateLanes(bad); err != nil {
				return err
			}
		}
	}
	if l.ActiveFor < 0 || l.ActiveFor.Microseconds() > MaxExact {
		return bad("active for %v must be from 0 (the default, %v) to 2^51µs", l.ActiveFor, DefaultActiveFor)
	}
	if l.Pace && l.Kind != Window {
		return bad("only a calendar window can be paced, not a %v limit", l.Kind)
	}
	if l.PaceReserve < 0 || l.PaceReserve >= BasisPoints {
		return bad("pace reserve of %d basis points must be from 0 to %d", l.PaceReserve, BasisPoints-1)
	}
	if l.PaceReserve != 0 && !l.Pace {
		return bad("a pace reserve needs pace")
	}
	if l.PaceReserve != 0 && l.Reserve == nil {
		return bad("a pace reserve is kept for class 0, so it needs classes (a reserve, 0 for each class if need be)")
	}
	return nil
}

// validateLanes checks that every lane of a GCRA limit with a Reserve is
// a GCRA limit of its own: at least one event per period and a burst of
// at least one, an interval of at least 1µs, a tolerance within 2^51µs.
func (l *Limit) validateLanes(bad func(string, ...any) error) error {
	// least is the reserve, in basis points, that makes Portion(bp, of) at
	// least 1.
	least := func(of int64) int64 { return (BasisPoints + of - 1) / of }
	for k := 0; k <= len(l.Reserve); k++ {
		rate, burst := l.laneRate(k)
		bottom := k == len(l.Reserve)
		switch {
		case rate < 1 && bottom:
			return bad("the reserves leave the bottom class (%d) a rate of %d per %v: lower them", k, rate, l.Period)
		case rate < 1:
			return bad("class %d's reserve of %d basis points of rate %d is below one event per %v: raise it to at least %d basis points, or raise the rate",
				k, l.Reserve[k], l.Rate, l.Period, least(l.Rate))
		case burst < 1 && bottom:
			return bad("the reserves leave the bottom class (%d) a burst of %d: lower them, or raise the burst", k, burst)
		case burst < 1:
			return bad("class %d's reserve of %d basis points of burst %d is below one event: raise it to at least %d basis points, or raise the burst",
				k, l.Reserve[k], l.burst(), least(l.burst()))
		case l.Period.Microseconds()/rate == 0:
			return bad("class %d's lane of rate %d per %v is finer than 1 event per µs", k, rate, l.Period)
		}
		lane := l.lane(k)
		if burst > MaxExact/lane.Interval() {
			return bad("class %d's lane: burst %d times the interval %dµs is above 2^51µs (71 years)", k, burst, lane.Interval())
		}
	}
	return nil
}

// validateClass checks a request of class c and cost cost against a limit
// with a Reserve: c must be one of its classes, and for a GCRA limit the
// cost must fit the burst of a lane the class may use, its own or one
// below it, or the request could never be admitted.
func (l *Limit) validateClass(c int, cost int64) error {
	if c >= l.Classes() {
		return fmt.Errorf("%w limit %q: class %d, but it has %d classes (0 to %d)", ErrInvalid, l.Name, c, l.Classes(), l.Classes()-1)
	}
	if l.Kind != GCRA {
		return nil
	}
	var most int64
	for k := c; k <= len(l.Reserve); k++ {
		_, b := l.laneRate(k)
		most = max(most, b)
	}
	if cost > most {
		return fmt.Errorf("%w limit %q: cost %d exceeds the burst of every lane class %d may use (at most %d), so it could never be admitted",
			ErrInvalid, l.Name, cost, c, most)
	}
	return nil
}
