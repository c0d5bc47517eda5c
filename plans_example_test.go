package throttle_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/providers"
)

// ExampleWithPlans holds each business to its plan's figures: the plan
// comes from a lookup in the caller's database, cached per business.
func ExampleWithPlans() {
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer vendor.Close()
	cfg, err := providers.Load("providers.yaml", []byte(`
providers:
  vendor:
    hosts: [`+vendor.Listener.Addr().String()+`]
    on_limit: fail
    limits: [{name: hourly, limit: 2/h, scope: business}]
    plans:
      enterprise: {limits: {hourly: 6/h}}
`))
	if err != nil {
		panic(err)
	}
	customers := map[string]string{"acme": "enterprise"} // your database
	client, err := throttle.NewClient(
		throttle.WithRegistry(providers.NewRegistry(cfg)),
		throttle.WithPlans(func(business string) string { return customers[business] }),
	)
	if err != nil {
		panic(err)
	}
	for _, business := range []string{"acme", "globex"} {
		sent := 0
		for i := 0; i < 10; i++ {
			req, _ := http.NewRequestWithContext(throttle.WithBusiness(context.Background(), business), "GET", vendor.URL, nil)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				sent++
			}
		}
		fmt.Printf("%s: %d of 10 sent\n", business, sent)
	}
	// Output:
	// acme: 6 of 10 sent
	// globex: 2 of 10 sent
}
