package quota_test

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// TestDailyWindowOnMidnightSpringForward: America/Santiago springs forward
// at local midnight (2026-09-06 00:00 -04 becomes 01:00 -03). The window of
// the 6th starts at that jump and holds the whole day; it once came out
// empty, and the memory store refused every request of the day with a
// LimitError naming no limit.
func TestDailyWindowOnMidnightSpringForward(t *testing.T) {
	t.Parallel()
	santiago := zone(t, "America/Santiago")
	cal := quota.Calendar{Unit: quota.Day, Location: santiago}
	at := time.Date(2026, 9, 6, 12, 0, 0, 0, santiago)
	jump := time.Date(2026, 9, 6, 4, 0, 0, 0, time.UTC) // 00:00 -04, 01:00 -03
	s, e := cal.Bounds(at)
	if want := time.Date(2026, 9, 7, 0, 0, 0, 0, santiago); !s.Equal(jump) || !e.Equal(want) {
		t.Errorf("Bounds(%v) = [%v, %v), want [%v, %v)", at, s, e, jump.In(santiago), want)
	}
	if _, e := cal.Bounds(jump.Add(-time.Nanosecond)); !e.Equal(jump) {
		t.Errorf("the 5th ends at %v, want %v", e, jump.In(santiago))
	}

	daily := &quota.Limit{Name: "daily", Kind: quota.Window, Rate: 100, Calendar: cal}
	m := quota.NewMemoryStore(quota.MemoryOptions{Clock: quotatest.NewClock(at)})
	res, err := m.Reserve(context.Background(), &quota.Request{Tag: "p", Items: []quota.Item{{Limit: daily, Key: "daily"}}, MaxWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if want := (quota.Status{Remaining: 99, ResetAfter: 12 * time.Hour}); !res.Allowed || res.Limits[0] != want {
		t.Errorf("memory store: %+v, want admitted with %+v", res.Result, want)
	}
}

// TestHourlyWindowsInLordHowe: Australia/Lord_Howe moves its clocks by 30
// minutes. Hour windows start whenever the local clock reads the reset
// minute, so the window holding a change is 30 minutes shorter or longer,
// and windows never overlap: a request every 10 s for 4 hours across the
// spring-forward of 2026-10-04 02:00 gets at most 10 per window against
// 10/hour. They once overlapped, admitting 20 in one window.
func TestHourlyWindowsInLordHowe(t *testing.T) {
	t.Parallel()
	lh := zone(t, "Australia/Lord_Howe")
	from := time.Date(2026, 10, 4, 0, 30, 0, 0, lh)
	for _, reset := range []time.Duration{0, 30 * time.Minute, 45 * time.Minute} {
		cal := quota.Calendar{Unit: quota.Hour, Reset: reset, Location: lh}
		hourly := &quota.Limit{Name: "hourly", Kind: quota.Window, Rate: 10, Calendar: cal}
		clock := quotatest.NewClock(from)
		m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
		var admitted []time.Time
		for i := 0; i < 4*360; i++ {
			res, err := m.Reserve(context.Background(), &quota.Request{Tag: "p", Items: []quota.Item{{Limit: hourly, Key: "hourly"}}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				admitted = append(admitted, clock.Now())
			}
			clock.Advance(10 * time.Second)
		}
		// Walk the windows of the 4 hours: contiguous, none holds more
		// than 10 admissions, and together they hold every admission.
		var windows []string
		total := 0
		s, e := cal.Bounds(from)
		for s.Before(from.Add(4 * time.Hour)) {
			n := 0
			for _, a := range admitted {
				if !a.Before(s) && a.Before(e) {
					n++
				}
			}
			if n > 10 {
				t.Errorf("reset %v: %d admitted in window [%v, %v), want at most 10", reset, n, s, e)
			}
			total += n
			windows = append(windows, fmt.Sprintf("[%s, %s) %d", s.Format("15:04 -0700"), e.Format("15:04 -0700"), n))
			s2, e2 := cal.Bounds(e)
			if !s2.Equal(e) {
				t.Errorf("reset %v: window after [%v, %v) starts at %v", reset, s, e, s2)
				break
			}
			s, e = s2, e2
		}
		if total != len(admitted) {
			t.Errorf("reset %v: %d admitted, %d of them in the windows %v", reset, len(admitted), total, windows)
		}
	}
}

// The exhaustive check: every zone the Go toolchain ships, 2024 to 2030.
var (
	sweepFrom = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	sweepTo   = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Resets that matter: local midnight (where Santiago, Havana and the Azores
// change), half past (a 30-minute change skips or repeats it), 01:00 and
// 02:30 (inside the usual spring-forward gap and fall-back repeat), and the
// last second of the day or hour.
var (
	dayResets  = []time.Duration{0, 30 * time.Minute, time.Hour, 2*time.Hour + 30*time.Minute, 24*time.Hour - time.Second}
	hourResets = []time.Duration{0, 15 * time.Minute, 30 * time.Minute, 45 * time.Minute, time.Hour - time.Second}
)

// TestCalendarBoundsEveryZone checks, for every zone of the Go toolchain's
// zoneinfo.zip, every unit and the resets above, that Bounds places windows
// that hold the instant asked about, are not empty, and tile time:
// Bounds(end).start == end and Bounds(start-1ns).end == start.
//
// Why sampling is complete: Bounds depends only on the zone's offset as a
// function of time. Between two offset changes, local wall-clock time is
// absolute time plus a constant, so every window there is cut by the same
// arithmetic; only windows near a change can differ, and Bounds looks at
// most an hour (Hour) or a day and a day's offset (Day, Month) either side
// of a window's boundary. So every day and month window of the seven years
// is walked (every boundary of them is checked), hour windows are walked
// densely within two days of every offset change and sampled sparsely
// elsewhere, and the instants at and beside every change are checked for
// every unit. Zones whose offsets agree over the span (links, and zones
// that differ only in their history) behave alike, so each such group is
// checked once, under the name that sorts first.
func TestCalendarBoundsEveryZone(t *testing.T) {
	t.Parallel()
	groups := zoneGroups(t)
	t.Logf("%d zones in %d groups with distinct offsets over %d-%d", countZones(groups), len(groups), sweepFrom.Year(), sweepTo.Year()-1)
	for _, g := range groups {
		t.Run(g.names[0], func(t *testing.T) {
			t.Parallel()
			ck := &boundsChecker{t: t, names: g.names}
			for _, reset := range dayResets {
				for _, unit := range []quota.Unit{quota.Day, quota.Month} {
					cal := quota.Calendar{Unit: unit, Reset: reset, Location: g.loc}
					ck.walk(cal, sweepFrom, sweepTo)
					ck.around(cal, g.changes)
				}
			}
			for _, reset := range hourResets {
				cal := quota.Calendar{Unit: quota.Hour, Reset: reset, Location: g.loc}
				for _, c := range g.changes {
					ck.walk(cal, c.Add(-48*time.Hour), c.Add(48*time.Hour))
				}
				ck.around(cal, g.changes)
				// Sparse elsewhere: every 10 days and 13 minutes, an
				// instant at a different minute each time.
				for at := sweepFrom.Add(17 * time.Second); at.Before(sweepTo); at = at.Add(240*time.Hour + 13*time.Minute) {
					ck.at(cal, at)
				}
			}
		})
	}
}

// zoneGroup is the zones whose offsets agree over the sweep (three days
// either side included), with the instants their offset changes.
type zoneGroup struct {
	names   []string
	loc     *time.Location
	changes []time.Time
}

func countZones(groups []*zoneGroup) int {
	n := 0
	for _, g := range groups {
		n += len(g.names)
	}
	return n
}

// zoneGroups loads every zone of GOROOT/lib/time/zoneinfo.zip (the data the Go
// toolchain ships, whatever the machine has installed) and groups the zones
// by their offsets over the sweep.
func zoneGroups(t *testing.T) []*zoneGroup {
	t.Helper()
	// go test puts its toolchain's go first on PATH.
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("the exhaustive zone check needs the Go toolchain's time zone database: go env GOROOT: %v", err)
	}
	path := filepath.Join(strings.TrimSpace(string(goroot)), "lib", "time", "zoneinfo.zip")
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("the exhaustive zone check needs the Go toolchain's time zone database: %v", err)
	}
	defer zr.Close()
	byKey := map[string]*zoneGroup{}
	var groups []*zoneGroup
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		loc, err := time.LoadLocationFromTZData(f.Name, data)
		if err != nil {
			t.Fatalf("zone %s: %v", f.Name, err)
		}
		// The offset as a function of time, from a day before the sweep to
		// a day after it: its changes and the offset each one sets.
		var key strings.Builder
		var changes []time.Time
		at := sweepFrom.Add(-72 * time.Hour).In(loc)
		_, off := at.Zone()
		checkOffset(t, f.Name, off)
		fmt.Fprintf(&key, "%d", off)
		for {
			_, end := at.ZoneBounds()
			if end.IsZero() || !end.Before(sweepTo.Add(72*time.Hour)) {
				break
			}
			if !end.After(at) {
				// Go's ZoneBounds ends the last period of a leap year a
				// day early in zones ruled by a TZ string: the period
				// it names does not hold at. Step through that day.
				end, _ = at.Add(time.Hour).ZoneBounds()
				if !end.After(at) {
					end = at.Add(time.Hour)
				}
			}
			_, next := end.Zone()
			if next != off {
				checkOffset(t, f.Name, next)
				if n := len(changes); n > 0 && end.Sub(changes[n-1]) <= 48*time.Hour {
					t.Errorf("%s changes its offset at %v and again at %v: Bounds assumes changes more than two days apart", f.Name, changes[n-1], end)
				}
				changes = append(changes, end)
				fmt.Fprintf(&key, " %d:%d", end.Unix(), next)
				off = next
			}
			at = end
		}
		g := byKey[key.String()]
		if g == nil {
			g = &zoneGroup{loc: loc, changes: changes}
			byKey[key.String()] = g
			groups = append(groups, g)
		}
		g.names = append(g.names, f.Name)
	}
	if len(groups) == 0 {
		t.Fatalf("%s holds no zones", path)
	}
	for _, g := range groups {
		sort.Strings(g.names)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].names[0] < groups[j].names[0] })
	return groups
}

// checkOffset fails unless off is within a day of UTC, as Bounds assumes.
func checkOffset(t *testing.T, zone string, off int) {
	t.Helper()
	if d := time.Duration(off) * time.Second; d <= -24*time.Hour || d >= 24*time.Hour {
		t.Errorf("%s is %v off UTC: Bounds assumes less than a day", zone, d)
	}
}

// boundsChecker checks Bounds for one group and reports at most one failure
// per calendar, naming the zones of the group.
type boundsChecker struct {
	t      *testing.T
	names  []string
	failed map[quota.Calendar]bool
}

func (ck *boundsChecker) fail(cal quota.Calendar, format string, args ...any) {
	ck.t.Helper()
	if ck.failed == nil {
		ck.failed = map[quota.Calendar]bool{}
	}
	if ck.failed[cal] {
		return
	}
	ck.failed[cal] = true
	also := ""
	if len(ck.names) > 1 {
		also = fmt.Sprintf(" (also %s)", strings.Join(ck.names[1:], ", "))
	}
	ck.t.Errorf("%s%s, %v windows reset %v: %s", ck.names[0], also, cal.Unit, cal.Reset, fmt.Sprintf(format, args...))
}

// at checks the window holding t and reports whether it holds. A window
// that holds t (start <= t < end) is not empty.
func (ck *boundsChecker) at(cal quota.Calendar, t time.Time) (start, end time.Time, ok bool) {
	loc := cal.Location
	s, e := cal.Bounds(t)
	if t.Before(s) || !t.Before(e) {
		ck.fail(cal, "Bounds(%v) = [%v, %v) does not hold it", t.In(loc), s.In(loc), e.In(loc))
		return s, e, false
	}
	if _, pe := cal.Bounds(s.Add(-time.Nanosecond)); !pe.Equal(s) {
		ck.fail(cal, "the window before [%v, %v) ends at %v", s.In(loc), e.In(loc), pe.In(loc))
		return s, e, false
	}
	return s, e, true
}

// walk checks every window from the one holding from to the one holding
// to: each holds its start, and the next starts where it ends.
func (ck *boundsChecker) walk(cal quota.Calendar, from, to time.Time) {
	_, e, ok := ck.at(cal, from)
	for ok && !e.After(to) {
		var s time.Time
		prev := e
		if s, e, ok = ck.at(cal, prev); ok && !s.Equal(prev) {
			ck.fail(cal, "Bounds(%v) starts at %v, not at the end of the window before", prev.In(cal.Location), s.In(cal.Location))
			return
		}
	}
}

// around checks the instants at every offset change and a nanosecond
// either side.
func (ck *boundsChecker) around(cal quota.Calendar, changes []time.Time) {
	for _, c := range changes {
		for _, d := range []time.Duration{-time.Nanosecond, 0, time.Nanosecond} {
			ck.at(cal, c.Add(d))
		}
	}
}
