package main

import (
	"context"
	"errors"
	"flag"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota/redisstore"
)

// envRedis is the environment variable --redis defaults to.
const envRedis = "THROTTLE_REDIS"

// storeFlags are the flags of every command that reads or writes Redis.
type storeFlags struct {
	redis   string
	cluster bool
	ring    bool
	config  string
	prefix  string
	timeout time.Duration
}

// register adds the flags to fs. A timeout already set in f is the
// default of --timeout (2s otherwise).
func (f *storeFlags) register(fs *flag.FlagSet) {
	timeout := f.timeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	// $THROTTLE_REDIS is read after parsing, not made the default, so
	// that --help never prints a password it holds.
	fs.StringVar(&f.redis, "redis", "",
		"Redis `URL` (redis://[user:password@]host:port/db, rediss:// for TLS), or comma-separated\n"+
			"URLs or host:port addresses of a Redis Cluster's nodes (default $"+envRedis+")")
	fs.BoolVar(&f.cluster, "cluster", false, "connect to a Redis Cluster (implied by several addresses)")
	fs.BoolVar(&f.ring, "ring", false, ringText)
	fs.StringVar(&f.config, "config", "", "providers configuration `FILE` (default: the embedded catalog, config/providers.yaml)")
	fs.StringVar(&f.prefix, "prefix", redisstore.DefaultPrefix, "key `prefix` the fleet's stores use (redisstore.Options.Prefix)")
	fs.DurationVar(&f.timeout, "timeout", timeout, "bound on each call to Redis")
}

// newClient connects to the Redis that --redis and --cluster name. Every
// call is bounded by timeout (the client honours context deadlines).
func newClient(spec string, cluster bool, timeout time.Duration) (redis.UniversalClient, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, usagef("--redis is required (or set $%s)", envRedis)
	}
	if timeout <= 0 {
		return nil, usagef("--timeout %v must be positive", timeout)
	}
	parts := strings.Split(spec, ",")
	if len(parts) == 1 && !cluster {
		opt, err := parseNode(parts[0])
		if err != nil {
			return nil, err
		}
		opt.ContextTimeoutEnabled = true
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = timeout, timeout, timeout
		opt.MaxRetries = -1
		return redis.NewClient(opt), nil
	}
	var copt *redis.ClusterOptions
	if len(parts) == 1 && strings.Contains(parts[0], "://") {
		var err error
		if copt, err = redis.ParseClusterURL(parts[0]); err != nil {
			return nil, usagef("--redis %q: %v", redactURL(parts[0]), urlError(err))
		}
	} else {
		copt = &redis.ClusterOptions{}
		for i, p := range parts {
			opt, err := parseNode(p)
			if err != nil {
				return nil, err
			}
			copt.Addrs = append(copt.Addrs, opt.Addr)
			if i == 0 {
				copt.Username, copt.Password, copt.TLSConfig = opt.Username, opt.Password, opt.TLSConfig
			}
		}
	}
	copt.ContextTimeoutEnabled = true
	copt.DialTimeout, copt.ReadTimeout, copt.WriteTimeout = timeout, timeout, timeout
	copt.MaxRetries = -1
	return redis.NewClusterClient(copt), nil
}

// parseNode parses a redis:// URL or a bare host:port.
func parseNode(s string) (*redis.Options, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, usagef("--redis: empty address")
	}
	if strings.Contains(s, "://") {
		opt, err := redis.ParseURL(s)
		if err != nil {
			return nil, usagef("--redis %q: %v", redactURL(s), urlError(err))
		}
		return opt, nil
	}
	if !strings.Contains(s, ":") {
		return nil, usagef("--redis %q: want a redis:// URL or host:port", s)
	}
	return &redis.Options{Addr: s}, nil
}

// env is what a command that talks to Redis works with.
type env struct {
	cfg    *providers.Config
	client redis.UniversalClient
	store  *redisstore.Store
}

func (e *env) close() {
	if e.client != nil {
		_ = e.client.Close()
	}
}

// open loads the configuration, connects to Redis and checks that it
// answers.
func (f *storeFlags) open(ctx context.Context) (*env, error) {
	if strings.ContainsAny(f.prefix, "{}") {
		return nil, usagef("--prefix %q must not contain { or }", f.prefix)
	}
	cfg, err := loadConfig(f.config)
	if err != nil {
		return nil, err
	}
	if f.redis == "" {
		f.redis = os.Getenv(envRedis)
	}
	if f.ring {
		return f.openRing(ctx, cfg)
	}
	client, err := newClient(f.redis, f.cluster, f.timeout)
	if err != nil {
		return nil, err
	}
	e, err := f.newEnv(cfg, client)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		e.close()
		return nil, redisDown(ctx, client, f.redis, f.timeout, err)
	}
	return e, nil
}

// newEnv returns the env of a store on client (a single server, a
// cluster or a Ring) with the flags' prefix and timeout; on an error
// client is closed.
func (f *storeFlags) newEnv(cfg *providers.Config, client redis.UniversalClient) (*env, error) {
	e := &env{cfg: cfg, client: client}
	var err error
	e.store, err = redisstore.New(client, redisstore.Options{Prefix: f.prefix, Timeout: f.timeout})
	if err != nil {
		e.close()
		return nil, usagef("%v", err)
	}
	return e, nil
}

// urlError drops the URL (and any password in it) from a parse error.
func urlError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redactURL hides passwords in a --redis value for messages: each
// comma-separated URL as url.URL.Redacted shows it; one that does not parse
// is not shown at all, since where its password ends is unknown.
func redactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if !strings.Contains(p, "://") {
			continue // host:port holds no password
		}
		if u, err := url.Parse(p); err == nil {
			parts[i] = u.Redacted()
		} else {
			parts[i] = "(a URL that does not parse)"
		}
	}
	return strings.Join(parts, ",")
}
