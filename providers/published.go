package providers

import "math"

// published returns the share of a vendor's published count n that the
// provider uses: n with the provider's headroom applied as Load applies it
// to a limit's rate, burst or quota (rounded down, at least 1; n itself
// when n <= 0 or the headroom is unset). A vendor's counter whose limit L
// gives published(L) == a limit's capacity is the bucket that limit
// models, which is how the transport tells a vendor's own bucket from a
// window it models with a smaller burst (docs/decisions.md, "Sync: used
// only when the vendor's bucket is the limit's").
func (p *Provider) published(n int64) int64 {
	bp := int64(10000)
	if p.Headroom > 0 && p.Headroom < 1 {
		bp = int64(math.Round(p.Headroom * 10000))
	}
	return scale(n, bp)
}
