package quota_test

import (
	"errors"
	"math/big"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle/quota"
)

// TestPortionExact: Portion is floor(of*bp/10000) for every of up to
// MaxInt64, with no overflow.
func TestPortionExact(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(bp, of int64) {
		want := new(big.Int).Mul(big.NewInt(of), big.NewInt(bp))
		want.Quo(want, big.NewInt(quota.BasisPoints))
		if got := quota.Portion(bp, of); got != want.Int64() {
			t.Fatalf("Portion(%d, %d) = %d, want %v", bp, of, got, want)
		}
	}
	for _, of := range []int64{0, 1, 9999, 10000, 10001, quota.MaxExact, 1<<63 - 1} {
		for _, bp := range []int64{0, 1, 2500, 9999, 10000} {
			check(bp, of)
		}
	}
	for range 10000 {
		check(rng.Int64N(quota.BasisPoints+1), rng.Int64())
	}
}

func TestClassesAndHolds(t *testing.T) {
	t.Parallel()
	plain := &quota.Limit{Name: "p", Kind: quota.Window, Rate: 100, Calendar: quota.Calendar{Unit: quota.Day}}
	if plain.Classes() != 0 || plain.Lanes() != nil {
		t.Errorf("a limit without Reserve: Classes %d, Lanes %v; want 0, nil", plain.Classes(), plain.Lanes())
	}
	held := *plain
	held.Reserve = []int64{2000, 1550}
	if got := held.Classes(); got != 3 {
		t.Errorf("Classes() = %d, want 3", got)
	}
	if a, b := held.Hold(0), held.Hold(1); a != 20 || b != 15 {
		t.Errorf("Hold = %d, %d, want 20, 15 (rounded down)", a, b)
	}
	if held.Lanes() != nil {
		t.Errorf("a window has no lanes: %v", held.Lanes())
	}
	if got := held.ActiveSpan(); got != quota.DefaultActiveFor {
		t.Errorf("ActiveSpan() = %v, want the default", got)
	}
	held.ActiveFor = 5 * time.Second
	if got := held.ActiveSpan(); got != 5*time.Second {
		t.Errorf("ActiveSpan() = %v, want 5s", got)
	}
	none := *plain
	none.Reserve = []int64{}
	if got := none.Classes(); got != 1 {
		t.Errorf("an empty, non-nil Reserve: Classes() = %d, want 1", got)
	}
}

// TestLanes: the lanes split rate and burst by Portion, the bottom lane
// takes the rest, and together they never run faster than the limit:
// every lane's interval is rounded up, so the sum of their rates per
// period is at most the limit's Rate.
func TestLanes(t *testing.T) {
	t.Parallel()
	l := &quota.Limit{Name: "peak", Kind: quota.GCRA, Rate: 10, Period: time.Second, Burst: 20, Reserve: []int64{2000, 3500}}
	lanes := l.Lanes()
	want := []struct{ rate, burst int64 }{{2, 4}, {3, 7}, {5, 9}}
	if len(lanes) != len(want) {
		t.Fatalf("%d lanes, want %d", len(lanes), len(want))
	}
	for k, w := range want {
		ln := lanes[k]
		if ln.Rate != w.rate || ln.Burst != w.burst || ln.Name != "peak" || ln.Period != time.Second || ln.Kind != quota.GCRA || ln.Reserve != nil {
			t.Errorf("lane %d = %+v, want rate %d burst %d", k, ln, w.rate, w.burst)
		}
		if err := ln.Validate(); err != nil {
			t.Errorf("lane %d: %v", k, err)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		l := &quota.Limit{Name: "r", Kind: quota.GCRA, Rate: 1 + rng.Int64N(5000), Period: time.Duration(1+rng.Int64N(3600)) * time.Second}
		l.Burst = 1 + rng.Int64N(2*l.Rate)
		left := int64(quota.BasisPoints - 1)
		for k := rng.IntN(4); k >= 0 && left > 0; k-- {
			bp := 1 + rng.Int64N(left)
			left -= bp
			l.Reserve = append(l.Reserve, bp)
		}
		if l.Validate() != nil {
			continue // a lane below one event
		}
		var rate, burst int64
		var perSecond float64
		for _, ln := range l.Lanes() {
			rate += ln.Rate
			burst += ln.Burst
			perSecond += 1 / float64(ln.Interval())
		}
		if rate != l.Rate || burst != l.Burst {
			t.Fatalf("%+v: lanes sum to rate %d burst %d", l, rate, burst)
		}
		if exact := float64(l.Rate) / float64(l.Period.Microseconds()); perSecond > exact*(1+1e-12) {
			t.Fatalf("%+v: lanes admit %g per µs, above the limit's %g", l, perSecond, exact)
		}
	}
}

func TestLimitValidateClasses(t *testing.T) {
	t.Parallel()
	gcra := func(rate, burst int64, reserve ...int64) quota.Limit {
		return quota.Limit{Name: "g", Kind: quota.GCRA, Rate: rate, Period: time.Second, Burst: burst, Reserve: reserve}
	}
	day := quota.Calendar{Unit: quota.Day}
	tests := []struct {
		lim  quota.Limit
		want string // "" = valid
	}{
		{gcra(100, 0, 2000, 3000), ""},
		{gcra(100, 0, 0), "class 0's reserve of 0 basis points of rate 100 is below one event per 1s: raise it to at least 100 basis points"},
		{gcra(5, 0, 1000), "class 0's reserve of 1000 basis points of rate 5 is below one event per 1s: raise it to at least 2000"},
		{gcra(100, 4, 2000), "class 0's reserve of 2000 basis points of burst 4 is below one event: raise it to at least 2500 basis points, or raise the burst"},
		{gcra(100, 0, 5000, 5000), "the reserves sum to 10000 basis points"},
		{gcra(100, 0, -1), "class 0's reserve of -1 basis points must be from 0 to 9999"},
		{gcra(100, 0, 10000), "class 0's reserve of 10000"},
		{gcra(100, 0, make([]int64, 16)...), "17 classes: at most 16"},
		{quota.Limit{Name: "l", Kind: quota.GCRA, Rate: 100, Period: time.Second, Learn: true, Reserve: []int64{2000}},
			"a learning limit cannot keep class reserves; set its reserve to 0"},
		{quota.Limit{Name: "w", Kind: quota.Window, Rate: 100, Calendar: day, Reserve: []int64{0, 0}}, ""},
		{quota.Limit{Name: "w", Kind: quota.Window, Rate: 100, Calendar: day, Reserve: []int64{9000, 1000}}, "sum to 10000"},
		{quota.Limit{Name: "c", Kind: quota.Concurrency, Rate: 3, Period: time.Second, Reserve: []int64{3400}}, ""},
		{quota.Limit{Name: "r", Kind: quota.Rolling, Rate: 3, Period: time.Second, Reserve: []int64{3400}, ActiveFor: time.Second}, ""},
		{quota.Limit{Name: "a", Kind: quota.Window, Rate: 100, Calendar: day, Reserve: []int64{10}, ActiveFor: -time.Second}, "active for -1s"},
		{quota.Limit{Name: "p", Kind: quota.Window, Rate: 100, Calendar: day, Pace: true}, ""},
		{quota.Limit{Name: "p", Kind: quota.Window, Rate: 100, Calendar: day, Pace: true, PaceReserve: 1000, Reserve: []int64{0}}, ""},
		{quota.Limit{Name: "p", Kind: quota.GCRA, Rate: 100, Period: time.Second, Pace: true}, "only a calendar window can be paced, not a gcra limit"},
		{quota.Limit{Name: "p", Kind: quota.Rolling, Rate: 100, Period: time.Hour, Pace: true}, "not a rolling limit"},
		{quota.Limit{Name: "p", Kind: quota.Window, Rate: 100, Calendar: day, PaceReserve: 1000, Reserve: []int64{0}}, "a pace reserve needs pace"},
		{quota.Limit{Name: "p", Kind: quota.Window, Rate: 100, Calendar: day, Pace: true, PaceReserve: 1000}, "a pace reserve is kept for class 0, so it needs classes"},
		{quota.Limit{Name: "p", Kind: quota.Window, Rate: 100, Calendar: day, Pace: true, PaceReserve: 10000, Reserve: []int64{0}}, "pace reserve of 10000 basis points"},
		{quota.Limit{Name: "p", Kind: quota.Window, Rate: 100, Calendar: day, Pace: true, PaceReserve: -1, Reserve: []int64{0}}, "pace reserve of -1"},
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
}

func TestRequestValidateClass(t *testing.T) {
	t.Parallel()
	// Lanes: burst 2, 3 and 5.
	classed := &quota.Limit{Name: "g", Kind: quota.GCRA, Rate: 10, Period: time.Second, Reserve: []int64{2000, 3000}}
	held := &quota.Limit{Name: "w", Kind: quota.Window, Rate: 10, Calendar: quota.Calendar{Unit: quota.Day}, Reserve: []int64{2000}}
	plain := &quota.Limit{Name: "p", Kind: quota.GCRA, Rate: 10, Period: time.Second}
	req := func(class int, cost int64, lims ...*quota.Limit) quota.Request {
		r := quota.Request{Tag: "t", Class: class, Cost: cost}
		for _, l := range lims {
			r.Items = append(r.Items, quota.Item{Limit: l, Key: l.Name})
		}
		return r
	}
	for _, tt := range []struct {
		name string
		req  quota.Request
		want string
	}{
		{"a class on plain limits is ignored", req(7, 1, plain), ""},
		{"negative class", req(-1, 1, plain), "class -1 is negative"},
		{"the bottom class", req(2, 1, classed), ""},
		{"beyond the classes", req(3, 1, classed), `limit "g": class 3, but it has 3 classes (0 to 2)`},
		{"beyond a window's classes", req(2, 1, classed, held), `limit "w": class 2, but it has 2 classes (0 to 1)`},
		{"a cost that fits the bottom lane", req(0, 5, classed), ""},
		{"a cost that fits no lane", req(0, 6, classed), "cost 6 exceeds the burst of every lane class 0 may use (at most 5)"},
		{"class 2 fits its own lane", req(2, 5, classed), ""},
	} {
		err := tt.req.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tt.name, err)
		case tt.want != "" && (err == nil || !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got error %v, want one wrapping ErrInvalid containing %q", tt.name, err, tt.want)
		}
	}
	// Lanes 1, 4: a request of class 0 and cost 3 fits only the bottom
	// lane; of class 1 too.
	skew := &quota.Limit{Name: "s", Kind: quota.GCRA, Rate: 10, Period: time.Second, Burst: 5, Reserve: []int64{2000}}
	if err := (&quota.Request{Tag: "t", Cost: 4, Items: []quota.Item{{Limit: skew, Key: "s"}}}).Validate(); err != nil {
		t.Errorf("cost 4 on lanes of burst 1 and 4: %v", err)
	}
}

// TestLimitEqual: Equal tells apart limits that differ in any one field,
// and Clone copies Reserve.
func TestLimitEqual(t *testing.T) {
	t.Parallel()
	base := quota.Limit{Name: "a", Kind: quota.Window, Rate: 10, Period: time.Second, Burst: 2,
		Calendar: quota.Calendar{Unit: quota.Day}, Ceiling: 3, Reserve: []int64{1, 2}, ActiveFor: time.Second, PaceReserve: 1}
	if c := base.Clone(); !base.Equal(&c) {
		t.Fatalf("a clone is not equal")
	}
	v := reflect.ValueOf(&base).Elem()
	for i := 0; i < v.NumField(); i++ {
		c := base.Clone()
		f := reflect.ValueOf(&c).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("b")
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Int64, reflect.Uint8:
			if f.Kind() == reflect.Uint8 {
				f.SetUint(f.Uint() + 1)
			} else {
				f.SetInt(f.Int() + 1)
			}
		case reflect.Slice:
			f.Index(0).SetInt(9)
		case reflect.Struct:
			f.Field(0).SetUint(f.Field(0).Uint() + 1)
		default:
			t.Fatalf("field %s: kind %v not covered by the test", v.Type().Field(i).Name, f.Kind())
		}
		if base.Equal(&c) {
			t.Errorf("limits differing in %s are Equal", v.Type().Field(i).Name)
		}
	}
	nilRes, empty := base.Clone(), base.Clone()
	nilRes.Reserve, empty.Reserve = nil, []int64{}
	if nilRes.Equal(&empty) {
		t.Errorf("a nil Reserve (no classes) equals an empty one (one class)")
	}
}

func TestPaceLead(t *testing.T) {
	t.Parallel()
	if got := quota.PaceLead((23 * time.Hour).Microseconds()); got != 828_000_000 {
		t.Errorf("PaceLead(23h) = %d, want 828s", got)
	}
}
