package throttle

import (
	"context"
	"time"
)

// A RefusalRecorder is told of each request the transport refused: the
// Redis store's *redisstore.RefusalLog is one, which adds this process's
// refusals to the fleet's record that throttle status shows.
type RefusalRecorder interface {
	// NoteRefusal counts one refusal of provider's request by its limit
	// limit ("pause" for a pause), which told it to retry after
	// retryAfter. It is called on the request's goroutine, so it must be
	// fast and safe for concurrent use.
	NoteRefusal(provider, limit string, retryAfter time.Duration)
}

// RefusalObserver returns an Observer that tells r of every Refused
// event, but those of shadow mode, whose requests were sent.
func RefusalObserver(r RefusalRecorder) Observer { return refusalObserver{r} }

type refusalObserver struct{ r RefusalRecorder }

func (o refusalObserver) Observe(_ context.Context, e Event) {
	if e.Kind == Refused && !e.Shadow {
		o.r.NoteRefusal(e.Provider, e.Limit, e.Wait)
	}
}
