package quota

import (
	"fmt"
	"math"
	"time"
)

// This file is the arithmetic of fair share (package doc "Fair share"):
// how a Fair limit is divided among the tenants of its requests. Every
// store computes it the same way, Redis in reserve.lua.

// A Share names the tenant a Fair item of a request is shared by, and the
// tenant's weight (package doc "Fair share").
type Share struct {
	// Key is the tenant's key part, passed through SafePart by the
	// caller (a store applies FairPart, which keeps such a part as it
	// is). "" is no tenant: the request shares as the tenant "".
	Key string
	// Weight is the tenant's weight among the active tenants of the
	// limit: 0 means 1, at most MaxWeight.
	Weight int64
}

// MaxWeight is the largest Share.Weight: with a burst below 2^53/MaxWeight
// (Limit.Validate), a lane's burst Burst*w/W is exact in every store.
const MaxWeight = 1000

// FairActive is the least time a tenant counts as active on a Fair limit
// after its last decision there (admitted or deferred): the span is the
// limit's Period, or FairActive when the Period is shorter
// (Limit.FairSpan).
const FairActive = time.Second

// FairExpire is how many stale tenants one decision of a Fair item drops
// from the item's active set at most, oldest first (unless every tenant
// in it is stale: then the set is forgotten whole). It bounds the work of
// one decision, however many tenants went quiet at once.
const FairExpire = 16

// FairSpan returns how long a tenant stays active on the Fair limit l
// after its last decision there: max(Period, FairActive).
func (l *Limit) FairSpan() time.Duration { return max(l.Period, FairActive) }

// Weighted returns the share's weight with its default applied: Weight,
// or 1 when it is 0.
func (s Share) Weighted() int64 {
	if s.Weight == 0 {
		return 1
	}
	return s.Weight
}

// FairPart returns the part a store keys tenant key's fair-share state by
// (its lane and its entry in the active set): key itself when it is a
// part SafePart keeps as it is or a hash SafePart made, "#" for "" (no
// tenant; SafePart makes no "#" alone), and SafePart(key) for anything
// else, so that no value can carry a brace or grow a key, and two
// tenants never share a part.
func FairPart(key string) string {
	switch {
	case key == "":
		return "#"
	case isSafe(key) || IsHash(key):
		return key
	}
	return SafePart(key)
}

// FairLane returns the interval (µs) and the burst of the lane of a
// tenant of weight w among active tenants of weight sum sum (w included),
// on a Fair limit of interval T and burst B:
//
//	Ti = min(ceil(T * sum / w), floor(MaxExact / B)), in float64 in this order
//	bi = max(1, floor(B * w / sum))
//
// Ti is computed in float64, the product first, as every store computes
// it (Lua: math.ceil(T * sum / w)): exact while T*sum < 2^53, and the same
// µs in every store beyond. The cap keeps a cost times Ti within 2^51 (a
// cost is at most B); a lane that slow is one request in decades.
func FairLane(T, B, sum, w int64) (Ti, bi int64) {
	ti := math.Ceil(float64(T) * float64(sum) / float64(w))
	Ti = MaxExact / B
	if ti < float64(Ti) {
		Ti = int64(ti)
	}
	return max(Ti, 1), max(1, B*w/sum)
}

// FairHold returns the fair hold of a Fair limit of burst B, in events:
// max(1, B/10). A request over its share leaves it (at most B less its
// cost, so that it can still go) to the requests within their share: it
// is admitted only while the limit would still admit that much more
// (package doc "Fair share").
func FairHold(B int64) int64 { return max(1, B/10) }

// FairOverHold is what a request over its tenant's share leaves of K's
// burst B to the others (at most B less its cost): twice the fair hold,
// and at least half the burst, so that it takes only capacity that the
// appointments and the requests within their share leave unused (the
// spare of a limit whose appointments keep it busy is then small, and
// the tenants' shares follow their weights), while a limit with spare
// capacity still lends it (package doc "Fair share").
func FairOverHold(B int64) int64 { return max(2*FairHold(B), B/2) }

// FairIdleHold is what a request over its tenant's share of cost n leaves
// of K's burst B to the others once its tenant's lane is booked FairSpan
// ahead while another tenant is active (so that taking more could not be
// charged to the lane): all but twice the fair hold and its cost, and never less than
// FairOverHold (at most B - n). It takes only capacity that nobody else
// is using, so it keeps a limit work-conserving without letting the
// order in which tenants ask hand out the spare (package doc "Fair
// share").
func FairIdleHold(B, n int64) int64 {
	return max(min(FairOverHold(B), B-n), B-n-2*FairHold(B))
}

// validateFair checks Fair on a limit whose other fields are valid.
func (l *Limit) validateFair(bad func(string, ...any) error) error {
	switch {
	case l.Kind != GCRA:
		return bad("only a GCRA limit can be shared fairly, not a %v limit", l.Kind)
	case l.Reserve != nil:
		return bad("a fair limit cannot keep class reserves: give it no reserve")
	case l.Learn:
		return bad("a learning limit cannot be shared fairly")
	case l.burst() > (1<<53-1)/MaxWeight:
		return bad("burst %d times the largest weight %d must be below 2^53", l.burst(), MaxWeight)
	}
	return nil
}

// validateShare checks the request's Share, for a stack with a Fair item.
func (r *Request) validateShare() error {
	if w := r.Share.Weight; w < 0 || w > MaxWeight {
		return fmt.Errorf("%w request: tenant %q: weight %d must be from 0 (1) to %d", ErrInvalid, r.Share.Key, w, MaxWeight)
	}
	return nil
}

// HasFair reports whether the request's stack has a Fair limit: then its
// Share and Appointment count.
func (r *Request) HasFair() bool {
	for i := range r.Items {
		if l := r.Items[i].Limit; l != nil && l.Fair {
			return true
		}
	}
	return false
}
