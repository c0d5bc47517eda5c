package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
)

// vendor starts a stand-in for a vendor API and returns its host.
func vendor() (*httptest.Server, string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	}))
	return srv, strings.TrimPrefix(srv.URL, "http://")
}

// A client for any SDK that accepts an *http.Client: requests to the
// provider's hosts wait for their slot; others pass straight through.
func ExampleNewClient() {
	srv, host := vendor()
	defer srv.Close()
	cfg, err := providers.Load("providers.yaml", []byte(`
providers:
  vendor:
    hosts: ["`+host+`"]
    limits:
      - {name: peak, limit: 100/s}
      - {name: daily, limit: "250000/day resets 00:00 America/Los_Angeles"}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := throttle.NewClient(throttle.WithRegistry(providers.NewRegistry(cfg)))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := client.Get(srv.URL + "/v1/charges")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output: 200 OK
}

// A provider that fails fast refuses a request its stack cannot admit at
// once, before sending it, and says which limit decided.
func ExampleLimitError() {
	srv, host := vendor()
	defer srv.Close()
	cfg, err := providers.Load("providers.yaml", []byte(`
providers:
  vendor:
    hosts: ["`+host+`"]
    on_limit: fail
    limits:
      - {name: per-business, limit: 1/min, burst: 1, scope: business}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	rt, err := throttle.New(throttle.WithRegistry(providers.NewRegistry(cfg)))
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: rt}
	ctx := throttle.WithBusiness(context.Background(), "acme")
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		resp, err := client.Do(req)
		var le *throttle.LimitError
		switch {
		case errors.As(err, &le):
			fmt.Printf("refused by %s for %s, retry in about %v\n", le.Limit, le.Scope, le.RetryAfter.Round(time.Minute))
			fmt.Println(errors.Is(err, throttle.ErrLimited))
		case err != nil:
			fmt.Println(err)
		default:
			resp.Body.Close()
			fmt.Println(resp.Status)
		}
	}
	// Output:
	// 200 OK
	// refused by per-business for acme, retry in about 1m0s
	// true
}
