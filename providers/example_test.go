package providers_test

import (
	"fmt"
	"net/http"

	"github.com/fleetquota/throttle/providers"
)

func Example() {
	cfg, err := providers.Load("example.yaml", []byte(`
providers:
  github:
    hosts: [api.github.com]
    keys: per_tenant
    headroom: 95%
    on_limit: wait
    max_wait: 5s
    signals:
      throttled:
        - {status: 429}
        - {status: 403, header: X-RateLimit-Remaining, header_value: "0"}
    limits:
      - {name: core, limit: 4500/h burst 500, scope: business}
    routes:
      - name: search
        method: GET
        path: /search/*
        limits: [{name: search, limit: 27/min burst 3, scope: business}]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := providers.NewRegistry(cfg)
	req, _ := http.NewRequest("GET", "https://api.github.com/search/issues?q=bug", nil)
	res, ok, err := reg.Resolve(req, providers.Input{Business: "acme"})
	if !ok || err != nil {
		fmt.Println(ok, err)
		return
	}
	fmt.Printf("provider %s, route %s, on_limit %s, max wait %v\n",
		res.Provider.Name, res.Route.Name, res.Provider.OnLimit, res.Request.MaxWait)
	fmt.Printf("tag {%s}, pause %s, cost %d\n", res.Request.Tag, res.Pause, res.Request.Cost)
	for _, it := range res.Request.Items {
		l := it.Limit
		fmt.Printf("  %-12s %s %d per %v, burst %d\n", it.Key, l.Kind, l.Rate, l.Period, l.Capacity())
	}
	// Output:
	// provider github, route search, on_limit wait, max wait 5s
	// tag {github:acme}, pause pause:acme, cost 1
	//   core:acme    gcra 4275 per 1h0m0s, burst 475
	//   search:acme  gcra 27 per 1m3.157895s, burst 2
}

func ExampleLoad_errors() {
	_, err := providers.Load("bad.yaml", []byte(`
providers:
  github:
    hosts: [api.github.com]
    limits:
      - {name: core, limit: 5000/hr, brust: 10}
      - {name: daily, limit: 1000/day resets 00:00 Nowhere/Land}
`))
	fmt.Println(err)
	// Output:
	// providers: invalid configuration: 2 problems:
	//	bad.yaml:6:38: providers.github.limits[0].brust: unknown field "brust": valid fields are name, limit, rate, period, burst, quota, per, resets, timezone, rolling, scope, missing, only, learn, reserve, pace, ahead, fair
	//	bad.yaml:7:30: providers.github.limits[1].limit: unknown time zone "Nowhere/Land": want an IANA name such as UTC, Europe/Berlin or America/Los_Angeles
}
