// Command fleet runs several worker processes that call one vendor through
// the throttle and share one quota in Redis, and shows that together they
// stay inside the vendor's limit.
//
//	redis-server --port 6379 --save ''   # in another terminal, if none runs
//	go run ./examples/fleet              # -workers 4 -duration 5s
//
// The program runs the fake vendor (package throttletest), which
// counts 20 requests per calendar second and answers 429 beyond that, then
// starts itself again as each worker (os.Args[0], with THROTTLE_FLEET_WORKER
// set). Every worker sends as fast as it can for the duration; the only
// thing they share is the quota state in Redis. At the end the parent
// prints what the vendor saw: requests per second, per worker and in total,
// against the limit.
//
// Redis is REDIS_URL, or localhost:6379 when it is unset. Without a
// reachable Redis the program says how to start one and exits 1.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/throttletest"
)

// The environment of a worker process.
const (
	workerEnv = "THROTTLE_FLEET_WORKER" // the worker's number; set only in workers
	vendorEnv = "THROTTLE_FLEET_VENDOR" // the fake vendor's base URL
	prefixEnv = "THROTTLE_FLEET_PREFIX" // the Redis key prefix of this run
	startEnv  = "THROTTLE_FLEET_START"  // when to start, Unix ms
	stopEnv   = "THROTTLE_FLEET_STOP"   // when to stop, Unix ms
)

// vendorLimit is what the fake vendor allows per calendar second.
const vendorLimit = 20

// defaultRedis is the Redis used when REDIS_URL is not set.
const defaultRedis = "redis://localhost:6379/0"

// options are the parent's settings.
type options struct {
	workers  int
	duration time.Duration
	redisURL string
}

func main() {
	if os.Getenv(workerEnv) != "" {
		os.Exit(workerMain())
	}
	o := options{redisURL: os.Getenv("REDIS_URL")}
	flag.IntVar(&o.workers, "workers", 4, "worker processes")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "how long the workers send")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// errNoRedis is returned when no Redis answers; its message says how to
// start one.
var errNoRedis = errors.New("no Redis")

// run checks Redis, starts the vendor and the workers, waits for them and
// prints what the vendor saw.
func run(ctx context.Context, stdout io.Writer, o options) error {
	if o.workers < 1 || o.duration <= 0 {
		return fmt.Errorf("want at least 1 worker and a positive duration, got %d and %v", o.workers, o.duration)
	}
	url := o.redisURL
	if url == "" {
		url = defaultRedis
	}
	if err := checkRedis(ctx, url); err != nil {
		return fmt.Errorf("%w: %v\n\n"+
			"The fleet example shares one quota between processes through Redis. Start one with\n\n"+
			"    redis-server --port 6379 --save ''\n\n"+
			"(install it with: apt-get install redis-server), or point REDIS_URL at yours:\n\n"+
			"    REDIS_URL=redis://host:6379/0 go run ./examples/fleet",
			errNoRedis, err)
	}

	vendor := throttletest.NewVendor(throttletest.Options{
		Enforcer: throttletest.Window(vendorLimit, time.Second),
		Signal:   throttletest.RetryAfterSeconds,
	})
	defer vendor.Close()

	// Workers start together on a whole second, so that the seconds of the
	// report are the vendor's own windows.
	start := time.Now().Add(700 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	stopAt := start.Add(o.duration)
	prefix := fmt.Sprintf("throttle-fleet:%d:", time.Now().UnixNano())

	fmt.Fprintf(stdout, "fake vendor at %s allows %d requests per calendar second, 429 beyond\n", vendor.URL, vendorLimit)
	fmt.Fprintf(stdout, "%d worker processes send as fast as they can for %v, sharing one quota in Redis at %s\n\n",
		o.workers, o.duration, redactURL(url))

	reports := make([]report, o.workers)
	errs := make([]error, o.workers)
	var wg sync.WaitGroup
	for i := range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[i], errs[i] = runWorker(ctx, i+1, []string{
				"REDIS_URL=" + url,
				vendorEnv + "=" + vendor.URL,
				prefixEnv + "=" + prefix,
				startEnv + "=" + strconv.FormatInt(start.UnixMilli(), 10),
				stopEnv + "=" + strconv.FormatInt(stopAt.UnixMilli(), 10),
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	served, throttled := vendor.Counts()
	if err := printTable(stdout, vendor.Arrivals(), o.workers, start); err != nil {
		return err
	}
	sent := 0
	for _, r := range reports {
		sent += r.Sent
	}
	fmt.Fprintf(stdout, "\nlimit is the vendor's; the workers' configuration uses 80%% of it (headroom: 80%%, 16/s).\n")
	fmt.Fprintf(stdout, "the workers sent %d; the vendor served %d and throttled %d\n", sent, served, throttled)
	if throttled > 0 {
		return fmt.Errorf("the vendor throttled %d requests: the fleet went over the limit", throttled)
	}
	if served == 0 {
		return errors.New("the vendor served nothing")
	}
	return nil
}

// checkRedis dials url's server with a short timeout and pings it.
func checkRedis(ctx context.Context, url string) error {
	ropts, err := redis.ParseURL(url)
	if err != nil {
		return fmt.Errorf("REDIS_URL %q: %w", redactURL(url), err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// A plain dial first: it fails fast, where a client would retry.
	d := net.Dialer{Timeout: 500 * time.Millisecond}
	conn, err := d.DialContext(ctx, ropts.Network, ropts.Addr)
	if err != nil {
		return fmt.Errorf("nothing answers at %s: %w", redactURL(url), err)
	}
	_ = conn.Close()
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("the server at %s does not answer PING: %w", redactURL(url), err)
	}
	return nil
}

// runWorker runs worker n as a child process and returns its report.
func runWorker(ctx context.Context, n int, env []string) (report, error) {
	// Workers stop by themselves; the context only ends them early.
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), append(env, workerEnv+"="+strconv.Itoa(n))...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return report{}, fmt.Errorf("worker %d: %w\n%s", n, err, stderr.String())
	}
	var r report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return report{}, fmt.Errorf("worker %d: reading its report %q: %w", n, stdout.String(), err)
	}
	return r, nil
}

// printTable prints the requests the vendor served per second of the run,
// per worker and in total, against the limit.
func printTable(w io.Writer, arrivals []throttletest.Arrival, workers int, start time.Time) error {
	counts := map[int][]int{} // second -> per worker (index 0: total)
	for _, a := range arrivals {
		if a.Throttled {
			continue
		}
		n, ok := workerOf(a.Path)
		if !ok || n > workers {
			continue
		}
		s := int(a.At.Sub(start) / time.Second)
		if counts[s] == nil {
			counts[s] = make([]int, workers+1)
		}
		counts[s][0]++
		counts[s][n]++
	}
	seconds := make([]int, 0, len(counts))
	for s := range counts {
		seconds = append(seconds, s)
	}
	sort.Ints(seconds)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"second"}
	for i := 1; i <= workers; i++ {
		head = append(head, fmt.Sprintf("worker %d", i))
	}
	head = append(head, "total", "limit", "")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, s := range seconds {
		row := []string{strconv.Itoa(s + 1)}
		for i := 1; i <= workers; i++ {
			row = append(row, strconv.Itoa(counts[s][i]))
		}
		row = append(row, strconv.Itoa(counts[s][0]), strconv.Itoa(vendorLimit), "")
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// workerOf returns the worker number in a path "/workers/<n>/...".
func workerOf(path string) (int, bool) {
	rest, ok := strings.CutPrefix(path, "/workers/")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, "/")
	n, err := strconv.Atoi(num)
	return n, err == nil && n > 0
}

// redactURL hides a password in a Redis URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}
