package throttletest_test

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/throttletest"
)

// A vendor that allows 2 requests a minute answers the third 429, with the
// Retry-After its limit implies, and records all three.
func Example() {
	v := throttletest.NewVendor(throttletest.Options{
		Enforcer: throttletest.GCRA(2, time.Minute, 2),
		Signal:   throttletest.RetryAfterSeconds,
	})
	defer v.Close()

	for i := 0; i < 3; i++ {
		resp, err := v.Client().Get(v.URL + "/v1/orders")
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Printf("%d Retry-After: %q\n", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	served, throttled := v.Counts()
	fmt.Printf("served %d, throttled %d\n", served, throttled)
	for _, a := range v.Arrivals() {
		fmt.Println(a.Method, a.Path, a.Throttled)
	}
	// Output:
	// 200 Retry-After: ""
	// 200 Retry-After: ""
	// 429 Retry-After: "30"
	// served 2, throttled 1
	// GET /v1/orders false
	// GET /v1/orders false
	// GET /v1/orders true
}

// The test of a client: 15 requests at once through throttle.Transport,
// configured with the vendor's published limit, against a vendor that
// enforces it. The vendor, not the client, says whether the limit held.
func Example_throttle() {
	v := throttletest.NewVendor(throttletest.Options{
		Enforcer: throttletest.GCRA(10, time.Second, 10),
	})
	defer v.Close()

	// headroom: 90% absorbs the moments between the slot the throttle
	// hands out and the request's arrival at the vendor.
	cfg, err := providers.Load("providers.yaml", []byte(`
providers:
  vendor:
    hosts: ["`+v.Host()+`"]
    headroom: 90%
    limits:
      - {name: peak, limit: 10/s}
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

	var wg sync.WaitGroup
	for i := 0; i < 15; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get(v.URL + "/v1/orders")
			if err != nil {
				fmt.Println(err)
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()

	served, throttled := v.Counts()
	fmt.Printf("the vendor served %d and throttled %d\n", served, throttled)
	// Output: the vendor served 15 and throttled 0
}

// A Ledger asks a vendor's limits without a server: here a model API's
// 1,000 tokens a minute per account, under an account-wide 3 requests a
// minute, at times the caller gives.
func ExampleLedger() {
	l := throttletest.NewLedger(throttletest.All(
		throttletest.Window(1000, time.Minute).Costs(),
		throttletest.Window(3, time.Minute).Shared(),
	))
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	fmt.Println(l.Admit(t0, "acme", 800))
	fmt.Println(l.Admit(t0, "acme", 300))
	fmt.Println(l.Admit(t0.Add(10*time.Second), "globex", 900))
	fmt.Println(l.Admit(t0.Add(20*time.Second), "initech", 1))
	fmt.Println(l.Admit(t0.Add(30*time.Second), "umbrella", 1))
	fmt.Println(l.Earliest(t0.Add(30*time.Second), "acme", 300).Format(time.TimeOnly))
	// Output:
	// true 0s
	// false 1m0s
	// true 0s
	// true 0s
	// false 30s
	// 12:01:00
}
