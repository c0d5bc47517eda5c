package throttle

// AheadHeld returns how many slots t's pools of quota taken ahead hold,
// and whether a batch is asked for or in flight: a test waits for the
// keepers to settle before it reads what is held.
func AheadHeld(t *Transport) (held int64, busy bool) {
	a := &t.ahead
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, pl := range a.pools {
		pl.mu.Lock()
		for _, b := range pl.batches {
			held += b.held()
		}
		busy = busy || pl.want || pl.calling
		pl.mu.Unlock()
	}
	return held, busy
}

// PlanCacheLen is how many businesses t's plan cache holds (WithPlans),
// lookups in flight included.
func PlanCacheLen(t *Transport) int {
	if t.plans == nil {
		return 0
	}
	return t.plans.len()
}
