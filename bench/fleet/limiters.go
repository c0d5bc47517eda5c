package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// A verdict is one attempt's answer from a hand-written limiter.
type verdict struct {
	ok bool
	// wait is, when ok, how long until the reserved slot.
	wait time.Duration
	// retryAfter is, when !ok, when to try again.
	retryAfter time.Duration
}

// limiter is what a team would otherwise build: one attempt to admit one
// request of biz, waiting at most maxWait for a reserved slot where the
// limiter can reserve.
type limiter interface {
	acquire(ctx context.Context, biz string, maxWait time.Duration) (verdict, error)
}

func key(prefix string, l Limit, biz string) string {
	if l.PerBusiness {
		return prefix + l.Name + ":" + biz
	}
	return prefix + l.Name
}

// fixedWindow counts requests per fixed window with INCR, setting EXPIRE
// on a window's first hit, one limit after the other. A GCRA or a leaky
// bucket of rate r and burst b is counted as b per window of b/r (200/s
// burst 16: 16 per 80 ms), a daily quota per UTC day. A refused request
// stays counted in the limits checked before the one that refused it.
type fixedWindow struct {
	rdb    *redis.Client
	prefix string
	limits []Limit
}

func (f *fixedWindow) acquire(ctx context.Context, biz string, _ time.Duration) (verdict, error) {
	now := time.Now().UnixNano()
	for _, l := range f.limits {
		// A GCRA or bucket of rate r and burst b becomes b per b/r: the
		// burst at the start of each window, the rate on average.
		length, n := time.Duration(l.interval()*l.Burst), l.Burst
		if l.Kind == KindDay {
			length, n = 24*time.Hour, l.Rate
		}
		idx := now / int64(length)
		k := key(f.prefix, l, biz) + ":" + strconv.FormatInt(idx, 10)
		c, err := f.rdb.Incr(ctx, k).Result()
		if err != nil {
			return verdict{}, err
		}
		if c == 1 {
			if err := f.rdb.Expire(ctx, k, length+time.Second).Err(); err != nil {
				return verdict{}, err
			}
		}
		if c > n {
			return verdict{retryAfter: time.Duration((idx+1)*int64(length) - now)}, nil
		}
	}
	return verdict{ok: true}, nil
}

// redisRate checks each limit with go-redis/redis_rate (GCRA in one Lua
// script per limit), one limit after the other: not atomic across the
// stack, and a refusal by a later limit does not give back the earlier
// ones. A daily quota becomes a GCRA of quota per 24h with burst quota.
type redisRate struct {
	lim    *redis_rate.Limiter
	prefix string
	limits []Limit
}

func (r *redisRate) acquire(ctx context.Context, biz string, _ time.Duration) (verdict, error) {
	for _, l := range r.limits {
		var rl redis_rate.Limit
		switch l.Kind {
		case KindGCRA:
			rl = redis_rate.Limit{Rate: int(l.Rate), Period: l.Period, Burst: int(l.Burst)}
		case KindDay:
			rl = redis_rate.Limit{Rate: int(l.Rate), Period: 24 * time.Hour, Burst: int(l.Rate)}
		case KindLeaky:
			rl = redis_rate.Limit{Rate: int(l.Rate), Period: time.Second, Burst: int(l.Burst)}
		}
		res, err := r.lim.Allow(ctx, key(r.prefix, l, biz), rl)
		if err != nil {
			return verdict{}, err
		}
		if res.Allowed == 0 {
			return verdict{retryAfter: max(res.RetryAfter, time.Millisecond)}, nil
		}
	}
	return verdict{ok: true}, nil
}

// lockGCRA is the common hand-written version: take a Redis lock (SET NX
// PX), GET the state of every limit, compute the GCRA and window math in
// the client on the client's clock, SET the new state, DEL the lock. It
// reserves slots like throttle, so it differs from it in the lock's cost,
// not in the math. The lock is released with a plain DEL, as it mostly is.
type lockGCRA struct {
	rdb    *redis.Client
	prefix string
	limits []Limit
	// lockWait bounds how long an attempt spins for the lock.
	lockWait time.Duration
}

var errLockTimeout = errors.New("lock-gcra: lock not acquired in time")

func (g *lockGCRA) acquire(ctx context.Context, biz string, maxWait time.Duration) (verdict, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	lockKey := g.prefix + "lock"
	give := time.Now().Add(g.lockWait)
	for {
		ok, err := g.rdb.SetNX(ctx, lockKey, token, 100*time.Millisecond).Result()
		if err != nil {
			return verdict{}, err
		}
		if ok {
			break
		}
		if time.Now().After(give) {
			return verdict{}, errLockTimeout
		}
		time.Sleep(2*time.Millisecond + time.Duration(b[0])*8*time.Microsecond) // 2-4 ms, jittered
	}
	v, err := g.decide(ctx, biz, maxWait)
	if derr := g.rdb.Del(context.WithoutCancel(ctx), lockKey).Err(); derr != nil && err == nil {
		err = derr
	}
	return v, err
}

func (g *lockGCRA) decide(ctx context.Context, biz string, maxWait time.Duration) (verdict, error) {
	now := time.Now().UnixMicro()
	const dayUS = int64(24 * time.Hour / time.Microsecond)
	state := make([]int64, len(g.limits))
	keys := make([]string, len(g.limits))
	for i, l := range g.limits {
		keys[i] = key(g.prefix, l, biz)
		if l.Kind == KindDay {
			keys[i] += ":" + strconv.FormatInt(now/dayUS, 10)
		}
		v, err := g.rdb.Get(ctx, keys[i]).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return verdict{}, err
		}
		state[i] = v
	}
	interval := func(l Limit) int64 { return l.interval() / 1000 }
	t := now
	for round := 0; round < 8; round++ {
		moved := false
		for i, l := range g.limits {
			e := t
			if l.Kind == KindDay {
				if t/dayUS == now/dayUS && state[i] >= l.Rate {
					e = (now/dayUS + 1) * dayUS
				}
			} else {
				T := interval(l)
				e = max(t, max(state[i], t)+T-l.Burst*T)
			}
			if e > t {
				t, moved = e, true
			}
		}
		if !moved {
			break
		}
	}
	if wait := time.Duration(t-now) * time.Microsecond; wait > maxWait {
		return verdict{retryAfter: wait}, nil
	}
	for i, l := range g.limits {
		var err error
		if l.Kind == KindDay {
			k := keys[i]
			count := state[i] + 1
			if t/dayUS != now/dayUS {
				k, count = key(g.prefix, l, biz)+":"+strconv.FormatInt(t/dayUS, 10), 1
			}
			err = g.rdb.Set(ctx, k, count, 48*time.Hour).Err()
		} else {
			tat := max(state[i], t) + interval(l)
			err = g.rdb.Set(ctx, keys[i], tat, time.Duration(tat-now)*time.Microsecond+time.Second).Err()
		}
		if err != nil {
			return verdict{}, err
		}
	}
	return verdict{ok: true, wait: time.Duration(t-now) * time.Microsecond}, nil
}

// localRate is golang.org/x/time/rate in each process, at rate/N and
// burst/N of every limit; a daily quota is a per-process counter of
// quota/N per UTC day. Nothing is shared: it is only right while every
// process gets the same share of the traffic.
type localRate struct {
	limits []Limit
	n      int

	mu   sync.Mutex
	lims map[string]*rate.Limiter
	days map[string]*[2]int64 // day index, count
}

func newLocalRate(limits []Limit, processes int) *localRate {
	return &localRate{limits: limits, n: processes, lims: map[string]*rate.Limiter{}, days: map[string]*[2]int64{}}
}

func (r *localRate) limiter(l Limit, biz string) *rate.Limiter {
	k := key("", l, biz)
	lim := r.lims[k]
	if lim == nil {
		per := l.Period
		if l.Kind == KindLeaky {
			per = time.Second
		}
		every := float64(l.Rate) / per.Seconds() / float64(r.n)
		lim = rate.NewLimiter(rate.Limit(every), max(1, int(l.Burst)/r.n))
		r.lims[k] = lim
	}
	return lim
}

func (r *localRate) acquire(_ context.Context, biz string, maxWait time.Duration) (verdict, error) {
	now := time.Now()
	day := now.UnixNano() / int64(24*time.Hour)
	r.mu.Lock()
	defer r.mu.Unlock()
	var rs []*rate.Reservation
	cancel := func() {
		for _, x := range rs {
			x.CancelAt(now)
		}
	}
	wait := time.Duration(0)
	var counters []*[2]int64
	for _, l := range r.limits {
		if l.Kind == KindDay {
			c := r.days[key("", l, biz)]
			if c == nil {
				c = &[2]int64{day, 0}
				r.days[key("", l, biz)] = c
			}
			if c[0] != day {
				c[0], c[1] = day, 0
			}
			if c[1]+1 > l.Rate/int64(r.n) {
				cancel()
				return verdict{retryAfter: time.Duration((day+1)*int64(24*time.Hour) - now.UnixNano())}, nil
			}
			counters = append(counters, c)
			continue
		}
		x := r.limiter(l, biz).ReserveN(now, 1)
		if !x.OK() {
			cancel()
			return verdict{}, fmt.Errorf("x/time/rate: limit %s cannot admit one", l.Name)
		}
		rs = append(rs, x)
		wait = max(wait, x.DelayFrom(now))
	}
	if wait > maxWait {
		cancel()
		return verdict{retryAfter: wait}, nil
	}
	for _, c := range counters {
		c[1]++
	}
	return verdict{ok: true, wait: wait}, nil
}
