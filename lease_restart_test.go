package throttle_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota/redisstore"
)

// TestLeasesTakenAgainAfterAnEmptyRestart: two streams hold both leases
// of a cap of 2 when Redis restarts empty (a real redis-server, killed and
// started again on its port). The streams are still in flight, so their
// next renewal takes their leases again, and a third request is refused
// as before the restart. (Before, a lease the store had lost was never
// taken again: the store admitted a whole cap more while the streams ran,
// 4 in flight against a cap of 2.)
func TestLeasesTakenAgainAfterAnEmptyRestart(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for { // a stream: a byte every 50 ms until the client or the test ends
			if _, err := io.WriteString(w, "."); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}))
	defer vendor.Close()
	const yaml = `
providers:
  vendor:
    hosts: ["HOST"]
    on_limit: fail
    on_store_error: fail_closed
    limits: [{name: streams, limit: 2 concurrent lease 2s}]
`
	srv := redistest.Start(t)
	rc := srv.Client(t)
	store, err := redisstore.New(rc, redisstore.Options{Timeout: fleetStoreTimeout})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := e2eTransport(t, yaml, strings.TrimPrefix(vendor.URL, "http://"), throttle.WithStore(store),
		throttle.WithStoreRetry(10*time.Millisecond))
	client := &http.Client{Transport: tr}
	get := func() (*http.Response, error) {
		req, _ := http.NewRequest("GET", vendor.URL+"/v1/stream", nil)
		return client.Do(req)
	}
	var wg sync.WaitGroup
	defer func() { // the streams end, then their readers
		close(stop)
		wg.Wait()
	}()
	for range 2 {
		resp, err := get()
		if err != nil {
			t.Fatalf("a stream: %v", err)
		}
		wg.Add(1)
		go func() { // reads the stream, so the transport renews its lease
			defer wg.Done()
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	if _, err := get(); !errors.Is(err, throttle.ErrLimited) {
		t.Fatalf("a third request before the restart: %v, want refused", err)
	}

	srv.Restart(t)
	key := store.Key("vendor", "streams")
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second) // a renewal comes every second
	for n := int64(0); n < 2; n, _ = rc.ZCard(ctx, key).Result() {
		if time.Now().After(deadline) {
			t.Fatalf("after the restart, the store holds %d leases of the 2 streams in flight, want both taken again", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp, err := get(); !errors.Is(err, throttle.ErrLimited) {
		if resp != nil {
			resp.Body.Close()
		}
		t.Errorf("a third request after the restart: %v, want refused: 2 streams are in flight", err)
	}
}
