package redisstore

import (
	"fmt"
	"math"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// This file is the Go side of priority classes and paced windows (package
// quota's doc, "Priority classes" and "Pacing"; reserve.lua, "Classes"):
// the arguments and keys a decision of a limit with classes sends, and
// what its reply adds. A limit without a Reserve or Pace takes none of
// these paths: its arguments, keys and reply are those it had before
// classes existed.

// classArgs are the arguments of a limit with classes or a paced window
// that are the same in every decision, boxed once with its limitArgs.
type classArgs struct {
	// lanes are a GCRA limit's lanes (quota.Limit.Lanes), the top first,
	// and laneArgs their intervals and tolerances, as reserve.lua's "G"
	// item wants them.
	lanes    []quota.Limit
	laneArgs []any
	// holds are, for a Window, Rolling or Concurrency limit with classes,
	// quota.Limit.Hold of each class above the bottom, and span its
	// quota.Limit.ActiveSpan in µs.
	holds []any
	span  any
	// paceLow is a paced window's pace rate for the classes below the top
	// (its Rate less its PaceReserve's share), and paceReserve its
	// PaceReserve, from which the script finds the lead of class 0 and
	// the release of each window.
	paceLow, paceReserve any
}

// makeClassArgs returns the class arguments of l, a limit with a Reserve
// or a paced window.
func makeClassArgs(l *quota.Limit) classArgs {
	var a classArgs
	if l.Kind == quota.GCRA {
		if l.Reserve != nil {
			a.lanes = l.Lanes()
			for k := range a.lanes {
				a.laneArgs = append(a.laneArgs, a.lanes[k].Interval(), a.lanes[k].Tolerance())
			}
		}
		return a
	}
	if l.Reserve != nil {
		a.holds = make([]any, len(l.Reserve))
		for k := range l.Reserve {
			a.holds[k] = l.Hold(k)
		}
		a.span = l.ActiveSpan().Microseconds()
	}
	a.paceLow = l.Rate - quota.Portion(l.PaceReserve, l.Rate)
	a.paceReserve = l.PaceReserve
	return a
}

// itemClass is the class a request of class is in limit l: its own when l
// has classes, else 0 (the request's class is ignored). A peek of a held
// limit takes the bottom class, which reads the activity of every class
// above it.
func itemClass(l *quota.Limit, class int, peek bool) int {
	switch {
	case l.Reserve == nil:
		return 0
	case peek && l.Kind != quota.GCRA:
		return len(l.Reserve)
	}
	return class
}

// classArgc is how many more ARGV entries an item of l, a limit with
// classes or a paced window, takes than its kind's plain item: for a
// GCRA limit class and lanes, for a window its pace rate, pace reserve
// and whether it has classes, and for a limit with classes but GCRA its class part
// (appendClass).
func classArgc(l *quota.Limit, class int, peek bool) int {
	if l.Kind == quota.GCRA {
		return 1 + 2*(len(l.Reserve)+1) // c, L and 2 per lane, for DVT's place
	}
	n := 0
	if l.Kind == quota.Window {
		n = 3
	}
	if l.Reserve != nil {
		n += 3 + itemClass(l, class, peek)
	}
	return n
}

// appendClass appends to args, an item of l up to its kind's plain
// arguments (the cost, for a GCRA limit), the arguments of class
// (reserve.lua, "Classes"). peek is Inspect's: it reads every class
// above the bottom and records none.
//
//	GCRA:   T, c, L, then per lane its interval and tolerance
//	Window: the pace rate of c (0: not paced), the PaceReserve, 1 if it
//	        has classes (else 0 and nothing more), then the class part
//	class part: c, 1 if an admission records c's activity (else 0),
//	        ActiveFor (µs), Hold(0) .. Hold(c-1)
func appendClass(args []any, st *limitArgs, l *quota.Limit, class int, peek bool) []any {
	c := itemClass(l, class, peek)
	switch l.Kind {
	case quota.GCRA:
		args = append(args, st.boxed[0], c, len(st.lanes))
		return append(args, st.laneArgs...)
	case quota.Window:
		var rl, pr any = 0, st.paceReserve
		if l.Pace {
			rl = st.boxed[0] // the rate: class 0's pace rate
			if c > 0 && l.PaceReserve > 0 {
				rl = st.paceLow
			}
		}
		if l.Reserve == nil {
			return append(args, rl, pr, 0)
		}
		args = append(args, rl, pr, 1)
	}
	w := 0
	if c < len(l.Reserve) && !peek {
		w = 1
	}
	args = append(args, c, w, st.span)
	return append(args, st.holds[:c]...)
}

// extra counts the keys and reply entries of a request beyond its item
// and pause keys and its items' four reply entries each.
type extra struct {
	keys    int // extra keys: learned keys, lanes, activity records, tenants' lanes and active sets
	learned int // learning items: one learned key and one reply entry each
	laned   int // GCRA items with classes: one reply entry each, the lane charged
	fair    int // Fair items: three extra keys and fairEntries reply entries each
	// part is, for a stack with a Fair item, its tenant's part
	// (quota.FairPart of the request's Share.Key).
	part string
}

// extraKeys appends to keys (req's, as keys returns them) each item's
// extra keys, in stack order (reserve.lua's KEYS after the pause keys): a
// learning item's learned key; a GCRA item with classes the keys of its
// lanes but the bottom one (the item key), the top first; a Window,
// Rolling or Concurrency item with classes its activity record; a Fair
// item its tenant's lane, its active set and the set's weights.
func (s *Store) extraKeys(req *quota.Request, keys []string) ([]string, extra) {
	var x extra
	for i := range req.Items {
		l := req.Items[i].Limit
		switch {
		case l.Fair:
			if x.fair == 0 {
				x.part = quota.FairPart(req.Share.Key)
			}
			keys = append(keys, s.fairLaneKey(keys[i], x.part), s.companion(keys[i], KeyFairSet), s.companion(keys[i], KeyFairWeights))
			x.keys += 3
			x.fair++
		case l.Learn:
			keys = append(keys, s.learnedKey(keys[i]))
			x.keys++
			x.learned++
		case l.Reserve == nil:
		case l.Kind == quota.GCRA:
			for k := range l.Reserve {
				keys = append(keys, s.laneKey(keys[i], k))
			}
			x.keys += len(l.Reserve)
			x.laned++
		default:
			keys = append(keys, s.seenKey(keys[i]))
			x.keys++
		}
	}
	return keys, x
}

// bookLane sets what Cancel, Settle and Sync of item l, a GCRA item with
// classes, act on: lane, the lane the decision charged, with that lane's
// interval, tolerance and debt reach; the whole limit's rate bounds a
// plausible actual cost (quota.Implausible).
func (bi *bookedItem) bookLane(s *Store, l *quota.Limit, lane int64) error {
	lanes := s.limitArgs(l).lanes
	if lane < 0 || lane >= int64(len(lanes)) {
		return fmt.Errorf("%w: lane %d of %d lanes", errReply, lane, len(lanes))
	}
	ln := &lanes[lane]
	bi.limit, bi.lane = l, int8(lane)
	bi.T, bi.dvt, bi.rate, bi.reach = ln.Interval(), ln.Tolerance(), l.Rate, ln.DebtReach()
	return nil
}

// laned reports whether the item is a GCRA item with classes.
func (bi *bookedItem) laned() bool { return bi.limit != nil && bi.limit.Reserve != nil }

// laneKey returns the Redis key of lane k of the booking's item i, a GCRA
// item with classes.
func (b *booking) laneKey(i, k int) string {
	if k >= len(b.items[i].limit.Reserve) {
		return b.keys[i]
	}
	return b.s.laneKey(b.keys[i], k)
}

// syncLanes appends to keys and args after.lua's "sync" entries of item
// i, a GCRA item with classes, for r, what the vendor says remains of the
// whole limit: one per lane, the lowest drained first (package quota's
// doc, "Priority classes"), lane k to what r leaves above the bursts of
// the lanes over it, which are taken to be full. The lane charged is
// drained by the reservation's mark; every other lane holds no slot of
// this reservation, so all it has booked counts as made after it (its
// mark is "now", after.lua's now). It returns the entries' count too.
func (b *booking) syncLanes(keys []string, args []any, i int, r int64) ([]string, []any, int) {
	it := &b.items[i]
	lanes := b.s.limitArgs(it.limit).lanes
	var whole int64
	for k := range lanes {
		whole += lanes[k].Capacity()
	}
	r = min(r, whole)
	var above int64
	for k := range lanes {
		ln := &lanes[k]
		T, dvt, burst := ln.Interval(), ln.Tolerance(), ln.Capacity()
		var mark any = "now"
		if k == int(it.lane) {
			mark = it.mark
		}
		args = append(args, "sync", "g", T, dvt, min(max(r-above, 0), burst), mark)
		keys = append(keys, b.laneKey(i, k))
		above += burst
	}
	return keys, args, len(lanes)
}

// classEntries is how many entries a peek of req's items with classes
// appends to its reply (reserve.lua, "Reply"): per GCRA item with
// classes the lane charged and each lane's remaining and reset after;
// per held item how long each class above the bottom stays active.
func classEntries(req *quota.Request) int {
	n := 0
	for i := range req.Items {
		l := req.Items[i].Limit
		switch {
		case l.Reserve == nil:
		case l.Kind == quota.GCRA:
			n += 1 + 2*(len(l.Reserve)+1)
		default:
			n += len(l.Reserve)
		}
	}
	return n
}

// parseClasses sets the Lanes and Held of items, req's, from vals, the
// entries a peek appends for them (classEntries).
func parseClasses(req *quota.Request, items []ItemState, vals []int64) error {
	e := 0
	next := func() (int64, error) {
		x := vals[e]
		if x < 0 {
			return 0, fmt.Errorf("%w: peek reply: class entry %d is %d, want an integer >= 0", errReply, e, x)
		}
		e++
		return x, nil
	}
	for i := range req.Items {
		l := req.Items[i].Limit
		switch {
		case l.Reserve == nil:
		case l.Kind == quota.GCRA:
			if lane := vals[e]; lane != -1 {
				return fmt.Errorf("%w: peek reply: item %d charged lane %d", errReply, i, lane)
			}
			e++
			lanes := make([]quota.Status, len(l.Reserve)+1)
			for k := range lanes {
				rem, err := next()
				if err != nil {
					return err
				}
				reset, err := next()
				if err != nil {
					return err
				}
				lanes[k] = quota.Status{Remaining: rem, ResetAfter: quota.Micros(reset)}
			}
			items[i].Lanes = lanes
		default:
			held := make([]time.Duration, len(l.Reserve))
			for k := range held {
				left, err := next()
				if err != nil {
					return err
				}
				held[k] = quota.Micros(left)
			}
			items[i].Held = held
		}
	}
	return nil
}

// Headroom returns how many events of cost 1 a request of class could
// have admitted at once, one after another, by item i of the snapshot,
// whose limit is l, as the decision would find it at Now (a pause's drain
// aside, as for Remaining): for a GCRA limit with classes what its own
// lane and those below it hold, and one for each lane above it that is
// full (what a lower class may borrow); for a limit with classes the
// Remaining less the reserves of the active classes above it; for a paced
// window no more than its pace has released by Now. For any other limit
// it is the Remaining.
func (s Snapshot) Headroom(i int, l *quota.Limit, class int) int64 {
	it := &s.Items[i]
	if l.Reserve == nil {
		class = 0
	}
	if it.Lanes != nil {
		var n int64
		for k, ln := range it.Lanes {
			switch {
			case k >= class:
				n += ln.Remaining
			case ln.ResetAfter == 0:
				n++
			}
		}
		return n
	}
	var hold int64
	for k, left := range it.Held {
		if k < class && left > 0 {
			hold += l.Hold(k)
		}
	}
	room := it.Remaining - hold
	if l.Kind == quota.Window && l.Pace {
		room = min(room, paceLine(l, class, s.Now)-it.Used-hold)
	}
	return max(room, 0)
}

// paceLine returns the largest count x that the paced window l has
// released to class by now: the largest x whose pace time (package quota's
// doc, "Pacing"; the same float64 expression as reserve.lua's) is at or
// before now. Class 0 (and any class of a window without a PaceReserve)
// follows the line of the rate, led by PaceLead and the reserve's share of
// the window; a lower class the line of its pace rate, led by PaceLead,
// before the window's PaceRelease, and the line of the rate from it on.
func paceLine(l *quota.Limit, class int, now time.Time) int64 {
	start, end := l.Calendar.Bounds(now)
	s, e, at := start.UnixMicro(), end.UnixMicro(), now.UnixMicro()
	d := e - s
	f := quota.PaceLead(d)
	rl := l.Rate
	switch {
	case class == 0 || l.PaceReserve == 0:
		f += quota.Portion(l.PaceReserve, d)
	case at < l.PaceRelease(s, e):
		rl -= quota.Portion(l.PaceReserve, l.Rate)
	}
	// paceTime only grows with x: the largest x in [0, rl] at or before
	// at, by bisection.
	lo, hi := int64(0), rl
	for lo < hi {
		x := hi - (hi-lo)/2
		if s-f+int64(math.Ceil(float64(x)*(float64(d)/float64(rl)))) <= at {
			lo = x
		} else {
			hi = x - 1
		}
	}
	return lo
}
