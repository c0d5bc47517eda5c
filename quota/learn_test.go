package quota

import (
	"testing"
	"time"
)

// TestRestate: restate's rule (package doc "Learning") at its edges: the
// booked events rounded up, the cap at the new rate's DebtReach, a tat
// past it or idle left alone, and no overflow where the old interval is
// 1 µs and the new one hours.
func TestRestate(t *testing.T) {
	t.Parallel()
	const now = int64(1_000_000_000)
	sec := &Limit{Name: "s", Kind: GCRA, Rate: 10, Period: time.Second, Burst: 10, Learn: true, Ceiling: 40}
	day := &Limit{Name: "d", Kind: GCRA, Rate: 10, Period: 24 * time.Hour, Burst: 10, Learn: true,
		Ceiling: (24 * time.Hour).Microseconds()} // 1 per µs: T 1 µs, tolerance a day
	dayReach := day.DebtReach() // a day and ten intervals of 2.4 h: 2 days
	for _, tc := range []struct {
		name     string
		lim      *Limit
		from, to int64
		tat      int64
		want     int64
	}{
		{"15 booked at 25ms", sec, 40, 10, now + 375_000, now + 1_500_000},
		{"a part of one counts as one", sec, 40, 10, now + 360_000, now + 1_500_000},
		{"capped at the reach", sec, 40, 10, now + 1_000_000, now + 2_000_000},
		{"past the reach: as it was", sec, 40, 10, now + 2_500_000, now + 2_500_000},
		{"idle: as it was", sec, 40, 10, now - 5, now - 5},
		{"not learned: as it was", sec, 40, 10, 0, 0},
		{"1 µs to hours, capped", day, day.Period.Microseconds(), 10, now + 50_000_000_000, now + dayReach},
		{"1 µs to hours, 3 booked", day, day.Period.Microseconds(), 10, now + 3, now + 3*day.Interval()},
	} {
		got := restate(tc.tat, now, tc.lim.Learned(tc.from), tc.lim.Learned(tc.to))
		if got != tc.want {
			t.Errorf("%s: restate(now%+d) = now%+d, want now%+d", tc.name, tc.tat-now, got-now, tc.want-now)
		}
	}
}
