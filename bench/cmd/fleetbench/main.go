// Command fleetbench runs the fleet load harness: N worker processes (this
// binary, run again as workers) × M goroutines sharing one redis-server
// it starts on loopback, against fake vendors that record every arrival,
// for every scenario with throttle and the alternatives, and then measures
// what "throttle proxy" adds to a request (scenario "proxy"). It writes
// REPORT.md, SVG plots and summary.json into -out.
//
//	go run ./cmd/fleetbench -out results
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/fleetquota/throttle/bench/fleet"
)

func main() {
	if os.Getenv(fleet.WorkerEnv) != "" {
		if err := fleet.RunWorker(); err != nil {
			fmt.Fprintln(os.Stderr, "fleetbench worker:", err)
			os.Exit(1)
		}
		return
	}
	out := flag.String("out", "results", "directory for REPORT.md, the SVG plots and summary.json")
	d := flag.Duration("d", 4*time.Second, "length of one scenario run (some scenarios run longer)")
	n := flag.Int("n", 4, "worker processes")
	m := flag.Int("m", 64, "goroutines per worker process")
	scen := flag.String("scenarios", "", "comma-separated scenarios to run (default all)")
	algos := flag.String("algos", "", "comma-separated algorithms to run (default all)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	loadBefore := loadavg()
	runs, err := fleet.Run(ctx, fleet.Options{
		Duration: *d, Processes: *n, Goroutines: *m,
		Scenarios: split(*scen), Algorithms: split(*algos), Log: os.Stderr,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		os.Exit(1)
	}
	var proxy *fleet.ProxyResult
	if *scen == "" || strings.Contains(","+*scen+",", ","+fleet.ScenarioProxy+",") {
		if proxy, err = fleet.RunProxy(ctx, fleet.ProxyOptions{Duration: *d, Concurrency: *m, Log: os.Stderr}); err != nil {
			fmt.Fprintln(os.Stderr, "fleetbench: proxy:", err)
			os.Exit(1)
		}
	}
	cmd := "`" + strings.TrimSpace("fleetbench "+strings.Join(os.Args[1:], " ")) + "`"
	if os.Getenv("MAKELEVEL") != "" {
		cmd = "`make bench` (" + cmd + ")"
	}
	meta := fleet.Meta{
		Command: cmd, Machine: machine(), Go: runtime.Version(), Redis: redisVersion(),
		Processes: *n, Routines: *m, Began: began, Took: time.Since(began),
		Load:  "load average " + loadBefore + " before, " + loadavg() + " after (other work on the machine shows up as jitter)",
		Proxy: proxy,
	}
	if err := fleet.WriteReport(*out, runs, meta); err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench: writing the report:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "fleetbench: %d runs in %v; report in %s/REPORT.md\n", len(runs), time.Since(began).Round(time.Second), *out)
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// machine describes the CPU: its model and the CPUs Go may use.
func machine() string {
	model := runtime.GOARCH
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs, %s/%s", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
}

// loadavg is the 1, 5 and 15 minute load averages, or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

func redisVersion() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "unknown"
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return strings.TrimSpace(string(out))
}
