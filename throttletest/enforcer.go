package throttletest

import (
	"math"
	"time"
)

type kind uint8

const (
	unlimited kind = iota
	gcra
	window
	leaky
)

// An Enforcer is the rule a fake vendor enforces on its own, as a real
// vendor does whatever its clients believe. It is a description: each
// Vendor (and each scope of one) keeps its own state. The zero Enforcer
// admits everything.
type Enforcer struct {
	kind   kind
	n      int64         // gcra: rate; window: n per window; leaky: size
	period time.Duration // gcra: period; window: length
	burst  int64         // gcra
	leak   float64       // leaky: per second
}

// GCRA returns the generic cell rate algorithm at rate per period with
// burst: from idle, burst requests at once, then one every period/rate.
// It panics unless rate, period and burst are positive.
func GCRA(rate int, period time.Duration, burst int) Enforcer {
	if rate <= 0 || period <= 0 || burst <= 0 || period/time.Duration(rate) <= 0 {
		panic("throttletest: GCRA needs a positive rate, period and burst, and period/rate of at least 1ns")
	}
	return Enforcer{kind: gcra, n: int64(rate), period: period, burst: int64(burst)}
}

// Window returns a fixed window of n requests per length. Windows start
// at multiples of length since the Unix epoch, so a minute window starts
// on the minute, like a vendor's calendar window. It panics unless n and
// length are positive.
func Window(n int, length time.Duration) Enforcer {
	if n <= 0 || length <= 0 {
		panic("throttletest: Window needs a positive n and length")
	}
	return Enforcer{kind: window, n: int64(n), period: length}
}

// LeakyBucket returns a bucket of size that leaks leakPerSecond
// continuously (Shopify REST: LeakyBucket(40, 2)). Each request adds one;
// it is admitted while the level after it is at most size. It panics
// unless size and leakPerSecond are positive.
func LeakyBucket(size int, leakPerSecond float64) Enforcer {
	if size <= 0 || !(leakPerSecond > 0) || math.IsInf(leakPerSecond, 0) {
		panic("throttletest: LeakyBucket needs a positive size and leak")
	}
	return Enforcer{kind: leaky, n: int64(size), leak: leakPerSecond}
}

// nano is one request in the leaky bucket's fixed-point level.
const nano = int64(time.Second)

// state is one scope's enforcement state.
type state struct {
	tat   time.Time // gcra: theoretical arrival time
	win   int64     // window: index of the current window
	count int64     // window: admitted in it
	level int64     // leaky: in 1e-9 requests
	last  time.Time // leaky: when level was computed
}

// decision is what an enforcer decided about one request.
type decision struct {
	ok         bool
	retryAfter time.Duration // when !ok: until the request would fit
	limit      int64         // 0: no limit to advertise
	remaining  int64
	used       int64
	reset      time.Time // when the limit is back to full capacity
}

// decide decides one request at now and, when it is admitted, charges it.
func (e *Enforcer) decide(s *state, now time.Time) decision {
	switch e.kind {
	case gcra:
		t := e.period / time.Duration(e.n)
		dvt := time.Duration(e.burst) * t
		tat := s.tat
		if tat.Before(now) {
			tat = now
		}
		d := decision{limit: e.burst, reset: tat}
		if earliest := tat.Add(t - dvt); now.Before(earliest) {
			d.retryAfter = earliest.Sub(now)
		} else {
			d.ok = true
			tat = tat.Add(t)
			s.tat = tat
			d.reset = tat
		}
		d.remaining = int64((dvt - tat.Sub(now)) / t)
		d.used = e.burst - d.remaining
		return d
	case window:
		idx := floorDiv(now.UnixNano(), int64(e.period))
		if idx != s.win {
			s.win, s.count = idx, 0
		}
		end := time.Unix(0, (idx+1)*int64(e.period))
		d := decision{limit: e.n, reset: end}
		if s.count+1 > e.n {
			d.retryAfter = end.Sub(now)
		} else {
			d.ok = true
			s.count++
		}
		d.used = s.count
		d.remaining = e.n - s.count
		return d
	case leaky:
		if !s.last.IsZero() && now.After(s.last) {
			drained := float64(now.Sub(s.last)) * e.leak // 1e-9 requests
			if drained >= float64(s.level) {
				s.level = 0
			} else {
				s.level -= int64(drained)
			}
		}
		if s.last.IsZero() || now.After(s.last) {
			s.last = now
		}
		size := e.n * nano
		d := decision{limit: e.n}
		if s.level+nano > size {
			d.retryAfter = time.Duration(math.Ceil(float64(s.level+nano-size) / e.leak))
		} else {
			d.ok = true
			s.level += nano
		}
		d.used = (s.level + nano - 1) / nano
		d.remaining = (size - s.level) / nano
		d.reset = now.Add(time.Duration(math.Ceil(float64(s.level) / e.leak)))
		return d
	}
	return decision{ok: true}
}

// limit is the capacity the enforcer advertises: a GCRA's burst, a
// window's n, a bucket's size; 0 without a limit.
func (e *Enforcer) limit() int64 {
	switch e.kind {
	case gcra:
		return e.burst
	case window, leaky:
		return e.n
	}
	return 0
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
