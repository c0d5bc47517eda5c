package quota

import "time"

// PauseDrain bounds what a pause takes from the GCRA buckets of the
// requests it holds back (package doc "After a pause"): at most PauseDrain
// worth of a bucket's refill, the whole bucket when its tolerance is
// shorter. So the drain ends PauseDrain after the pause at the latest, and
// a store keeps a pause's key that much longer than the pause.
//
// A minute empties the buckets of per-second and per-minute limits, whose
// bursts are what a vendor throttles again when a pause ends, while a
// limit with a long tolerance (an hourly quota's burst of hundreds) keeps
// most of its burst: the pause says the vendor's short-term rate was
// exceeded, not that its long-term quota was.
const PauseDrain = time.Minute

// pauseDrain is PauseDrain in µs.
const pauseDrain = int64(PauseDrain / time.Microsecond)

// drainedTat returns the least tat a pause until paused (µs) leaves a
// GCRA limit with tolerance dvt and interval T for a request of cost c:
// the bucket holds, at the pause's end, room for that request and nothing
// more, drained by at most PauseDrain. A tat at or above it is unchanged,
// so the drain never admits more; once now passes paused + PauseDrain it
// is below now and changes nothing.
func drainedTat(paused, dvt, T, c int64) int64 {
	return paused + min(dvt, pauseDrain) - c*T
}

// drainPaused applies drainedTat to the GCRA items of a request whose latest
// pause, in force or not, is paused.
func drainPaused(items []item, paused int64) {
	for i := range items {
		it := &items[i]
		if it.lim.Kind != GCRA {
			continue
		}
		it.tat = max(it.tat, drainedTat(paused, it.dvt, it.T, it.cost))
		for k := range it.lanes { // each lane of a limit with classes, by its own bucket
			l := &it.lanes[k]
			l.tat = max(l.tat, drainedTat(paused, l.dvt, l.T, it.cost))
		}
	}
}
