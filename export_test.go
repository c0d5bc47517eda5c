package throttle

import (
	"net/http"
	"time"

	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/providers"
)

// MapCounters reads resp's counters at now as the transport does for
// res, and returns what each mapped limit (by name) would be drained to:
// the catalog's sync mappings are tested against the vendors' documented
// examples through it.
func MapCounters(resp *http.Response, res *providers.Resolution, now time.Time) (map[string]int64, []error) {
	readings, errs := backoff.ReadCounters(resp, res.Sync.Format, now)
	out := map[string]int64{}
	for _, o := range mapCounters(readings, res, nil) {
		out[res.Request.Items[o.Item].Limit.Name] = o.Remaining
	}
	return out, errs
}

// OurRemaining is ourRemaining, for the property that a mapping never
// leaves a limit more than the vendor has left nor more than its capacity.
var OurRemaining = ourRemaining
