package quota_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

// A stack of a per-second peak and a daily quota, decided at once: the
// third request waits for the peak limit, and nothing is charged to the
// daily quota by a request that is refused.
func ExampleMemoryStore_Reserve() {
	clock := quotatest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	store := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
	la, _ := time.LoadLocation("America/Los_Angeles")
	peak := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 2, Period: time.Second}
	daily := &quota.Limit{Name: "daily", Kind: quota.Window, Rate: 1000,
		Calendar: quota.Calendar{Unit: quota.Day, Location: la}}
	req := quota.Request{
		Tag:   "vendor",
		Items: []quota.Item{{Limit: peak, Key: "peak"}, {Limit: daily, Key: "daily"}},
	}
	for i := 0; i < 3; i++ {
		r, err := store.Reserve(context.Background(), &req)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("allowed=%v retry=%v daily remaining=%d\n", r.Allowed, r.RetryAfter, r.Limits[1].Remaining)
	}
	req.MaxWait = time.Second
	r, _ := store.Reserve(context.Background(), &req)
	fmt.Printf("with max wait 1s: allowed=%v wait=%v decided by %s\n", r.Allowed, r.Wait, req.Items[r.Decider].Limit.Name)
	// Output:
	// allowed=true retry=0s daily remaining=999
	// allowed=true retry=0s daily remaining=998
	// allowed=false retry=500ms daily remaining=998
	// with max wait 1s: allowed=true wait=500ms decided by peak
}
