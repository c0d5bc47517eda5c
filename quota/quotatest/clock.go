package quotatest

import (
	"sync"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// Clock is a quota.Clock that moves only when told to. Timers fire when
// Advance or Set moves the clock past their time. It is safe for
// concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*timer
}

var _ quota.Clock = (*Clock)(nil)

// NewClock returns a Clock that reads start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and fires the timers that are due.
func (c *Clock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t (never backwards) and fires the timers that are
// due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	now := c.now
	var due []*timer
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if !tm.at.After(now) {
			due = append(due, tm)
		} else {
			kept = append(kept, tm)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	for _, tm := range due {
		tm.ch <- now
	}
}

// Timers returns how many timers are waiting to fire: a test can wait for a
// goroutine to start waiting before it moves the clock.
func (c *Clock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// NewTimer returns a timer that fires when the clock reaches now + d.
func (c *Clock) NewTimer(d time.Duration) quota.Timer {
	c.mu.Lock()
	tm := &timer{clock: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	fire := d <= 0
	if !fire {
		c.timers = append(c.timers, tm)
	}
	now := c.now
	c.mu.Unlock()
	if fire {
		tm.ch <- now
	}
	return tm
}

type timer struct {
	clock *Clock
	at    time.Time
	ch    chan time.Time
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, tm := range c.timers {
		if tm == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}
