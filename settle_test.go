package throttle_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetquota/throttle"
	"github.com/fleetquota/throttle/internal/redistest"
	"github.com/fleetquota/throttle/quota/redisstore"
	"github.com/fleetquota/throttle/throttletest"
)

// settleYAML: a model API with tokens split into input and output, and a
// total; on_limit fail, so that what the limits hold shows as admitted or
// refused at once. Per hour, so that the seconds a test takes give back
// nothing.
const settleYAML = `
providers:
  model:
    hosts: ["HOST"]
    on_limit: fail
    limits:
      - {name: tpm, limit: 1000/h}
      - {name: input, limit: 1000/h}
      - {name: output, limit: 500/h}
`

// settleVendor answers each path with its body and content type.
func settleVendor(t *testing.T, bodies map[string]string) *throttletest.Vendor {
	return e2eVendor(t, throttletest.Options{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := bodies[r.URL.Path]
		if strings.HasPrefix(b, "data:") || strings.HasPrefix(b, "event:") {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, line := range strings.SplitAfter(b, "\n") { // as a stream, flushed event by event
				_, _ = io.WriteString(w, line)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, b)
	})})
}

// settleGet sends a GET to url through tr with the given per-limit costs
// and reads read bytes of the body (all of it when read < 0).
func settleGet(ctx context.Context, tr *throttle.Transport, url string, costs map[string]int64, read int) error {
	for name, n := range costs {
		ctx = throttle.WithLimitCost(ctx, name, n)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if read < 0 {
		_, err = io.Copy(io.Discard, resp.Body)
	} else {
		_, err = io.CopyN(io.Discard, resp.Body, int64(read))
	}
	return err
}

// TestSettle: each built-in settler reads the actual usage from the body
// the caller reads (a JSON body's usage, a stream's usage events), and the
// reservation is settled: the unused estimate comes back, an excess delays
// the next request, a body closed early settles nothing.
func TestSettle(t *testing.T) {
	t.Parallel()
	filler := strings.Repeat("x", 40<<10) // content far larger than what a meter keeps
	v := settleVendor(t, map[string]string{
		"/openai":  `{"id":"c1","choices":[{"message":{"content":"` + filler + `"}}],"usage":{"prompt_tokens":60,"completion_tokens":40,"total_tokens":100},"system_fingerprint":"fp"}`,
		"/shopify": `{"data":{"products":{"edges":[]}},"extensions":{"cost":{"requestedQueryCost":500,"actualQueryCost":2.5,"throttleStatus":{"maximumAvailable":1000.0}}}}`,
	})
	var tr *throttle.Transport // a fresh one, with its own store, per scenario
	get := func(ctx context.Context, path string, costs map[string]int64, read int) error {
		t.Helper()
		return settleGet(ctx, tr, v.URL+path, costs, read)
	}
	admitted := func(ctx context.Context, what, path string, costs map[string]int64, read int) {
		t.Helper()
		if err := get(ctx, path, costs, read); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	refused := func(what string, costs map[string]int64) {
		t.Helper()
		var le *throttle.LimitError
		if err := get(context.Background(), "/none", costs, 0); !errors.As(err, &le) {
			t.Fatalf("%s: %v, want refused", what, err)
		}
	}
	tr, _ = e2eTransport(t, settleYAML, v.Host())
	openai := throttle.WithSettle(context.Background(), throttle.OpenAIUsage("tpm"))
	admitted(openai, "900 reserved, 100 used", "/openai", map[string]int64{"tpm": 900}, -1)
	admitted(openai, "900 more: the 800 unused came back", "/openai", map[string]int64{"tpm": 900}, 10)
	refused("that body was closed early: nothing settled, its 900 stay", map[string]int64{"tpm": 1})

	// Shopify: 500 requested, 2.5 actual (3, rounded up); a hook of one's
	// own works the same way.
	tr, _ = e2eTransport(t, settleYAML, v.Host())
	shopify := throttle.WithSettle(context.Background(), throttle.ShopifyQueryCost("input"))
	admitted(shopify, "a query of requested cost 500", "/shopify", map[string]int64{"input": 500}, -1)
	admitted(context.Background(), "997 left", "/none", map[string]int64{"input": 997}, 0)
	refused("all used", map[string]int64{"input": 1})
}

// TestSettleStreams: OpenAI's final usage chunk and Anthropic's
// message_start and message_delta events settle a stream when it ends;
// an excess is a debt.
func TestSettleStreams(t *testing.T) {
	t.Parallel()
	filler := strings.Repeat("x", 100<<10) // a delta longer than a meter keeps
	v := settleVendor(t, map[string]string{
		"/openai-stream": "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n" +
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":500,\"completion_tokens\":400,\"total_tokens\":900}}\n\n" +
			"data: [DONE]\n\n",
		"/anthropic-stream": "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":50,\"cache_creation_input_tokens\":10,\"cache_read_input_tokens\":300,\"output_tokens\":1}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"" + filler + "\",\"usage\":1}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":20}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":30}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	})
	var tr *throttle.Transport // a fresh one, with its own store, per scenario
	do := func(ctx context.Context, path string, costs map[string]int64) error {
		t.Helper()
		for name, n := range costs {
			ctx = throttle.WithLimitCost(ctx, name, n)
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", v.URL+path, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	must := func(err error, what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	refunds := &recorder{}
	tr, _ = e2eTransport(t, settleYAML, v.Host(), throttle.WithObserver(refunds))
	anthropic := throttle.WithSettle(context.Background(), throttle.AnthropicUsage("input", "output"))
	must(do(anthropic, "/anthropic-stream", map[string]int64{"input": 100, "output": 450}), "Anthropic, 100 in and 450 out reserved")
	deltas := map[string]int64{}
	for _, e := range refunds.snapshot() {
		if e.Kind == throttle.Settled {
			deltas[e.Limit] += e.Delta
		}
	}
	if len(deltas) != 2 || deltas["input"] != -40 || deltas["output"] != -420 {
		t.Errorf("Settled deltas %v, want input -40 and output -420 (refunds)", deltas)
	}
	// Used: 60 in (50 + 10 written to the cache; reads do not count), 30 out.
	must(do(context.Background(), "/none", map[string]int64{"input": 940, "output": 470}), "the unused input and output came back")
	if err := do(context.Background(), "/none", map[string]int64{"input": 1, "output": 1}); !errors.Is(err, throttle.ErrLimited) {
		t.Fatalf("after both were used up: %v, want refused", err)
	}

	obs := &recorder{}
	tr, _ = e2eTransport(t, settleYAML, v.Host(), throttle.WithObserver(obs))
	openai := throttle.WithSettle(context.Background(), throttle.OpenAIUsage("tpm"))
	must(do(openai, "/openai-stream", map[string]int64{"tpm": 100}), "OpenAI, 100 reserved")
	var settled []throttle.Event
	for _, e := range obs.snapshot() {
		if e.Kind == throttle.Settled {
			settled = append(settled, e)
		}
	}
	if len(settled) != 1 || settled[0].Provider != "model" || settled[0].Limit != "tpm" || settled[0].Delta != 800 {
		t.Errorf("Settled events %+v, want one of tpm with delta 800 (the other limits kept their estimates)", settled)
	}
	// Used 900: 800 more than reserved, a debt.
	var le *throttle.LimitError
	if err := do(context.Background(), "/none", map[string]int64{"tpm": 200}); !errors.As(err, &le) || le.Limit != "tpm" {
		t.Fatalf("200 more after the stream used 900 of 1000: %v, want refused by tpm", err)
	}
}

// TestSettleConfigured: a provider's settle field settles like WithSettle,
// with no code on the request (the proxy's and an SDK's case); a route's
// replaces it; a Settler on the context takes precedence.
func TestSettleConfigured(t *testing.T) {
	t.Parallel()
	v := settleVendor(t, map[string]string{
		"/openai":  `{"usage":{"prompt_tokens":60,"completion_tokens":40,"total_tokens":100}}`,
		"/shopify": `{"data":{},"extensions":{"cost":{"requestedQueryCost":500,"actualQueryCost":2.5}}}`,
	})
	const yaml = `
providers:
  model:
    hosts: ["HOST"]
    on_limit: fail
    limits:
      - {name: tpm, limit: 1000/h}
      - {name: input, limit: 1000/h}
    settle: {format: openai, usage: {tokens: tpm}}
    routes:
      - name: graphql
        path: /shopify
        settle: {format: shopify-graphql, usage: {cost: input}}
`
	tr, _ := e2eTransport(t, yaml, v.Host())
	get := func(ctx context.Context, path string, costs map[string]int64) error {
		t.Helper()
		return settleGet(ctx, tr, v.URL+path, costs, -1)
	}
	ctx := context.Background()
	for _, step := range []struct {
		what  string
		ctx   context.Context
		path  string
		costs map[string]int64
		ok    bool
	}{
		{"openai: 900 reserved, 100 used", ctx, "/openai", map[string]int64{"tpm": 900}, true},
		{"the 800 unused came back", ctx, "/none", map[string]int64{"tpm": 900}, true},
		{"tpm all used", ctx, "/none", map[string]int64{"tpm": 1}, false},
		{"fresh store", nil, "", nil, true},
		{"route: 500 requested, 3 used", ctx, "/shopify", map[string]int64{"input": 500}, true},
		{"497 came back: 997 left", ctx, "/none", map[string]int64{"input": 997}, true},
		{"input all used", ctx, "/none", map[string]int64{"input": 1}, false},
	} {
		if step.ctx == nil {
			tr, _ = e2eTransport(t, yaml, v.Host())
			continue
		}
		err := get(step.ctx, step.path, step.costs)
		var le *throttle.LimitError
		switch {
		case step.ok && err != nil:
			t.Fatalf("%s: %v", step.what, err)
		case !step.ok && !errors.As(err, &le):
			t.Fatalf("%s: %v, want refused", step.what, err)
		}
	}

	// A context's Settler wins over the field: this one settles nothing.
	tr, _ = e2eTransport(t, yaml, v.Host())
	none := throttle.WithSettle(ctx, func(*http.Response) throttle.Meter { return nil })
	if err := get(none, "/openai", map[string]int64{"tpm": 900}); err != nil {
		t.Fatal(err)
	}
	var le *throttle.LimitError
	if err := get(ctx, "/none", map[string]int64{"tpm": 900}); !errors.As(err, &le) {
		t.Fatalf("after a context Settler that settles nothing: %v, want refused", err)
	}
}

// TestSettleHostileUsage is review finding N1: a vendor's response claims
// a billion tokens (or two figures whose sum is above 2^51) on a
// 20000/min limit. The figure is more than the limit admits in a minute,
// so it is malformed: reported as SettleMalformed, not a StoreError, and
// the limit keeps the estimate, in the memory store and in Redis (it was
// refused to the whole fleet for 833 hours).
func TestSettleHostileUsage(t *testing.T) {
	t.Parallel()
	v := settleVendor(t, map[string]string{
		"/huge": `{"usage":{"total_tokens":1000000000}}`,
		"/sum":  `{"usage":{"prompt_tokens":2251799813685247,"completion_tokens":2251799813685247}}`,
	})
	const yaml = `
providers:
  llm:
    hosts: ["HOST"]
    on_limit: fail
    limits: [{name: tpm, limit: 20000/min burst 10000}]
    settle: {format: openai, usage: {tokens: tpm}}
`
	srv := redistest.Start(t)
	rs, err := redisstore.New(srv.Client(t), redisstore.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, store := range []struct {
		name string
		opts []throttle.Option
	}{{"memory", nil}, {"redis", []throttle.Option{throttle.WithStore(rs)}}} {
		rec := &recorder{}
		tr, _ := e2eTransport(t, yaml, v.Host(), append(store.opts, throttle.WithObserver(rec))...)
		ctx := context.Background()
		for _, path := range []string{"/huge", "/sum"} {
			if err := settleGet(ctx, tr, v.URL+path, map[string]int64{"tpm": 100}, -1); err != nil {
				t.Fatalf("%s %s: %v", store.name, path, err)
			}
		}
		// 200 of the burst of 10000 reserved: the rest is still there.
		if err := settleGet(ctx, tr, v.URL+"/none", map[string]int64{"tpm": 9800}, -1); err != nil {
			t.Errorf("%s: after the hostile figures: %v, want the 9800 left admitted", store.name, err)
		}
		var malformed []int64
		for _, e := range rec.snapshot() {
			switch e.Kind {
			case throttle.SettleMalformed:
				if e.Limit != "tpm" {
					t.Errorf("%s: SettleMalformed names limit %q, want tpm", store.name, e.Limit)
				}
				malformed = append(malformed, e.Delta)
			case throttle.StoreError, throttle.Settled:
				t.Errorf("%s: %v event (%v), want none", store.name, e.Kind, e.Err)
			}
		}
		if want := []int64{1_000_000_000 - 100, 2*2251799813685247 - 100}; !slices.Equal(malformed, want) {
			t.Errorf("%s: SettleMalformed deltas %v, want %v", store.name, malformed, want)
		}
	}
}
