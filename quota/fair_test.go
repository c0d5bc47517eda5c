package quota_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/quotatest"
)

func TestLimitValidateFair(t *testing.T) {
	t.Parallel()
	fair := func(l quota.Limit) quota.Limit { l.Fair = true; return l }
	g := quota.Limit{Name: "g", Kind: quota.GCRA, Rate: 100, Period: time.Second}
	most := int64((1<<53 - 1) / quota.MaxWeight)
	tests := []struct {
		lim  quota.Limit
		want string // "" = valid
	}{
		{fair(g), ""},
		{fair(quota.Limit{Name: "b", Kind: quota.GCRA, Rate: most, Period: time.Duration(most) * time.Microsecond}), ""},
		{fair(quota.Limit{Name: "b", Kind: quota.GCRA, Rate: most + 1, Period: time.Duration(most+1) * time.Microsecond}), "must be below 2^53"},
		{fair(quota.Limit{Name: "w", Kind: quota.Window, Rate: 100, Calendar: quota.Calendar{Unit: quota.Day}}), "only a GCRA limit can be shared fairly, not a window limit"},
		{fair(quota.Limit{Name: "c", Kind: quota.Concurrency, Rate: 3, Period: time.Second}), "not a concurrent limit"},
		{fair(quota.Limit{Name: "l", Kind: quota.GCRA, Rate: 100, Period: time.Second, Learn: true}), "a learning limit cannot be shared fairly"},
		{fair(quota.Limit{Name: "r", Kind: quota.GCRA, Rate: 100, Period: time.Second, Reserve: []int64{2000}}), "a fair limit cannot keep class reserves"},
	}
	for _, tt := range tests {
		err := tt.lim.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: unexpected error %v", tt.lim, err)
		case tt.want != "" && (err == nil || !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: got error %v, want one wrapping ErrInvalid containing %q", tt.lim, err, tt.want)
		}
	}
	a, b := fair(g), g
	if a.Equal(&b) {
		t.Error("Equal ignores Fair")
	}
}

func TestRequestValidateShare(t *testing.T) {
	t.Parallel()
	plain := &quota.Limit{Name: "p", Kind: quota.GCRA, Rate: 10, Period: time.Second}
	fair := &quota.Limit{Name: "f", Kind: quota.GCRA, Rate: 10, Period: time.Second, Fair: true}
	for _, tt := range []struct {
		lim   *quota.Limit
		share quota.Share
		ok    bool
	}{
		{fair, quota.Share{}, true},
		{fair, quota.Share{Key: "acme", Weight: quota.MaxWeight}, true},
		{fair, quota.Share{Key: "acme", Weight: quota.MaxWeight + 1}, false},
		{fair, quota.Share{Key: "acme", Weight: -1}, false},
		{plain, quota.Share{Key: "acme", Weight: -1}, true}, // ignored without a fair item
	} {
		req := quota.Request{Tag: "t", Items: []quota.Item{{Limit: tt.lim, Key: "k"}}, Share: tt.share}
		if err := req.Validate(); (err == nil) != tt.ok || (err != nil && !errors.Is(err, quota.ErrInvalid)) {
			t.Errorf("%s with %+v: %v, want ok %v", tt.lim.Name, tt.share, err, tt.ok)
		}
	}
	if w := (quota.Share{}).Weighted(); w != 1 {
		t.Errorf("a zero weight counts as %d, want 1", w)
	}
}

// TestFairPart: parts SafePart keeps stay as they are, "" is "#" (which
// SafePart never makes), and anything else is SafePart'd, so that two
// tenants never share a part.
func TestFairPart(t *testing.T) {
	t.Parallel()
	hashed := quota.SafePart("a b")
	for in, want := range map[string]string{
		"":              "#",
		"acme":          "acme",
		"store-9.x.com": "store-9.x.com",
		hashed:          hashed,
		"a b":           hashed,
		"#":             quota.SafePart("#"),
		"a:b":           quota.SafePart("a:b"),
		"{tag}":         quota.SafePart("{tag}"),
	} {
		if got := quota.FairPart(in); got != want {
			t.Errorf("FairPart(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFairLane: a lone tenant's lane is the whole limit; n tenants of
// equal weight split interval and burst; the interval rounds up; the
// burst is at least one; the interval is capped at MaxExact / B.
func TestFairLane(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		T, B, W, w int64
		Ti, bi     int64
	}{
		{10000, 100, 1, 1, 10000, 100},
		{10000, 100, 7, 7, 10000, 100},
		{10000, 100, 2, 1, 20000, 50},
		{10000, 100, 3, 2, 15000, 66},
		{3333334, 3, 3, 1, 10000002, 1},
		{7, 10, 3, 2, 11, 6}, // ceil(10.5)
		{1 << 40, 1 << 20, 1 << 30, 1, quota.MaxExact >> 20, 1},
	} {
		Ti, bi := quota.FairLane(tt.T, tt.B, tt.W, tt.w)
		if Ti != tt.Ti || bi != tt.bi {
			t.Errorf("FairLane(T %d, B %d, W %d, w %d) = %d, %d; want %d, %d", tt.T, tt.B, tt.W, tt.w, Ti, bi, tt.Ti, tt.bi)
		}
	}
	l := quota.Limit{Period: 300 * time.Millisecond}
	if got := l.FairSpan(); got != quota.FairActive {
		t.Errorf("FairSpan of a 300ms period = %v, want FairActive", got)
	}
	l.Period = time.Minute
	if got := l.FairSpan(); got != time.Minute {
		t.Errorf("FairSpan of a minute = %v, want a minute", got)
	}
}

// TestMemoryDifferentialFair runs the differential test longer than the
// conformance suite does: the random stacks hold Fair limits a third of
// the time, and their deferred requests come back with appointments.
func TestMemoryDifferentialFair(t *testing.T) {
	t.Parallel()
	for seed := int64(100); seed < 112; seed++ {
		quotatest.Differential(t, seed, 2000, newMemory)
	}
}

// FuzzFairTenants: any two tenant values share a Fair limit's state only
// when FairPart maps them to one part (the same value, or a value and
// the hash SafePart made of it); each is one entry in the active set and
// one lane, whose key is bounded however long the value; the active set
// is gone once the tenants have been quiet for FairSpan, and each lane
// once it is idle.
func FuzzFairTenants(f *testing.F) {
	f.Add("acme", "globex", uint16(1), uint16(3))
	f.Add("", "#", uint16(0), uint16(1000))
	f.Add("a b", quota.SafePart("a b"), uint16(2), uint16(2))
	f.Add("{tag}", "tag", uint16(5), uint16(0))
	f.Add(strings.Repeat("x", 65), strings.Repeat("x", 64), uint16(7), uint16(9))
	f.Add("a:b", "a\x00b", uint16(1), uint16(1))
	f.Fuzz(func(t *testing.T, a, b string, wa, wb uint16) {
		clock := quotatest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
		l := &quota.Limit{Name: "shared", Kind: quota.GCRA, Rate: 10, Period: time.Second, Fair: true}
		weight := func(w uint16) int64 { return int64(w) % (quota.MaxWeight + 1) }
		for _, sh := range []quota.Share{{Key: a, Weight: weight(wa)}, {Key: b, Weight: weight(wb)}} {
			req := quota.Request{Tag: "p", Items: []quota.Item{{Limit: l, Key: "shared"}}, Share: sh}
			if res, err := m.Reserve(context.Background(), &req); err != nil || !res.Allowed {
				t.Fatalf("tenant %q: (%+v, %v), want admitted from a full burst", sh.Key, res, err)
			}
		}
		pa, pb := quota.FairPart(a), quota.FairPart(b)
		same := pa == pb
		if same && a != b && !(quota.IsHash(a) && quota.SafePart(b) == a) && !(quota.IsHash(b) && quota.SafePart(a) == b) {
			t.Fatalf("tenants %q and %q collide on part %q", a, b, pa)
		}
		wantMembers, wantW := 2, max(weight(wa), 1)+max(weight(wb), 1)
		if same {
			wantMembers, wantW = 1, max(weight(wb), 1)
		}
		if n, w := m.FairSet("p", "shared"); n != wantMembers || w != wantW {
			t.Fatalf("tenants %q and %q: the active set holds %d with W %d, want %d and %d", a, b, n, w, wantMembers, wantW)
		}
		lanes := 0
		for _, k := range m.Keys("p") {
			if len(k) > len("!fair:shared:")+64 {
				t.Fatalf("key %q is longer than a part SafePart bounds", k)
			}
			if strings.HasPrefix(k, "!fair:shared:") {
				lanes++
			}
		}
		if lanes != wantMembers {
			t.Fatalf("tenants %q and %q: %d lanes, want %d", a, b, lanes, wantMembers)
		}
		clock.Advance(l.FairSpan())
		m.Sweep()
		if n, _ := m.FairSet("p", "shared"); n != 0 {
			t.Fatalf("the active set holds %d tenants after they were quiet for FairSpan", n)
		}
		// A lane lives until its tat: one interval of the lane, at most
		// T*W, past its charge.
		clock.Advance(time.Duration(l.Interval()*wantW) * time.Microsecond)
		m.Sweep()
		if n := m.Len(); n != 0 {
			t.Fatalf("%d keys held after the tenants' lanes went idle: %v", n, m.Keys("p"))
		}
	})
}

// TestMemoryFairManyTenants: 10^5 tenants on one Fair limit (one tag, one
// shard) are one entry each in the active set, W is their weights' sum,
// and once they are all quiet the next decision forgets the set whole
// and the sweep takes every key back.
func TestMemoryFairManyTenants(t *testing.T) {
	t.Parallel()
	const tenants = 100_000
	clock := quotatest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := quota.NewMemoryStore(quota.MemoryOptions{Clock: clock})
	l := &quota.Limit{Name: "shared", Kind: quota.GCRA, Rate: 1_000_000, Period: time.Second, Fair: true}
	reserve := func(tenant string, w int64) {
		t.Helper()
		req := quota.Request{Tag: "p", Items: []quota.Item{{Limit: l, Key: "shared"}}, Share: quota.Share{Key: tenant, Weight: w}}
		if _, err := m.Reserve(context.Background(), &req); err != nil {
			t.Fatal(err)
		}
	}
	var sum int64
	for i := range tenants {
		w := int64(1 + i%7)
		reserve("t-"+strconv.Itoa(i), w)
		sum += w
		clock.Advance(time.Microsecond)
	}
	if n, w := m.FairSet("p", "shared"); n != tenants || w != sum {
		t.Fatalf("the active set holds %d tenants with W %d, want %d and %d", n, w, tenants, sum)
	}
	clock.Advance(l.FairSpan())
	reserve("late", 2)
	if n, w := m.FairSet("p", "shared"); n != 1 || w != 2 {
		t.Fatalf("after every tenant went quiet: the set holds %d with W %d, want the newcomer alone", n, w)
	}
	clock.Advance(l.FairSpan())
	m.Sweep()
	if n := m.Len(); n != 0 {
		t.Fatalf("%d keys held after everyone was quiet for FairSpan", n)
	}
}
