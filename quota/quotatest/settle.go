package quotatest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// testSettle steps through what Settle must do: refund the latest
// reservation of a GCRA key, charge an excess as a debt, keep the charge
// of a reservation with later ones placed on it, move a window's count
// either way (past its rate for an excess), and refuse or ignore what it
// cannot settle.
func testSettle(t *testing.T, newStore NewStore) {
	clock := NewClock(start)
	st := newStore(t, clock)
	ctx := context.Background()
	peak := gcra("peak", 10, time.Second, 0) // T = 100ms
	daily := window("daily", 10, quota.Day, 0, la)
	req := quota.Request{Tag: "settle", Items: []quota.Item{{Limit: peak, Key: "peak"}, {Limit: daily, Key: "daily"}}}
	reserve := func(what string, cost int64, ok bool, wait time.Duration, remain ...int64) *quota.Reservation {
		t.Helper()
		r := req
		r.Cost, r.MaxWait = cost, 0
		res, err := st.Reserve(ctx, &r)
		if err != nil {
			t.Fatalf("%s: Reserve: %v", what, err)
		}
		got := res.Wait
		if !res.Allowed {
			got = res.RetryAfter
		}
		if res.Allowed != ok || got != wait || (ok && (res.Limits[0].Remaining != remain[0] || res.Limits[1].Remaining != remain[1])) {
			t.Fatalf("%s: got allowed=%v wait/retry=%v limits %+v, want allowed=%v wait/retry=%v remaining %v",
				what, res.Allowed, got, res.Limits, ok, wait, remain)
		}
		return res
	}
	settle := func(what string, r *quota.Reservation, actual ...int64) {
		t.Helper()
		if err := r.Settle(ctx, actual); err != nil {
			t.Fatalf("%s: Settle: %v", what, err)
		}
	}

	a := reserve("an estimate of 5", 5, true, 0, 5, 5)
	if err := a.Settle(ctx, []int64{1}); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("Settle with one cost for two limits: %v, want ErrInvalid", err)
	}
	settle("it used 2", a, 2, 2)
	settle("a second Settle", a, 0, 0)
	reserve("the refund is back in both", 1, true, 0, 7, 7)

	b := reserve("an estimate of 1", 1, true, 0, 6, 6)
	c := reserve("a later one", 1, true, 0, 5, 5)
	settle("the earlier one used none", b, 0, 0) // the window gets it back; GCRA keeps it
	reserve("after a refund the latest could not take", 1, true, 0, 4, 5)
	settle("the latest used 6 of its 1: a debt", c, 6, -1)
	reserve("the debt delays the next", 1, false, 200*time.Millisecond)
	clock.Advance(200 * time.Millisecond)
	reserve("after the debt", 1, true, 0, 0, 4)

	clock.Advance(2 * time.Second)
	d := reserve("the window's last 4", 4, true, 0, 6, 0)
	settle("it used 9: the window is 5 over", d, -1, 9)
	_, end := daily.Calendar.Bounds(clock.Now())
	reserve("the window's debt lasts until it ends", 1, false, end.Sub(clock.Now()))
}

// testSettleBounded steps through the bounds of Settle (package quota's
// doc, "Settle"): an actual cost above the limit's rate is implausible and
// leaves the estimate charged, in a GCRA limit and in a window; a debt
// never takes a GCRA limit's tat more than DebtReach (a period and the
// tolerance) past now, however many settles pile up.
func testSettleBounded(t *testing.T, newStore NewStore) {
	clock := NewClock(start)
	st := newStore(t, clock)
	ctx := context.Background()
	tpm := gcra("tpm", 20000, time.Minute, 10000) // T = 3ms, DVT = 30s
	daily := window("daily", 1000, quota.Day, 0, la)
	reserve := func(what string, l *quota.Limit, cost int64, maxWait time.Duration, ok bool, wait time.Duration, remain int64) *quota.Reservation {
		t.Helper()
		req := quota.Request{Tag: "bounded", Items: []quota.Item{{Limit: l, Key: l.Name}}, Cost: cost, MaxWait: maxWait}
		res, err := st.Reserve(ctx, &req)
		if err != nil {
			t.Fatalf("%s: Reserve: %v", what, err)
		}
		got := res.Wait
		if !res.Allowed {
			got = res.RetryAfter
		}
		if res.Allowed != ok || got != wait || (ok && res.Limits[0].Remaining != remain) {
			t.Fatalf("%s: got allowed=%v wait/retry=%v limits %+v, want allowed=%v wait/retry=%v remaining %d",
				what, res.Allowed, got, res.Limits, ok, wait, remain)
		}
		return res
	}
	settle := func(what string, r *quota.Reservation, actual int64) {
		t.Helper()
		if err := r.Settle(ctx, []int64{actual}); err != nil {
			t.Fatalf("%s: Settle: %v", what, err)
		}
	}

	a := reserve("an estimate of 100", tpm, 100, 0, true, 0, 9900)
	settle("a response claims 10^9 tokens", a, 1_000_000_000)
	reserve("the implausible figure left the estimate", tpm, 100, 0, true, 0, 9800)
	b := reserve("another 100", tpm, 100, 0, true, 0, 9700)
	settle("it used 20000, the whole rate: a debt", b, 20000) // tat 0.9s + 19900*3ms = 60.6s
	reserve("the debt delays the next", tpm, 1, 0, false, 30603*time.Millisecond, 0)
	c := reserve("a waiter behind the debt", tpm, 1, 2*time.Minute, true, 30603*time.Millisecond, 0)
	settle("it used 20000 too", c, 20000) // tat 60.603s + 59.997s, cut at 60s + 30s
	reserve("piled debts wait at most a period and an interval", tpm, 1, 0, false, time.Minute+3*time.Millisecond, 0)

	w := reserve("a window's estimate of 1", daily, 1, 0, true, 0, 999)
	settle("a response claims 9*10^11", w, 900_000_000_000)
	reserve("the window kept the estimate", daily, 1, 0, true, 0, 998)
}
