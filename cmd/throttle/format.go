package main

import (
	"fmt"
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
