package redisstore_test

import (
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/quota/redisstore"
)

// A fleet shares one quota through Redis: every process makes its client
// with the same store (same Redis, same Options.Prefix).
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{
		Addr: "redis:6379",
		// Let the store bound each call by its context, and do not let
		// go-redis re-send a script whose reply was lost: that could
		// charge one request twice.
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
	store, err := redisstore.New(rdb, redisstore.Options{})
	if err != nil {
		log.Fatal(err) // a bad option: New makes no call to Redis
	}
	client, err := throttle.NewClient(throttle.WithStore(store))
	if err != nil {
		log.Fatal(err)
	}
	_ = client // hand it to any SDK that takes an *http.Client
}
