package throttle

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// This file keeps the appointments of fair share (the fair field of a
// provider-wide limit; package quota's doc, "Fair share"). A request that
// its tenant's share of a fair limit cannot admit near now is not refused
// but deferred: the store books it a slot in its tenant's lane, and the
// transport comes back then, asking again as a request at its
// appointment.

// appointments keeps the appointments of q, whose decision rsv was
// deferred: it waits each deferral's RetryAfter on the transport's clock
// (at once when it is zero), unless ctx ends first, and asks again with
// Appointment set and what is left of the request's wait until end, until
// a decision is not deferred. The store defers only within the max wait
// it is given, so the waits end by end; a pause set meanwhile is read by
// the next decision, which then comes after it. A deferral holds nothing,
// so a request that gives up on its appointment gives nothing back (its
// lane's slot delays only its own tenant's later appointments, by that
// slot). It returns the request as last asked and its decision (admitted,
// or refused), or the store's or the context's error; calls counts the
// decisions taken.
func (t *Transport) appointments(ctx context.Context, p *providers.Provider, q *quota.Request, rsv *quota.Reservation, end time.Time, calls *int) (*quota.Request, *quota.Reservation, error) {
	if !q.Appointment {
		r := *q // the resolution's request stays as it was
		r.Appointment = true
		q = &r
	}
	for rsv.Deferred {
		fair := deciderName(q, rsv.Decider)
		t.observe(ctx, Event{Kind: Deferred, Provider: p.Name, Limit: fair, Class: p.ClassName(q.Class),
			Wait: rsv.RetryAfter, Calls: *calls, Items: q.Items, Statuses: rsv.Limits})
		if d := rsv.RetryAfter; d > 0 {
			start := t.clock.Now()
			timer := t.clock.NewTimer(d)
			select {
			case <-timer.C():
			case <-ctx.Done():
				timer.Stop()
				waited := t.clock.Now().Sub(start)
				t.observe(ctx, Event{Kind: Cancelled, Provider: p.Name, Limit: fair, Class: p.ClassName(q.Class), Wait: waited})
				return nil, nil, fmt.Errorf("throttle: %s: waiting %v for its appointment (%v) in limit %q: %w", p.Name, waited, d, fair, ctx.Err())
			}
		}
		q.MaxWait = max(end.Sub(t.clock.Now()), 0)
		*calls++
		var err error
		if rsv, err = t.failover.reserve(ctx, p, q); err != nil {
			return nil, nil, err
		}
	}
	return q, rsv, nil
}
