// Command stacked shows a stack of limits on one vendor — a daily quota, a
// per-second peak and a per-business limit — deciding together, which limit
// refused each request, and what the caller gets back.
//
//	go run ./examples/stacked
//
// The provider fails fast (on_limit: fail), so every refusal reaches the
// caller as a *throttle.LimitError. The caller here reacts to the limit
// that decided: after the peak it waits RetryAfter and tries again; after
// its business's limit it moves on to the next business; after the daily
// quota it stops for the day. The numbers are small so that it runs in a
// few seconds. It needs no network and no Redis.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"text/tabwriter"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/throttletest"
)

// dailyQuota is the vendor's daily quota; the fake vendor enforces it too.
const dailyQuota = 30

// config is the vendor's stack. All three limits apply to every request;
// a request goes only when every one of them admits it, and a refused
// request is charged to none of them.
const config = `
version: 1
providers:
  fake-vendor:
    hosts: ["${VENDOR_HOST}"]
    on_limit: fail                                  # refuse at once what cannot go now
    limits:
      - {name: daily, limit: 30/day}                # a calendar day, reset at 00:00 UTC
      - {name: peak, limit: 5/s}                    # 5 at once, then one every 200ms
      - {name: per-business, limit: 3/10s, scope: business}
`

// businesses are the tenants the requests are made for, in turn.
var businesses = []string{
	"acme", "globex", "initech", "umbrella", "hooli", "stark",
	"wayne", "wonka", "tyrell", "cyberdyne", "soylent", "oscorp",
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stacked:", err)
		os.Exit(1)
	}
}

// run starts the fake vendor, sends requests for one business after
// another until the daily quota refuses one, and prints every decision and
// a summary.
func run(ctx context.Context, stdout io.Writer) error {
	// The vendor enforces the daily quota itself, per UTC day, and
	// answers 429 beyond it: if a refused request had been charged to the
	// daily quota anyway, the vendor would not see all 30.
	vendor := throttletest.NewVendor(throttletest.Options{
		Enforcer: throttletest.Window(dailyQuota, 24*time.Hour),
	})
	defer vendor.Close()

	cfg, err := providers.Load("stacked.yaml", []byte(config),
		providers.WithLookupEnv(func(name string) (string, bool) {
			if name == "VENDOR_HOST" {
				return vendor.Host(), true
			}
			return os.LookupEnv(name)
		}))
	if err != nil {
		return err
	}
	client, err := throttle.NewClient(throttle.WithRegistry(providers.NewRegistry(cfg)))
	if err != nil {
		return err
	}

	fmt.Fprintf(stdout, "one vendor, three limits: daily 30/day, peak 5/s, per-business 3 per 10s (on_limit: fail)\n\n")
	// One line per refusal: the requests sent since the previous one,
	// then the refusal and what the caller does about it.
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "time\tbusiness\tsent\tthen refused by\tretry after\tthe caller")

	start := time.Now()
	first := map[string]error{} // the first refusal by each limit
	var order []string          // limits in the order they first refused
	refusals := map[string]int{}
	sent, streak := 0, 0
	line := func(business, limit string, retry time.Duration, then string) {
		fmt.Fprintf(tw, "%5.2fs\t%s\t%d\t%s\t%v\t%s\n",
			time.Since(start).Seconds(), business, streak, limit, retry, then)
		streak = 0
	}

loop:
	for _, business := range businesses {
		for {
			err := send(ctx, client, business, vendor.URL+"/v1/orders")
			if err == nil {
				sent++
				streak++
				continue
			}
			var le *throttle.LimitError
			if !errors.As(err, &le) {
				return fmt.Errorf("%s: %w", business, err)
			}
			if _, seen := first[le.Limit]; !seen {
				first[le.Limit] = err
				order = append(order, le.Limit)
			}
			refusals[le.Limit]++
			switch le.Limit {
			case "peak":
				// The vendor's peak: a short wait and the same request
				// goes.
				line(business, le.Limit, le.RetryAfter.Round(time.Millisecond), "waits RetryAfter, tries again")
				if err := sleep(ctx, le.RetryAfter); err != nil {
					return err
				}
			case "per-business":
				// This business has had its share; the others have not.
				line(business, le.Limit, le.RetryAfter.Round(time.Millisecond), "moves on to the next business")
				continue loop
			default: // daily
				line(business, le.Limit, le.RetryAfter.Round(time.Second), "stops until the quota resets")
				break loop
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(stdout, "\nWhat the caller got, for the first refusal by each limit:\n")
	for _, limit := range order {
		err := first[limit]
		var le *throttle.LimitError
		errors.As(err, &le)
		fmt.Fprintf(stdout, "\n  err.Error():                          %v\n", err)
		fmt.Fprintf(stdout, "  errors.Is(err, throttle.ErrLimited):  %v\n", errors.Is(err, throttle.ErrLimited))
		fmt.Fprintf(stdout, "  errors.As(err, &le):                  Provider=%q Limit=%q Scope=%q RetryAfter=%v Deadline=%v\n",
			le.Provider, le.Limit, le.Scope, le.RetryAfter.Round(time.Millisecond), le.Deadline)
	}

	served, throttled := vendor.Counts()
	fmt.Fprintf(stdout, "\nsent %d; refused by peak %d, by per-business %d, by daily %d\n",
		sent, refusals["peak"], refusals["per-business"], refusals["daily"])
	fmt.Fprintf(stdout, "the vendor served %d and throttled %d: no refused request was charged to the daily quota\n",
		served, throttled)
	if throttled > 0 {
		return fmt.Errorf("the vendor throttled %d requests", throttled)
	}
	return nil
}

// send makes one request for business and reads the whole response. A
// response other than 200 is an error.
func send(ctx context.Context, client *http.Client, business, url string) error {
	req, err := http.NewRequestWithContext(throttle.WithBusiness(ctx, business), http.MethodGet, url, nil)
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

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
