package main

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fleetquota/throttle/prom"
)

// proxyMetrics is the Prometheus wiring of "throttle proxy", kept in this
// one file. It is why cmd/throttle is a module of its own: the library's
// module requires no Prometheus.
type proxyMetrics struct {
	reg      *prometheus.Registry
	observer *prom.Observer
	requests *prometheus.CounterVec
}

// newProxyMetrics registers the transport's metrics (package prom), the
// proxy's answers, and the Go runtime's and the process's.
func newProxyMetrics() *proxyMetrics {
	m := &proxyMetrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "throttle_proxy_requests_total",
			Help: `Requests the proxy answered, by provider ("" when no provider claims the host) and status (499: the client went away first).`,
		}, []string{"provider", "code"}),
	}
	obs, err := prom.New(prom.WithRegisterer(m.reg))
	if err != nil {
		panic(err) // a fresh registry refuses nothing prom registers
	}
	m.observer = obs
	m.reg.MustRegister(m.requests,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// done counts one answered request; it is proxy.Options.Done.
func (m *proxyMetrics) done(provider string, status int) {
	m.requests.WithLabelValues(provider, strconv.Itoa(status)).Inc()
}

// handler serves /metrics.
func (m *proxyMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
