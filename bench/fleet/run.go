package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/throttletest"
)

// Options configures a harness run.
type Options struct {
	// Duration is the length of one scenario run (some scenarios run a
	// little longer); zero means 4s.
	Duration time.Duration
	// Processes and Goroutines: N worker processes of M goroutines each.
	// Zero means 4 and 64.
	Processes, Goroutines int
	// Scenarios and Algorithms restrict the run to these names; empty
	// means all.
	Scenarios, Algorithms []string
	// Exe is the binary that runs a worker when WorkerEnv is set; empty
	// means this process's own executable.
	Exe string
	// Log, when set, is told what runs.
	Log io.Writer
}

// A RunResult is one scenario run with one algorithm, as measured.
type RunResult struct {
	Scenario  Scenario               `json:"scenario"`
	Limits    []Limit                `json:"limits"` // configured
	Algo      string                 `json:"algo"`
	Start     int64                  `json:"start"` // ns since the epoch
	End       int64                  `json:"end"`
	Arrivals  []throttletest.Arrival `json:"-"`
	Intents   []Intent               `json:"-"`
	Phantoms  []throttletest.Other   `json:"-"`
	Latencies []int64                `json:"-"`
	Accuracy  []int64                `json:"-"`
	Outcomes  map[string]int64       `json:"outcomes"`
	Errors    []string               `json:"errors,omitempty"`
	ClientCPU time.Duration          `json:"client_cpu"`
	RedisCPU  time.Duration          `json:"redis_cpu"`
	CmdsSent  int64                  `json:"cmds_sent"`
	CmdsRan   int64                  `json:"cmds_ran"`
	Events    []string               `json:"events,omitempty"`
	// OtherRefused is how many of the phantoms the vendor refused.
	OtherRefused int64 `json:"other_refused,omitempty"`
	// DecisionScripts and AfterScripts are throttle's script calls made
	// by decisions and after them (workerResult).
	DecisionScripts int64 `json:"decision_scripts,omitempty"`
	AfterScripts    int64 `json:"after_scripts,omitempty"`
	// Decisions is throttle's decisions that could reach Redis
	// (workerResult).
	Decisions int64 `json:"decisions,omitempty"`
	// Added and AddedSent are throttle's added latency per request
	// (workerResult.Added), and whether each was sent; Commands the
	// Redis commands its workers sent after their warm-up.
	Added     []int64 `json:"-"`
	AddedSent []bool  `json:"-"`
	Commands  int64   `json:"commands,omitempty"`
	// Records is what happened to each request of a scenario with flows
	// (workerResult).
	Records []Record `json:"-"`
	// Virtual is what a compressed scenario's clock read at Start.
	Virtual time.Time `json:"virtual,omitzero"`
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

func selected(list []string, name string) bool {
	if len(list) == 0 {
		return true
	}
	for _, s := range list {
		if s == name {
			return true
		}
	}
	return false
}

// Run runs every selected scenario with every selected algorithm against
// one redis-server it starts (and stops) itself. It stops early, killing
// its workers and Redis, when ctx ends.
func Run(ctx context.Context, opts Options) ([]*RunResult, error) {
	if opts.Processes <= 0 {
		opts.Processes = 4
	}
	if opts.Goroutines <= 0 {
		opts.Goroutines = 64
	}
	if opts.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		opts.Exe = exe
	}
	dir, err := os.MkdirTemp("", "fleetbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	var out []*RunResult
	for _, sc := range Scenarios(opts.Duration) {
		if !selected(opts.Scenarios, sc.Name) && (sc.Group == "" || !selected(opts.Scenarios, sc.Group)) {
			continue
		}
		for _, algo := range Algorithms {
			if !selected(opts.Algorithms, algo) || !sc.runs(algo) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return out, err
			}
			opts.logf("== %s / %s (%v)", sc.Name, algo, sc.Duration)
			r, err := runOne(ctx, &opts, srv, dir, sc, algo)
			if err != nil {
				return out, fmt.Errorf("%s / %s: %w", sc.Name, algo, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// startDelay is how long before the run's start the workers are started:
// time for them to exec, read their spec and connect.
const startDelay = 1500 * time.Millisecond

func runOne(ctx context.Context, opts *Options, srv *redisServer, dir string, sc Scenario, algo string) (*RunResult, error) {
	admin := redis.NewClient(&redis.Options{Addr: srv.addr, MaxRetries: -1, ReadTimeout: 5 * time.Second})
	defer admin.Close()
	if err := admin.FlushAll(ctx).Err(); err != nil {
		return nil, fmt.Errorf("FLUSHALL: %w", err)
	}
	if err := srv.persist(ctx, admin, sc.AOF); err != nil {
		return nil, err
	}
	defer func() { _ = srv.persist(context.WithoutCancel(ctx), admin, false) }()
	start := time.Now().Add(startDelay)
	for _, l := range sc.Vendor {
		if l.Kind == KindWindow { // start at a window's start: every run covers the same windows
			p := int64(l.Period)
			start = time.Unix(0, (start.UnixNano()+p-1)/p*p)
			break
		}
	}
	res := &RunResult{Scenario: sc, Limits: sc.Configured(), Algo: algo, Start: start.UnixNano(), End: start.Add(sc.Duration).UnixNano(),
		Outcomes: map[string]int64{}}
	res.Phantoms = sc.phantoms(res.Start)
	// A compressed hour's windows start at the run's start: the vendor's
	// clock is moved back by the start's offset into a window, rather
	// than the run waiting up to a window for one to begin.
	var shift time.Duration
	if sc.Compress > 1 {
		res.Virtual = virtualStart(start)
		for _, l := range sc.Vendor {
			if l.Kind == KindHour {
				shift = time.Duration(res.Start % int64(l.Period))
			}
		}
	}
	v := startVendor(sc.Vendor, res.Phantoms, sc.RetryAfter, sc.Estimate, shift)
	vendorClosed := false
	defer func() {
		if !vendorClosed {
			v.Close()
		}
	}()
	before, err := readStats(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("INFO: %w", err)
	}
	// The workers reach Redis through a delaying proxy when the scenario
	// puts it far away; the harness itself (stats, events) goes direct.
	redisAddr := srv.addr
	if sc.FarRedis > 0 {
		far, err := redistest.NewDelay(srv.addr, sc.FarRedis)
		if err != nil {
			return nil, err
		}
		defer far.Close()
		redisAddr = far.Addr
	}

	type proc struct {
		cmd    *exec.Cmd
		result string
		out    *bytes.Buffer
	}
	procs := make([]*proc, opts.Processes)
	killAll := func() {
		for _, p := range procs {
			if p != nil && p.cmd.Process != nil && p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
			}
		}
	}
	for i := range procs {
		spec := workerSpec{
			Index: i, Processes: opts.Processes, Goroutines: opts.Goroutines, Algo: algo,
			Scenario: sc, Limits: res.Limits, RedisAddr: redisAddr, VendorURL: v.URL,
			Prefix: "bench:" + sc.Name + ":", Start: start, Virtual: res.Virtual,
			ResultPath: filepath.Join(dir, "worker-"+strconv.Itoa(i)+".json"),
		}
		b, err := json.Marshal(spec)
		if err != nil {
			killAll()
			return nil, err
		}
		_ = os.Remove(spec.ResultPath)
		cmd := exec.Command(opts.Exe)
		cmd.Env = append(os.Environ(), WorkerEnv+"="+string(b))
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = childAttr()
		if err := cmd.Start(); err != nil {
			killAll()
			return nil, fmt.Errorf("starting worker: %w", err)
		}
		procs[i] = &proc{cmd: cmd, result: spec.ResultPath, out: out}
	}

	// What happens to Redis in the middle of the run.
	var mid *redisStats
	var evWG sync.WaitGroup
	evCtx, evCancel := context.WithCancel(ctx)
	defer evCancel()
	evWG.Add(1)
	go func() {
		defer evWG.Done()
		at := func(frac float64) bool {
			return sleepCtx(evCtx, time.Until(start.Add(time.Duration(float64(sc.Duration)*frac))))
		}
		switch sc.Event {
		case "restart":
			if !at(0.5) {
				return
			}
			if st, err := readStats(evCtx, admin); err == nil {
				mid = &st
			}
			t0 := time.Now()
			if err := srv.restart(300 * time.Millisecond); err != nil {
				res.Events = append(res.Events, "restart failed: "+err.Error())
				return
			}
			res.Events = append(res.Events, fmt.Sprintf("redis-server killed at %.2fs and back (empty) after %v",
				t0.Sub(start).Seconds(), time.Since(t0).Round(time.Millisecond)))
		case "pause":
			for _, f := range []float64{0.3, 0.6} {
				if !at(f) {
					return
				}
				t0 := time.Now()
				if err := admin.Do(evCtx, "CLIENT", "PAUSE", 300, "ALL").Err(); err != nil {
					res.Events = append(res.Events, "CLIENT PAUSE failed: "+err.Error())
					continue
				}
				res.Events = append(res.Events, fmt.Sprintf("CLIENT PAUSE 300 ALL at %.2fs", t0.Sub(start).Seconds()))
			}
		}
	}()

	// Wait for the workers, bounded; an interrupt kills them.
	done := make(chan struct{})
	go func() {
		for _, p := range procs {
			_ = p.cmd.Wait()
		}
		close(done)
	}()
	limit := time.NewTimer(time.Until(start) + sc.Duration + 30*time.Second)
	defer limit.Stop()
	var runErr error
	select {
	case <-done:
	case <-ctx.Done():
		runErr = ctx.Err()
	case <-limit.C:
		runErr = errors.New("workers did not finish in time")
	}
	if runErr != nil {
		killAll()
		<-done
		evCancel()
		evWG.Wait()
		return nil, runErr
	}
	evWG.Wait()

	// After a restart the admin's pooled connection is dead: retry.
	var after redisStats
	for try := 0; try < 3; try++ {
		if after, err = readStats(ctx, admin); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("INFO after the run: %w", err)
	}
	if mid != nil { // the restart reset the counters
		s1, r1 := commandsSince(before, *mid)
		s2, r2 := commandsSince(redisStats{calls: map[string]int64{}}, after)
		res.CmdsSent, res.CmdsRan = s1+s2, r1+r2
		res.RedisCPU = secs(mid.cpuSec - before.cpuSec + after.cpuSec)
	} else {
		res.CmdsSent, res.CmdsRan = commandsSince(before, after)
		res.RedisCPU = secs(after.cpuSec - before.cpuSec)
	}
	v.Close()
	vendorClosed = true
	res.Arrivals, res.OtherRefused = v.Arrivals(), int64(v.OthersRefused())
	for i := range res.Arrivals { // back on the real clock
		a := &res.Arrivals[i]
		a.At = a.At.Add(shift)
		if !a.Done.IsZero() {
			a.Done = a.Done.Add(shift)
		}
	}

	for _, p := range procs {
		if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			res.ClientCPU += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		b, err := os.ReadFile(p.result)
		if err != nil || !p.cmd.ProcessState.Success() {
			return nil, fmt.Errorf("worker %s: %v\n%s", p.cmd.ProcessState, err, tail(p.out.String(), 2000))
		}
		var wr workerResult
		if err := json.Unmarshal(b, &wr); err != nil {
			return nil, fmt.Errorf("worker result: %w", err)
		}
		res.Intents = append(res.Intents, wr.Intents...)
		res.Latencies = append(res.Latencies, wr.Latencies...)
		res.Accuracy = append(res.Accuracy, wr.Accuracy...)
		for k, n := range wr.Outcomes {
			res.Outcomes[k] += n
		}
		res.Errors = append(res.Errors, wr.Errors...)
		res.DecisionScripts += wr.DecisionScripts
		res.AfterScripts += wr.AfterScripts
		res.Decisions += wr.Decisions
		res.Added = append(res.Added, wr.Added...)
		res.AddedSent = append(res.AddedSent, wr.Sent...)
		res.Commands += wr.Commands
		res.Records = append(res.Records, wr.Records...)
		if wr.Late > 0 {
			res.Events = append(res.Events, fmt.Sprintf("worker %s was ready %v after the start", p.cmd.Args[0], time.Duration(wr.Late).Round(time.Millisecond)))
		}
	}
	return res, nil
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
