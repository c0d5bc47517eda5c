package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota/redisstore"
)

// config is every worker's configuration: the same file on every machine
// of a fleet. The vendor counts 20 requests per calendar second. A GCRA
// limit lets about rate + burst through in one such second, so the burst
// is kept at 1, and headroom: 80% (16/s) leaves room for the time between
// a slot and the request's arrival, which grows on a busy machine.
const config = `
version: 1
providers:
  fake-vendor:
    hosts: ["${VENDOR_HOST}"]
    on_limit: wait
    max_wait: 5s
    headroom: 80%
    on_store_error: fail_closed   # no Redis, no request: never over the quota
    limits:
      - {name: per-second, limit: 20/s burst 1}
`

// senders is how many requests each worker keeps in flight.
const senders = 4

// report is what a worker tells the parent, as JSON on its stdout.
type report struct {
	Worker int `json:"worker"`
	// Sent is how many requests the vendor answered 200.
	Sent int `json:"sent"`
	// Refused is how many the throttle refused because their slot would
	// have come after the stop time: one per sender, at the end.
	Refused int `json:"refused"`
}

// workerMain runs a worker process and returns its exit code.
func workerMain() int {
	r, err := worker(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet worker:", err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, "fleet worker:", err)
		return 1
	}
	return 0
}

// worker sends requests from the start time to the stop time given in its
// environment, through a throttle whose quota state is in Redis.
func worker(ctx context.Context) (report, error) {
	var r report
	var err error
	if r.Worker, err = strconv.Atoi(os.Getenv(workerEnv)); err != nil {
		return r, fmt.Errorf("%s: %w", workerEnv, err)
	}
	start, err := unixMilli(startEnv)
	if err != nil {
		return r, err
	}
	stop, err := unixMilli(stopEnv)
	if err != nil {
		return r, err
	}
	vendor, err := url.Parse(os.Getenv(vendorEnv))
	if err != nil {
		return r, fmt.Errorf("%s: %w", vendorEnv, err)
	}

	ropts, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		return r, fmt.Errorf("REDIS_URL: %w", err)
	}
	// No client retries: one re-sent after a lost reply would charge twice.
	ropts.MaxRetries = -1
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	store, err := redisstore.New(rdb, redisstore.Options{Prefix: os.Getenv(prefixEnv)})
	if err != nil {
		return r, err
	}
	cfg, err := providers.Load("fleet.yaml", []byte(config),
		providers.WithLookupEnv(func(name string) (string, bool) {
			if name == "VENDOR_HOST" {
				return vendor.Host, true
			}
			return os.LookupEnv(name)
		}))
	if err != nil {
		return r, err
	}
	client, err := throttle.NewClient(throttle.WithRegistry(providers.NewRegistry(cfg)), throttle.WithStore(store))
	if err != nil {
		return r, err
	}

	if err := sleepUntil(ctx, start); err != nil {
		return r, err
	}
	// Each request may wait for its slot only until the stop time: the
	// throttle refuses at once one whose slot would come later.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	target := fmt.Sprintf("%s/workers/%d/jobs", vendor, r.Worker)

	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := send(throttle.WithMaxWait(ctx, max(time.Until(stop), 0)), client, target)
				mu.Lock()
				switch {
				case err == nil:
					r.Sent++
				case errors.Is(err, throttle.ErrLimited):
					// Its slot would have come after the stop time.
					r.Refused++
				case ctx.Err() == nil:
					if firstErr == nil {
						firstErr = err
					}
					cancel()
				}
				mu.Unlock()
				if err != nil {
					// Stop time, or an error: this sender is done.
					return
				}
			}
		}()
	}
	wg.Wait()
	return r, firstErr
}

// send makes one request and reads the whole response; a status other
// than 200 is an error.
func send(ctx context.Context, client *http.Client, target string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the vendor answered %s", resp.Status)
	}
	return nil
}

// unixMilli reads a time in Unix milliseconds from the environment.
func unixMilli(name string) (time.Time, error) {
	ms, err := strconv.ParseInt(os.Getenv(name), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", name, err)
	}
	return time.UnixMilli(ms), nil
}

// sleepUntil waits until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
