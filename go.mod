module github.com/fleetquota/throttle

go 1.26.0

require (
	github.com/hashicorp/go-retryablehttp v0.7.7
	github.com/jarcoal/httpmock v1.3.0
	github.com/redis/go-redis/v9 v9.23.0
	gopkg.in/yaml.v3 v3.0.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
