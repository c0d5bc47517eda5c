package throttle_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

// The lease worker: TestLeasesOfAKilledProcess re-executes the test binary
// with these set, and it takes leases and blocks.
const (
	leaseWorkerEnv = "THROTTLE_LEASE_WORKER" // the Redis address
	leaseVendorEnv = "THROTTLE_LEASE_VENDOR" // the vendor's URL
)

// killYAML: 2 leases with a TTL of 2s, renewed every second while held.
const killYAML = `
providers:
  vendor:
    hosts: ["HOST"]
    on_limit: fail
    limits: [{name: streams, limit: 2 concurrent lease 2s}]
`

func TestMain(m *testing.M) {
	if addr := os.Getenv(leaseWorkerEnv); addr != "" {
		os.Exit(leaseWorker(addr, os.Getenv(leaseVendorEnv)))
	}
	if addr := os.Getenv(leaseWaiterEnv); addr != "" {
		os.Exit(leaseWaiter(addr, os.Getenv(leaseVendorEnv)))
	}
	os.Exit(m.Run())
}

// leaseWorker sends two requests that the vendor never answers, so that
// it holds both leases (and renews them) until it is killed.
func leaseWorker(addr, vendor string) int {
	store, err := redisstore.New(redis.NewClient(&redis.Options{Addr: addr}), redisstore.Options{Timeout: 2 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg, err := providers.Load("kill.yaml", []byte(strings.ReplaceAll(killYAML, "HOST", strings.TrimPrefix(vendor, "http://"))))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tr, err := throttle.New(throttle.WithRegistry(providers.NewRegistry(cfg)), throttle.WithStore(store))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			req, _ := http.NewRequest("GET", vendor+"/hang", nil)
			_, err := tr.RoundTrip(req)
			errs <- err
		}()
	}
	fmt.Fprintln(os.Stderr, "lease worker: a request ended:", <-errs)
	return 1
}

// TestLeasesOfAKilledProcess: a worker process takes both leases of a
// limit with a 2s TTL, keeps them while its requests hang (renewing them),
// and is killed with SIGKILL: it releases nothing. Its leases come back by
// expiry, within a TTL of its last renewal: a request refused after the
// kill is told to retry within the TTL, and is admitted then.
func TestLeasesOfAKilledProcess(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	arrived := make(chan struct{}, 2)
	v := e2eVendor(t, throttletest.Options{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			arrived <- struct{}{}
			<-r.Context().Done() // until the worker's connection dies
		}
	})})
	store, err := redisstore.New(srv.Client(t), redisstore.Options{Timeout: fleetStoreTimeout})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := e2eTransport(t, killYAML, v.Host(), throttle.WithStore(store))
	probe := func() (*http.Response, error) {
		req, _ := http.NewRequest("GET", v.URL+"/x", nil)
		return tr.RoundTrip(req)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), leaseWorkerEnv+"="+srv.Addr, leaseVendorEnv+"="+v.URL)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	for i := 0; i < 2; i++ {
		select {
		case <-arrived:
		case <-time.After(30 * time.Second):
			t.Fatalf("the worker's requests never reached the vendor; its stderr:\n%s", stderr.String())
		}
	}
	// Held, and kept past their TTL by the worker's renewals.
	time.Sleep(3 * time.Second)
	var le *throttle.LimitError
	if _, err := probe(); !errors.As(err, &le) || le.Limit != "streams" {
		t.Fatalf("3s after the worker took both leases (TTL 2s): a request got %v, want refused by streams: the worker did not renew them", err)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	exited = true
	resp, err := probe()
	if errors.As(err, &le) {
		if le.RetryAfter > 2*time.Second {
			t.Fatalf("refused after the kill with a retry after %v, beyond the 2s TTL", le.RetryAfter)
		}
		time.Sleep(le.RetryAfter)
		resp, err = probe()
	}
	if err != nil {
		t.Fatalf("the killed worker's leases did not come back by their expiry: %v", err)
	}
	resp.Body.Close()
}
