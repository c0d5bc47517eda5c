package providers

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/quota"
)

// A Settle says how a vendor's response reports what a request actually
// cost, and which limit each reported figure settles (the "settle" field):
// the request reserves an estimate, and the transport books the actual
// cost once the caller has read the response to its end. It lets a fleet
// settle model APIs' tokens without code: through the proxy, or an SDK
// whose calls cannot carry a context value. A Settler on the request's
// context (throttle.WithSettle) takes precedence.
type Settle struct {
	// Format is how the vendor writes its usage.
	Format SettleFormat
	// Usage maps a figure of the format (SettleFormat.Figures) to the name
	// of a GCRA or calendar-window limit of the stack. Figures not named
	// here are not settled.
	Usage map[string]string
}

// A SettleFormat is a way a vendor reports a request's actual cost in its
// response body.
type SettleFormat uint8

const (
	// SettleOpenAI reads OpenAI's usage: figure "tokens", total_tokens of
	// a JSON response's usage or of a stream's final chunk.
	SettleOpenAI SettleFormat = iota + 1
	// SettleAnthropic reads Anthropic's Messages usage: figures "input"
	// (input_tokens plus cache_creation_input_tokens) and "output".
	SettleAnthropic
	// SettleShopifyGraphQL reads a Shopify GraphQL response's
	// extensions.cost.actualQueryCost: figure "cost".
	SettleShopifyGraphQL
)

// String returns the format's name as written in YAML.
func (f SettleFormat) String() string {
	switch f {
	case SettleOpenAI:
		return "openai"
	case SettleAnthropic:
		return "anthropic"
	case SettleShopifyGraphQL:
		return "shopify-graphql"
	}
	return fmt.Sprintf("SettleFormat(%d)", uint8(f))
}

// Figures lists the figures the format reports, the keys of Settle.Usage.
func (f SettleFormat) Figures() []string {
	switch f {
	case SettleOpenAI:
		return []string{"tokens"}
	case SettleAnthropic:
		return []string{"input", "output"}
	case SettleShopifyGraphQL:
		return []string{"cost"}
	}
	return nil
}

// Meter returns the meter that reads resp's body in s's format for the
// limits s maps its figures to (backoff's usage meters), or nil for a
// format this version does not know.
func (s *Settle) Meter(resp *http.Response) backoff.Meter {
	switch s.Format {
	case SettleOpenAI:
		return backoff.OpenAIUsage(resp, s.Usage["tokens"])
	case SettleAnthropic:
		return backoff.AnthropicUsage(resp, s.Usage["input"], s.Usage["output"])
	case SettleShopifyGraphQL:
		return backoff.ShopifyQueryCost(s.Usage["cost"])
	}
	return nil
}

var settleFormats = []SettleFormat{SettleOpenAI, SettleAnthropic, SettleShopifyGraphQL}

// settle decodes a settle field: the format of the vendor's usage and a
// map from its figures to limits among stacks (what names the limits the
// field may map to). It returns nil after a problem.
func (l *loader) settle(n *yaml.Node, path, what string, stacks ...[]*limitNodes) *Settle {
	f := l.fields(n, path, "format", "usage")
	if f == nil {
		return nil
	}
	names := make([]string, len(settleFormats))
	for i, sf := range settleFormats {
		names[i] = sf.String()
	}
	st := &Settle{}
	fn := f["format"]
	if fn == nil {
		l.add(n, path+".format", "missing: want one of %s", strings.Join(names, ", "))
		return nil
	}
	i, ok := l.enum(fn, path+".format", names...)
	if !ok {
		return nil
	}
	st.Format = settleFormats[i]
	figures := st.Format.Figures()
	want := fmt.Sprintf("a map from %s's figures (%s) to limit names, e.g. {%s: %s}",
		st.Format, strings.Join(figures, ", "), figures[0], "LIMIT")
	un := f["usage"]
	switch {
	case un == nil:
		l.add(n, path+".usage", "missing: want %s", want)
		return nil
	case un.Kind != yaml.MappingNode:
		l.wrongKind(un, path+".usage", want)
		return nil
	case len(un.Content) == 0:
		l.add(un, path+".usage", "empty: want %s", want)
		return nil
	}
	st.Usage = make(map[string]string, len(un.Content)/2)
	good := true
	for i := 0; i+1 < len(un.Content); i += 2 {
		k, v := un.Content[i], un.Content[i+1]
		kp := join(path+".usage", k.Value)
		if k.Kind != yaml.ScalarNode || !slices.Contains(figures, k.Value) {
			l.add(k, path+".usage", "unknown figure %s: %s reports %s", quote(k.Value), st.Format, strings.Join(figures, ", "))
			good = false
			continue
		}
		if _, dup := st.Usage[k.Value]; dup {
			l.add(k, kp, "figure %q is mapped twice", k.Value)
			good = false
			continue
		}
		name, ok := l.str(v, kp, "a limit name")
		if !ok {
			good = false
			continue
		}
		found := limitNamed(name, stacks)
		switch {
		case found == nil:
			l.add(v, kp, "no limit %s in %s: settle maps a figure of the response to a limit of it", quote(name), what)
			good = false
			continue
		case found.Quota.Kind != quota.GCRA && found.Quota.Kind != quota.Window:
			l.add(v, kp, "limit %q is a %s limit, which is not settled: map the figure to a rate or calendar-window limit", name, found.Quota.Kind)
			good = false
			continue
		}
		st.Usage[k.Value] = name
	}
	if !good {
		return nil
	}
	return st
}
