package otel_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fleetquota/throttle"
	throttleotel "github.com/fleetquota/throttle/otel"
	"github.com/fleetquota/throttle/providers"
)

// Metrics and the wait's span next to a log: each WithObserver adds an
// observer. The second request waits about a second for its slot, inside
// the caller's span. A program would pass its own MeterProvider (or none,
// for the global one); the in-memory reader and span recorder here stand
// in for exporters.
func Example() {
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	}))
	defer vendor.Close()
	cfg, err := providers.Load("providers.yaml", []byte(`
providers:
  vendor:
    hosts: ["`+strings.TrimPrefix(vendor.URL, "http://")+`"]
    on_limit: wait
    max_wait: 5s
    limits:
      - {name: peak, limit: 1/s, burst: 1}
`))
	if err != nil {
		fmt.Println(err)
		return
	}

	reader := sdkmetric.NewManualReader()
	obs, err := throttleotel.New(throttleotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := throttle.NewClient(
		throttle.WithRegistry(providers.NewRegistry(cfg)),
		throttle.WithObserver(obs),
		throttle.WithObserver(throttle.SlogObserver(slog.Default())),
	)
	if err != nil {
		fmt.Println(err)
		return
	}

	spans := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)).Tracer("example")
	ctx, sync := tracer.Start(context.Background(), "sync invoices")
	for range 2 {
		req, _ := http.NewRequestWithContext(ctx, "GET", vendor.URL+"/invoices", nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	sync.End()

	for _, s := range spans.Ended() {
		if s.Name() == "throttle.wait" && s.Parent().SpanID() == sync.SpanContext().SpanID() {
			for _, a := range s.Attributes() {
				if a.Key == throttleotel.LimitKey {
					fmt.Printf("span %s in %q, limit %s\n", s.Name(), "sync invoices", a.Value.Emit())
				}
			}
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			var n int64
			for _, p := range d.DataPoints {
				n += p.Value
			}
			fmt.Printf("%s: %d\n", m.Name, n)
		case metricdata.Histogram[float64]:
			var n, atOnce uint64
			for _, p := range d.DataPoints {
				n += p.Count
				atOnce += p.BucketCounts[0] // the bucket 0: no wait
			}
			fmt.Printf("%s: %d requests, %d at once\n", m.Name, n, atOnce)
		}
	}
	// Output:
	// span throttle.wait in "sync invoices", limit peak
	// throttle.decisions: 2
	// throttle.wait.duration: 2 requests, 1 at once
}
