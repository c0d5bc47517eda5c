// Package redisrate benchmarks the Redis quota store against
// github.com/go-redis/redis_rate on the same redis-server in the same run.
// It is a module of its own so that the comparison's dependency stays out
// of the library's go.mod. See README.md.
package redisrate
