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

// DefaultLearnCeiling is how many times its Rate a learning limit without
// a Ceiling may run at. A limit must have some ceiling: the figure comes
// from a response, and one response stating a bogus limit (10^12) would
// otherwise run the limit at 1 event per µs for LearnTTL. Ten times the
// configured figure covers the plan tiers of the catalog's vendors from
// the lowest configured one (GitHub's 5,000 to 15,000 an hour, OpenAI's
// usage tiers a few times apart each); a vendor whose plans span more
// needs its Ceiling set.
const DefaultLearnCeiling = 10

// LearnBounds returns the rates a learning limit may run at: from its Rate
// (the floor) to hi, its Ceiling, or DefaultLearnCeiling times its Rate
// when it has none, and never above 1 event per µs nor above the rate at
// which the scaled burst stops being an exact integer in every store
// (burst*hi <= MaxExact). For a limit that does not learn, both are Rate.
func (l *Limit) LearnBounds() (lo, hi int64) {
	if !l.Learn || l.Kind != GCRA {
		return l.Rate, l.Rate
	}
	ceiling := l.Ceiling
	if ceiling <= 0 {
		ceiling = DefaultLearnCeiling * min(l.Rate, MaxExact) // no overflow
	}
	hi = min(l.Period.Microseconds(), MaxExact/l.burst(), ceiling)
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

// restate returns the tat of a learning limit's state, which decisions
// ran at from, re-expressed at to, the lower figure a vendor now states
// (package doc "Learning"): what is booked ahead of now counts as the
// events it holds at from, rounded up to whole ones, each taking to's
// interval, so that what was admitted at the higher figure counts at the
// lower one. It stops at now plus to's DebtReach, as a settled debt does:
// a vendor enforcing the lower figure has refilled a period later,
// whatever it was sent before. A tat already beyond that, or in the past,
// is returned as it is: the state is never loosened.
func restate(tat, now int64, from, to *Limit) int64 {
	d, reach := tat-now, to.DebtReach()
	if d <= 0 || d >= reach {
		return tat
	}
	Tf, Tt := from.Interval(), to.Interval()
	booked := (d + Tf - 1) / Tf
	if booked > reach/Tt { // booked*Tt would pass reach (and may overflow)
		return now + reach
	}
	return now + booked*Tt
}
