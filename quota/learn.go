package quota

import "time"

// This file is the arithmetic of learning (package doc "Learning"): a
// GCRA limit with Learn set runs at the rate the vendor states, within
// [Rate, hi], with its burst scaled alike. Every store computes it the
// same way, Redis in reserve.lua.

// LearnTTL is how long a store keeps the figure a vendor stated for a
// learning limit after the last response that stated it: a fleet idle
// for longer starts again from the floor until its first response.
const LearnTTL = 24 * time.Hour

// LearnBounds returns the rates a learning limit may run at: from its Rate
// (the floor) to hi, its Ceiling when set, and never above 1 event per µs
// nor above the rate at which the scaled burst stops being an exact
// integer in every store (burst*hi <= MaxExact). For a limit that does not
// learn, both are Rate.
func (l *Limit) LearnBounds() (lo, hi int64) {
	if !l.Learn || l.Kind != GCRA {
		return l.Rate, l.Rate
	}
	hi = min(l.Period.Microseconds(), MaxExact/l.burst())
	if l.Ceiling > 0 {
		hi = min(hi, l.Ceiling)
	}
	return l.Rate, max(hi, l.Rate)
}

// Learned returns the limit a learning limit runs at when the vendor
// states a limit of stated events per Period (0: none stated): the rate
// is stated clamped to LearnBounds, the burst scaled by the same factor
// (rounded down, so never above what the vendor allows at that rate).
// The tolerance stays below 2*MaxExact, an exact integer in every store.
// A limit that does not learn, or that stays at its floor, is returned
// as it is.
func (l *Limit) Learned(stated int64) *Limit {
	lo, hi := l.LearnBounds()
	r := min(max(stated, lo), hi)
	if r == l.Rate {
		return l
	}
	c := *l
	c.Rate, c.Burst = r, l.burst()*r/l.Rate
	return &c
}
