package providers

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// maxCount bounds rates, bursts, quotas and costs: far above any vendor's
// limit, and small enough that no product of them overflows.
const maxCount = 1_000_000_000_000

const shortFormHelp = `want "N/unit" with unit ms, s, min, h (a GCRA limit, also "N/10s"), ` +
	`optionally "burst N", or "N/day", "N/month" or "N/hour resets HH:MM [Time/Zone]" (a calendar window), ` +
	`or "N/<duration> rolling" (at most N in any trailing duration), ` +
	`or "N concurrent [lease DURATION]" (requests in flight), ` +
	`e.g. "100/s", "5000/h", "2/s burst 40", "250000/day resets 00:00 America/Los_Angeles", "15000/24h rolling", "100 concurrent"`

// DefaultLease is the lease TTL of a concurrency limit ("N concurrent")
// that names none: how long the leases of a process that died stay held.
// A live process renews its leases at half of it, so a longer TTL costs
// fewer renewals of long responses and a slower recovery after a crash.
const DefaultLease = time.Minute

// parseConcurrent parses "N concurrent [lease DURATION]", toks split.
func parseConcurrent(toks []string) (shortForm, string) {
	f := shortForm{kind: quota.Concurrency, period: DefaultLease}
	n, ok := parseCount(toks[0])
	if !ok {
		return f, fmt.Sprintf("%s is not a count from 0 to %d: %s", quote(toks[0]), int64(maxCount), shortFormHelp)
	}
	f.rate = n
	switch rest := toks[2:]; {
	case len(rest) == 0:
	case len(rest) == 2 && rest[0] == "lease":
		d, err := time.ParseDuration(rest[1])
		if err != nil || d < time.Second || d > 24*time.Hour {
			return f, fmt.Sprintf("lease %s is not a duration from 1s to 24h, e.g. 30s or 2m", quote(rest[1]))
		}
		f.period = d
	default:
		return f, fmt.Sprintf("unexpected %s after \"concurrent\": want nothing or \"lease DURATION\", e.g. \"100 concurrent lease 2m\"", quote(strings.Join(rest, " ")))
	}
	return f, ""
}

// shortForm is a parsed "limit:" value.
type shortForm struct {
	kind     quota.Kind
	rate     int64
	period   time.Duration
	burst    int64
	unit     quota.Unit
	reset    time.Duration
	hasReset bool
	tz       string
	rolling  bool
}

// gcraUnits are the period words of a GCRA short form.
var gcraUnits = map[string]time.Duration{
	"ms": time.Millisecond, "millisecond": time.Millisecond,
	"s": time.Second, "sec": time.Second, "second": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hour": time.Hour,
}

// parseCount parses a positive count of at most maxCount; "_" may separate
// digits ("250_000").
func parseCount(s string) (int64, bool) {
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return 0, false
	}
	s = strings.ReplaceAll(s, "_", "")
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > maxCount {
		return 0, false
	}
	return n, true
}

// parseShort reads a limit's short form ("100/min burst 10", "10000/day
// resets 00:00 America/Los_Angeles", "3 concurrent"). It returns a
// problem, or "".
func parseShort(s string) (shortForm, string) {
	var f shortForm
	toks := strings.Fields(s)
	if len(toks) == 0 {
		return f, "empty limit: " + shortFormHelp
	}
	if len(toks) > 1 && toks[1] == "concurrent" {
		return parseConcurrent(toks)
	}
	num, unit, ok := strings.Cut(toks[0], "/")
	if !ok {
		return f, fmt.Sprintf("%s has no \"/\": %s", quote(toks[0]), shortFormHelp)
	}
	n, ok := parseCount(num)
	if !ok {
		return f, fmt.Sprintf("%s is not a count from 0 to %d: %s", quote(num), int64(maxCount), shortFormHelp)
	}
	f.rate = n
	if msg := f.modifiers(toks[1:]); msg != "" {
		return f, msg
	}
	if msg := f.unitOf(unit); msg != "" {
		return f, msg
	}
	if f.rolling {
		if msg := f.toRolling(unit); msg != "" {
			return f, msg
		}
	}
	if f.kind == quota.Window && f.burst != 0 {
		return f, "a calendar window has no burst: its quota is available at once"
	}
	if f.kind == quota.GCRA && f.hasReset {
		return f, fmt.Sprintf("only hour, day and month windows reset; %s is a GCRA period", quote(unit))
	}
	return f, ""
}

// modifiers reads what follows "N/unit" into f: "burst N", "resets HH:MM
// [zone]", "rolling", in any order. It returns a problem, or "".
func (f *shortForm) modifiers(toks []string) string {
	for i := 0; i < len(toks); i++ {
		switch toks[i] {
		case "rolling":
			if f.rolling {
				return "\"rolling\" is given twice: " + shortFormHelp
			}
			f.rolling = true
		case "burst":
			if i+1 >= len(toks) || f.burst != 0 {
				return "\"burst\" needs one count after it: " + shortFormHelp
			}
			b, ok := parseCount(toks[i+1])
			if !ok || b == 0 {
				return fmt.Sprintf("burst %s is not a count from 1 to %d", quote(toks[i+1]), int64(maxCount))
			}
			f.burst = b
			i++
		case "resets":
			if i+1 >= len(toks) || f.hasReset {
				return "\"resets\" needs a time HH:MM after it: " + shortFormHelp
			}
			reset, ok := parseClock(toks[i+1])
			if !ok {
				return fmt.Sprintf("reset time %s is not HH:MM (00:00 to 23:59)", quote(toks[i+1]))
			}
			f.hasReset, f.reset = true, reset
			i++
			if i+1 < len(toks) && toks[i+1] != "burst" && toks[i+1] != "resets" && toks[i+1] != "rolling" {
				f.tz = toks[i+1]
				i++
			}
		default:
			return fmt.Sprintf("unexpected %s: %s", quote(toks[i]), shortFormHelp)
		}
	}
	return ""
}

// unitOf reads the unit of "N/unit" into f: a calendar window (day,
// month, an hour that resets) or a GCRA period ("s", "10min", "1m30s").
// It returns a problem, or "".
func (f *shortForm) unitOf(unit string) string {
	switch unit {
	case "d", "day":
		f.kind, f.unit = quota.Window, quota.Day
	case "month", "mo":
		f.kind, f.unit = quota.Window, quota.Month
	case "h", "hr", "hour":
		if f.hasReset {
			f.kind, f.unit = quota.Window, quota.Hour
		} else {
			f.kind, f.period = quota.GCRA, time.Hour
		}
	default:
		f.kind = quota.GCRA
		// "10s", "10min", "1m30s".
		j := 0
		for j < len(unit) && unit[j] >= '0' && unit[j] <= '9' {
			j++
		}
		mult := int64(1)
		if j > 0 {
			m, err := strconv.ParseInt(unit[:j], 10, 64)
			if err != nil || m < 1 || m > 1_000_000 {
				return fmt.Sprintf("period %s is out of range: %s", quote(unit), shortFormHelp)
			}
			mult = m
		}
		if d, ok := gcraUnits[unit[j:]]; ok {
			f.period = time.Duration(mult) * d
		} else if d, err := time.ParseDuration(unit); err == nil && d > 0 {
			f.period = d
		} else {
			return fmt.Sprintf("unknown period %s: %s", quote(unit), shortFormHelp)
		}
	}
	return ""
}

// toRolling makes a parsed "N/unit" a rolling window over the unit's
// length: a day is 24 hours, an hour one hour.
func (f *shortForm) toRolling(unit string) string {
	switch {
	case f.hasReset:
		return "a rolling window never resets: it counts any trailing period; leave out \"resets\""
	case f.burst != 0:
		return "a rolling window has no burst: its whole quota is available at once"
	case f.kind == quota.Window && f.unit == quota.Month:
		return "a month has no fixed length: write a rolling window's period as a duration, e.g. \"N/720h rolling\""
	case f.kind == quota.Window: // a day
		f.period = 24 * time.Hour
	}
	f.kind = quota.Rolling
	return ""
}

// parseClock parses "HH:MM" into an offset from midnight.
func parseClock(s string) (time.Duration, bool) {
	h, m, ok := strings.Cut(s, ":")
	if !ok || len(h) != 2 || len(m) != 2 {
		return 0, false
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 || h[0] == '+' || m[0] == '+' || h[0] == '-' || m[0] == '-' {
		return 0, false
	}
	return time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute, true
}

// parseShare parses "95%", "95.5%" or "0.95" into basis points (1 to
// 10000).
func parseShare(s string) (int64, bool) {
	pct := strings.HasSuffix(s, "%")
	s = strings.TrimSpace(strings.TrimSuffix(s, "%"))
	if s == "" || strings.ContainsAny(s, "eEinxXpP_") {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != f {
		return 0, false
	}
	scale := 10000.0
	if pct {
		scale = 100
	}
	bp := f * scale
	if bp < 1 || bp > 10000 {
		return 0, false
	}
	return int64(bp + 0.5), true
}
