// Command proxy runs the throttle's sidecar proxy on this machine alone,
// to try it from any language: a fake vendor, a configuration and the
// proxy in one process, with the quota state in memory.
//
//	go run ./examples/proxy          # serve until Ctrl-C, printing lines to paste
//	go run ./examples/proxy --demo   # send a few requests, print what happened, exit
//
// It needs no Redis and no network beyond loopback: the vendor is
// package throttletest's, the store is the memory one (which throttles
// this one process; "throttle proxy --redis" shares the quota with a
// fleet). The proxy is the same handler "throttle proxy" serves.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/fleetquota/throttle/internal/proxy"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/throttletest"
)

// config is the proxy's configuration, as a providers.yaml would hold it.
// ${VENDOR_HOST} is the fake vendor's address, picked at start. The
// vendor allows 10 requests a second; the throttle keeps to 2, waits up
// to 3s for a slot, and gives each business (tenant) 2 requests a minute.
const config = `
version: 1
providers:
  demo-vendor:
    hosts: ["${VENDOR_HOST}"]
    on_limit: wait
    max_wait: 3s
    limits:
      - {name: per-second, limit: 2/s}
      - {name: per-tenant, limit: 2/min, scope: business, missing: skip}
`

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "`address` the proxy serves on")
	demo := flag.Bool("demo", false, "send a few requests through the proxy, print what happened and exit")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *listen, *demo); err != nil {
		fmt.Fprintln(os.Stderr, "proxy example:", err)
		os.Exit(1)
	}
}

// run starts the vendor and the proxy, then either sends the demo
// requests or serves until ctx is done.
func run(ctx context.Context, stdout io.Writer, listen string, demo bool) error {
	vendor := throttletest.NewVendor(throttletest.Options{Enforcer: throttletest.GCRA(10, time.Second, 10)})
	defer vendor.Close()
	cfg, err := providers.Load("proxy-example.yaml", []byte(config),
		providers.WithLookupEnv(func(name string) (string, bool) {
			if name == "VENDOR_HOST" {
				return vendor.Host(), true
			}
			return "", false
		}))
	if err != nil {
		return err
	}
	base, err := url.Parse(vendor.URL)
	if err != nil {
		return err
	}
	// No throttle.WithStore: the memory store. Retries as throttle proxy's.
	p, err := proxy.New(proxy.Options{
		Registry: providers.NewRegistry(cfg),
		Routes:   []proxy.Route{{Name: "demo", URL: base}},
		Retries:  4,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("%w (another program may use it: try --listen 127.0.0.1:0)", err)
	}
	srv := &http.Server{Handler: proxy.Timeouts(p, time.Minute, time.Minute), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		_ = srv.Shutdown(context.Background())
		<-served
	}()

	front := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "proxy:  %s/demo/<path> goes to the fake vendor %s/<path>\n", front, vendor.URL)
	fmt.Fprintln(stdout, "limits: 2 requests a second (wait up to 3s), 2 a minute per Throttle-Business")
	if demo {
		return runDemo(ctx, stdout, front+"/demo/hello", vendor)
	}
	fmt.Fprintf(stdout, `
Paste into another terminal:

  curl -i %[1]s/demo/hello
  curl -i -H 'Throttle-Business: acme' %[1]s/demo/hello
  curl -i -H 'Throttle-Limit-Cost: nosuch=1' %[1]s/demo/hello
  python3 -c 'import requests; r = requests.get("%[1]s/demo/hello", headers={"Throttle-Business": "acme"}); print(r.status_code, r.headers.get("Throttle-Error"), r.text)'

Ctrl-C stops it.
`, front)
	select {
	case <-ctx.Done():
		return nil
	case err := <-served:
		served <- err // for the deferred shutdown
		return err
	}
}

// runDemo sends the demo requests to u and prints what each got.
func runDemo(ctx context.Context, stdout io.Writer, u string, vendor *throttletest.Vendor) error {
	get := func(header ...string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return "", err
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 512))
		if code := resp.Header.Get(proxy.HeaderError); code != "" {
			return fmt.Sprintf("%d %s: %s", resp.StatusCode, code, strings.TrimSpace(string(body))), err
		}
		return fmt.Sprintf("%d from the vendor", resp.StatusCode), err
	}
	fmt.Fprintln(stdout)

	got, err := get()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "one request:                         %s\n", got)

	// Five at once against 2 a second: the later ones wait for their
	// slots instead of reaching the vendor too fast.
	start := time.Now()
	results := make([]string, 5)
	errs := make([]error, 5)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = get()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "five at once:                        %s (in %.1fs: the throttle spaced them)\n",
		strings.Join(statuses(results), " "), time.Since(start).Seconds())

	for i := 1; i <= 3; i++ {
		if got, err = get("Throttle-Business", "acme"); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Throttle-Business: acme, request %d:  %s\n", i, got)
	}
	if got, err = get("Throttle-Limit-Cost", "nosuch=1"); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Throttle-Limit-Cost: nosuch=1:       %s\n", got)
	served, throttled := vendor.Counts()
	fmt.Fprintf(stdout, "\nthe vendor served %d requests and had to refuse %d\n", served, throttled)
	return nil
}

// statuses keeps the status code of each result.
func statuses(results []string) []string {
	out := make([]string, len(results))
	for i, r := range results {
		out[i], _, _ = strings.Cut(r, " ")
	}
	return out
}
