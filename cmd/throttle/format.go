package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// spec formats a limit in the configuration's short form, with headroom
// applied (the numbers the store enforces).
func spec(l *quota.Limit) string {
	if l.Kind == quota.Concurrency {
		return fmt.Sprintf("%d concurrent lease %v", l.Rate, l.Period)
	}
	if l.Kind == quota.Rolling {
		return fmt.Sprintf("%d/%s rolling", l.Rate, periodString(l.Period))
	}
	if l.Kind == quota.GCRA {
		s := fmt.Sprintf("%d/%s", l.Rate, periodString(l.Period))
		if l.Capacity() != l.Rate {
			s += fmt.Sprintf(" burst %d", l.Capacity())
		}
		return s
	}
	c := l.Calendar
	s := fmt.Sprintf("%d/%s", l.Rate, c.Unit)
	zone := ""
	if c.Location != nil && c.Location != time.UTC && c.Location.String() != "UTC" {
		zone = " " + c.Location.String()
	}
	if c.Unit == quota.Hour || c.Reset != 0 || zone != "" {
		h := c.Reset / time.Hour
		m := (c.Reset - h*time.Hour) / time.Minute
		s += fmt.Sprintf(" resets %02d:%02d%s", h, m, zone)
	}
	return s
}

// periodString writes a GCRA or rolling period as the short form's unit: ms, s, min,
// h, or a duration such as 10s or 24h.
func periodString(d time.Duration) string {
	switch d {
	case time.Millisecond:
		return "ms"
	case time.Second:
		return "s"
	case time.Minute:
		return "min"
	case time.Hour:
		return "h"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// readable writes a limit in the units vendors publish limits in: 100/s,
// 5,000/h, 250,000/day, "burst 50" when the burst is not the rate, "1,000/day
// rolling", "3 concurrent". Unlike spec it leaves out what the table
// shows elsewhere or nobody compares with a vendor's page: a window's
// reset time and zone, a lease's TTL.
func readable(l *quota.Limit) string {
	switch l.Kind {
	case quota.Concurrency:
		return count(l.Rate) + " concurrent"
	case quota.Window:
		return count(l.Rate) + "/" + unitWords[l.Calendar.Unit]
	case quota.Rolling:
		return perPeriod(l.Rate, l.Period) + " rolling"
	}
	s := perPeriod(l.Rate, l.Period)
	if l.Capacity() != l.Rate {
		s += " burst " + count(l.Capacity())
	}
	return s
}

// unitWords names a calendar window's unit as readable writes it.
var unitWords = map[quota.Unit]string{quota.Hour: "h", quota.Day: "day", quota.Month: "month"}

// rateUnits are the units readable writes rates in, longest first.
var rateUnits = []struct {
	d    time.Duration
	name string
}{
	{24 * time.Hour, "day"}, {time.Hour, "h"}, {time.Minute, "min"}, {time.Second, "s"}, {time.Millisecond, "ms"},
}

// perPeriod writes n per period: per a unit ("100/s"), per a whole number
// of the longest unit that divides it ("100/10s", "5,000/2h"), or, for a
// period headroom stretched to keep a whole count (810/min at 95% is 810
// per 1m3.157895s), as the rate per the whole units of the longest unit
// the period holds, to a tenth ("769.5/min"; 3,750/10s at 95%,
// "3,562.5/10s").
func perPeriod(n int64, period time.Duration) string {
	for _, u := range rateUnits {
		if period == u.d {
			return count(n) + "/" + u.name
		}
	}
	units := rateUnits[:4] // not "/1250ms": a stretched period may be whole milliseconds
	for _, u := range units {
		if period > u.d && period%u.d == 0 {
			return count(n) + "/" + strconv.FormatInt(int64(period/u.d), 10) + u.name
		}
	}
	for _, u := range units {
		if k := period / u.d; k > 0 {
			per := u.name
			if k > 1 {
				per = strconv.FormatInt(int64(k), 10) + u.name
			}
			return tenths(float64(n)*float64(k*u.d)/float64(period)) + "/" + per
		}
	}
	return tenths(float64(n)*float64(time.Second)/float64(period)) + "/s"
}

// count writes n with a comma every three digits: 250,000.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// tenths writes x rounded to a tenth, with commas, without a ".0".
func tenths(x float64) string {
	t := int64(math.Round(x * 10))
	s := count(t / 10)
	if f := t % 10; f != 0 {
		s += "." + strconv.FormatInt(f, 10)
	}
	return s
}

// humanDuration writes d rounded to what a person reads at a glance: a
// tenth of a second below 10s, then whole seconds, minutes and seconds,
// hours and minutes, days and hours ("2.5s", "41s", "4m05s", "14h54m",
// "3d04h").
func humanDuration(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return tenths(d.Seconds()) + "s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int64(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	d = d.Round(time.Hour)
	return fmt.Sprintf("%dd%02dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
}
