package backoff

import (
	"bytes"
	"encoding/json"
	"math"
	"mime"
	"net/http"
)

// This file reads what a request actually cost from its response body, as
// vendors report it: a model API's tokens, a GraphQL query's cost. A Meter
// sees the body as it passes to the caller, so no body is buffered or
// taken from the caller, a stream included; it keeps only what it needs.

// A Meter sees a response body as it passes to the caller and, at its
// end, says what the request actually cost.
type Meter interface {
	// Write is given each chunk the caller reads, in order. It must not
	// keep p.
	Write(p []byte) (int, error)
	// Costs is called once the body has been read to its end: the actual
	// cost per limit name. Limits it does not name keep their estimate;
	// nil settles nothing.
	Costs() map[string]int64
}

// maxUsage is the largest figure a meter reports: the largest count a
// quota store keeps exact (quota.MaxExact). A larger one is malformed.
const maxUsage = 1 << 51

// OpenAIUsage meters resp for the limit named tokens (a tokens-per-minute
// limit): total_tokens (else prompt_tokens + completion_tokens) of a JSON
// response's "usage", or of a stream's final chunk, which OpenAI sends
// when the request sets stream_options {"include_usage": true}. A stream
// without it reports nothing.
func OpenAIUsage(resp *http.Response, tokens string) Meter {
	return usageMeter(resp, func(u *usage) map[string]int64 {
		switch {
		case u.TotalTokens != nil:
			return map[string]int64{tokens: *u.TotalTokens}
		case u.PromptTokens != nil && u.CompletionTokens != nil:
			return map[string]int64{tokens: *u.PromptTokens + *u.CompletionTokens}
		}
		return nil
	})
}

// AnthropicUsage meters resp for the limits named input and output
// (Anthropic's input and output tokens per minute; either may be "") from
// the usage of a Messages response: "usage" of a JSON response; in a
// stream, message_start's message.usage and then each message_delta's
// usage, whose counts are cumulative (the latest wins). Input counts
// input_tokens plus cache_creation_input_tokens: cache reads do not count
// towards Anthropic's input limit.
func AnthropicUsage(resp *http.Response, input, output string) Meter {
	return usageMeter(resp, func(u *usage) map[string]int64 {
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

// ShopifyQueryCost meters a Shopify GraphQL response for the limit named
// limit (the GraphQL cost bucket): extensions.cost.actualQueryCost,
// rounded up.
func ShopifyQueryCost(limit string) Meter {
	return &jsonMeter{key: `"actualQueryCost"`, costs: func(v json.RawMessage) map[string]int64 {
		var f float64
		if json.Unmarshal(v, &f) != nil || f < 0 || f > maxUsage {
			return nil
		}
		return map[string]int64{limit: int64(math.Ceil(f))}
	}}
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
		if *f.src != nil && **f.src >= 0 && **f.src <= maxUsage {
			*f.dst = *f.src
		}
	}
}

// usageMeter meters an OpenAI or Anthropic response: a server-sent event
// stream event by event, any other body by its tail.
func usageMeter(resp *http.Response, costs func(*usage) map[string]int64) Meter {
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
