package throttle

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"mime"
	"net/http"

	"github.com/fleetquota/throttle/providers"
	"github.com/fleetquota/throttle/quota"
)

// A Settler reads what a request actually cost from its response, for
// limits whose cost is only known afterwards: a model API's tokens, a
// GraphQL query's actual cost. The request reserves an estimate (its
// route's cost, WithCost, WithLimitCost: the max_tokens it asked for);
// once the caller has read the response body to its end, the transport
// settles the actual costs in one round trip (quota.Reservation.Settle):
// an excess is charged as a debt that delays the next requests, a refund
// comes back when it safely can. A body closed before its end settles
// nothing: the estimate stays charged.
//
// The Settler is called with the response before the caller gets it and
// returns the Meter that will see the body, or nil when there is nothing
// to settle. It must not read the body itself.
type Settler func(resp *http.Response) Meter

// A Meter sees a response body as it passes to the caller, so that no
// body is buffered or taken from the caller, a stream included.
type Meter interface {
	// Write is given each chunk the caller reads, in order. It must not
	// keep p.
	Write(p []byte) (int, error)
	// Costs is called once the body has been read to its end: the actual
	// cost per limit name. Limits it does not name keep their estimate;
	// nil settles nothing.
	Costs() map[string]int64
}

// WithSettle returns a context whose requests settle their actual costs
// with s (see Settler), e.g. WithSettle(ctx, OpenAIUsage("tpm")). It takes
// precedence over the provider's settle field, which configures the same
// built-in Settlers without code (docs/configuration.md, "settle").
func WithSettle(ctx context.Context, s Settler) context.Context {
	return context.WithValue(ctx, settlerKey, s)
}

func settlerFrom(ctx context.Context) Settler {
	s, _ := ctx.Value(settlerKey).(Settler)
	return s
}

// settlerOf returns the built-in Settler that a provider's or route's
// settle field names (providers.Settle), for requests whose context
// carries none.
func settlerOf(s *providers.Settle) Settler {
	switch s.Format {
	case providers.SettleOpenAI:
		return OpenAIUsage(s.Usage["tokens"])
	case providers.SettleAnthropic:
		return AnthropicUsage(s.Usage["input"], s.Usage["output"])
	case providers.SettleShopifyGraphQL:
		return ShopifyQueryCost(s.Usage["cost"])
	}
	return nil
}

// OpenAIUsage settles the limit named tokens (a tokens-per-minute limit)
// from the usage of an OpenAI response: total_tokens (else prompt_tokens +
// completion_tokens) of a JSON response's "usage", or of a stream's final
// chunk, which OpenAI sends when the request sets stream_options
// {"include_usage": true}. A stream without it settles nothing.
func OpenAIUsage(tokens string) Settler {
	return usageSettler(func(u *usage) map[string]int64 {
		switch {
		case u.TotalTokens != nil:
			return map[string]int64{tokens: *u.TotalTokens}
		case u.PromptTokens != nil && u.CompletionTokens != nil:
			return map[string]int64{tokens: *u.PromptTokens + *u.CompletionTokens}
		}
		return nil
	})
}

// AnthropicUsage settles the limits named input and output (Anthropic's
// input and output tokens per minute; either may be "") from the usage of
// an Anthropic Messages response: "usage" of a JSON response; in a stream,
// message_start's message.usage and then each message_delta's usage, whose
// counts are cumulative (the latest wins). Input counts input_tokens plus
// cache_creation_input_tokens: cache reads do not count towards
// Anthropic's input limit.
func AnthropicUsage(input, output string) Settler {
	return usageSettler(func(u *usage) map[string]int64 {
		costs := map[string]int64{}
		if input != "" && u.InputTokens != nil {
			costs[input] = *u.InputTokens
			if u.CacheCreationInputTokens != nil {
				costs[input] += *u.CacheCreationInputTokens
			}
		}
		if output != "" && u.OutputTokens != nil {
			costs[output] = *u.OutputTokens
		}
		if len(costs) == 0 {
			return nil
		}
		return costs
	})
}

// ShopifyQueryCost settles the limit named limit (the GraphQL cost bucket)
// from extensions.cost.actualQueryCost of a Shopify GraphQL response,
// rounded up.
func ShopifyQueryCost(limit string) Settler {
	return func(resp *http.Response) Meter {
		return &jsonMeter{key: `"actualQueryCost"`, costs: func(v json.RawMessage) map[string]int64 {
			var f float64
			if json.Unmarshal(v, &f) != nil || f < 0 || f > quota.MaxExact {
				return nil
			}
			return map[string]int64{limit: int64(math.Ceil(f))}
		}}
	}
}

// usage holds the token counts of OpenAI's and Anthropic's usage objects.
type usage struct {
	PromptTokens             *int64 `json:"prompt_tokens"`
	CompletionTokens         *int64 `json:"completion_tokens"`
	TotalTokens              *int64 `json:"total_tokens"`
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
}

// merge takes the counts v has; later events win.
func (u *usage) merge(v *usage) {
	for _, f := range [...]struct{ dst, src **int64 }{
		{&u.PromptTokens, &v.PromptTokens}, {&u.CompletionTokens, &v.CompletionTokens},
		{&u.TotalTokens, &v.TotalTokens}, {&u.InputTokens, &v.InputTokens},
		{&u.OutputTokens, &v.OutputTokens}, {&u.CacheCreationInputTokens, &v.CacheCreationInputTokens},
	} {
		if *f.src != nil && **f.src >= 0 && **f.src <= quota.MaxExact {
			*f.dst = *f.src
		}
	}
}

// usageSettler meters an OpenAI or Anthropic response: a server-sent event
// stream event by event, any other body by its tail.
func usageSettler(costs func(*usage) map[string]int64) Settler {
	return func(resp *http.Response) Meter {
		ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if ct == "text/event-stream" {
			return &sseMeter{costs: costs}
		}
		return &jsonMeter{key: `"usage"`, costs: func(v json.RawMessage) map[string]int64 {
			var u usage
			if json.Unmarshal(v, &u) != nil {
				return nil
			}
			var got usage
			got.merge(&u)
			return costs(&got)
		}}
	}
}

// tailSize is how much of the end of a JSON body a jsonMeter keeps: the
// usage object (and Shopify's extensions) come last, after the content,
// and are far smaller.
const tailSize = 16 << 10

// jsonMeter keeps the last tailSize bytes of a JSON body and, at its end,
// decodes the value of the last occurrence of key in them.
type jsonMeter struct {
	key   string
	tail  []byte
	costs func(json.RawMessage) map[string]int64
}

func (m *jsonMeter) Write(p []byte) (int, error) {
	m.tail = append(m.tail, p...)
	if len(m.tail) > 2*tailSize { // amortized: drop all but the tail
		m.tail = append(m.tail[:0], m.tail[len(m.tail)-tailSize:]...)
	}
	return len(p), nil
}

func (m *jsonMeter) Costs() map[string]int64 {
	i := bytes.LastIndex(m.tail, []byte(m.key))
	if i < 0 {
		return nil
	}
	rest := bytes.TrimLeft(m.tail[i+len(m.key):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return nil
	}
	var v json.RawMessage
	if json.NewDecoder(bytes.NewReader(rest[1:])).Decode(&v) != nil {
		return nil
	}
	return m.costs(v)
}

// maxEventLine bounds a server-sent event line a sseMeter keeps; a longer
// one (a large content delta) is skipped, since usage events are small.
const maxEventLine = 64 << 10

// sseMeter reads a server-sent event stream line by line, keeping only the
// current line, and merges the usage of every data line that has one.
type sseMeter struct {
	line  []byte
	skip  bool // the current line is over maxEventLine
	u     usage
	seen  bool
	costs func(*usage) map[string]int64
}

func (m *sseMeter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !m.skip {
			if len(m.line)+len(chunk) > maxEventLine {
				m.skip, m.line = true, m.line[:0]
			} else {
				m.line = append(m.line, chunk...)
			}
		}
		if i < 0 {
			break
		}
		if !m.skip {
			m.event(bytes.TrimSuffix(m.line, []byte("\r")))
		}
		m.line, m.skip, p = m.line[:0], false, p[i+1:]
	}
	return n, nil
}

// event takes the usage of one "data:" line: OpenAI's chunk usage,
// Anthropic's message_delta usage or message_start message.usage.
func (m *sseMeter) event(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(`"usage"`)) {
		return
	}
	var e struct {
		Usage   *usage `json:"usage"`
		Message *struct {
			Usage *usage `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(bytes.TrimSpace(data), &e) != nil {
		return
	}
	if e.Message != nil && e.Message.Usage != nil {
		m.u.merge(e.Message.Usage)
		m.seen = true
	}
	if e.Usage != nil {
		m.u.merge(e.Usage)
		m.seen = true
	}
}

func (m *sseMeter) Costs() map[string]int64 {
	if len(m.line) > 0 && !m.skip { // a last line without its newline
		m.event(m.line)
	}
	if !m.seen {
		return nil
	}
	return m.costs(&m.u)
}

// meteredBody feeds a Meter what the caller reads and settles the
// request's reservation when the body reaches its end.
type meteredBody struct {
	io.ReadCloser
	m      Meter
	settle func(map[string]int64)
	done   bool
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.done {
		return n, err
	}
	if n > 0 {
		_, _ = b.m.Write(p[:n])
	}
	if err == io.EOF {
		b.done = true
		if costs := b.m.Costs(); costs != nil {
			b.settle(costs)
		}
	} else if err != nil {
		b.done = true // cut short: the usage is unknown, the estimate stays
	}
	return n, err
}

// settleFunc returns what a meteredBody calls at the end of the body:
// Settle of rsv with the actual costs by limit name.
func (t *Transport) settleFunc(ctx context.Context, provider string, q *quota.Request, rsv *quota.Reservation) func(map[string]int64) {
	names := make([]string, len(q.Items))
	estimates := make([]int64, len(q.Items))
	rates := make([]int64, len(q.Items)) // as decided: a learning limit at its learned rate
	for i, it := range q.Items {
		names[i] = it.Limit.Name
		estimates[i] = -1 // not settled: the estimate stays (quota.Reservation.Settle)
		if k := it.Limit.Kind; k == quota.GCRA || k == quota.Window {
			estimates[i] = q.CostOf(i)
			rates[i] = it.Limit.Learned(rsv.Limits[i].Rate).Rate
		}
	}
	ctx = context.WithoutCancel(ctx)
	return func(costs map[string]int64) {
		actual := make([]int64, len(names))
		any := false
		for i, name := range names {
			actual[i] = -1
			c, ok := costs[name]
			if !ok || c < 0 {
				continue
			}
			// The store keeps the estimate for such a figure too; this
			// says so (a sum of two figures may even be above 2^51).
			if estimates[i] >= 0 && quota.Implausible(c, rates[i]) {
				t.observe(ctx, Event{Kind: SettleMalformed, Provider: provider, Limit: name, Delta: c - estimates[i]})
				continue
			}
			actual[i], any = c, true
		}
		if !any {
			return
		}
		if err := rsv.Settle(ctx, actual); err != nil {
			t.observe(ctx, Event{Kind: StoreError, Provider: provider, Err: err})
			return
		}
		for i, c := range actual {
			if c >= 0 && estimates[i] >= 0 && c != estimates[i] {
				t.observe(ctx, Event{Kind: Settled, Provider: provider, Limit: names[i], Delta: c - estimates[i]})
			}
		}
	}
}
