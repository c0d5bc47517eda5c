package throttle

// PlanCacheLen is how many businesses t's plan cache holds (WithPlans),
// lookups in flight included.
func PlanCacheLen(t *Transport) int {
	if t.plans == nil {
		return 0
	}
	return t.plans.len()
}
