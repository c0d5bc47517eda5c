package providers

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/fleetquota/throttle/backoff"
	"github.com/fleetquota/throttle/quota"
)

func (l *loader) signals(n *yaml.Node, path string) backoff.Signals {
	var s backoff.Signals
	f := l.fields(n, path, "throttled", "ignore", "delay_headers", "default_delay", "max_delay", "body")
	if f == nil {
		return s
	}
	if r := f["throttled"]; r != nil {
		s.Rules = l.rules(r, path+".throttled")
	}
	if r := f["ignore"]; r != nil {
		s.Ignore = l.rules(r, path+".ignore")
	}
	if r := f["delay_headers"]; r != nil {
		if items, ok := l.list(r, path+".delay_headers", "a list of header names"); ok {
			for i, it := range items {
				if h, ok := l.header(it, index(path+".delay_headers", i)); ok {
					s.DelayHeaders = append(s.DelayHeaders, h)
				}
			}
		}
	}
	if r := f["default_delay"]; r != nil {
		s.DefaultDelay, _ = l.duration(r, path+".default_delay", false)
	}
	if r := f["max_delay"]; r != nil {
		s.MaxDelay, _ = l.duration(r, path+".max_delay", false)
	}
	if r := f["body"]; r != nil {
		if b, ok := l.str(r, path+".body", "a body format"); ok {
			switch b {
			case backoff.BodyDiscord, backoff.BodyOpenAI:
				s.Body = b
			default:
				l.add(r, path+".body", "unknown body format %q: want %s (retry_after and global in a 429's JSON) or %s (insufficient_quota, a billing stop)",
					b, backoff.BodyDiscord, backoff.BodyOpenAI)
			}
		}
	}
	return s
}

func (l *loader) rules(n *yaml.Node, path string) []backoff.Rule {
	items, ok := l.list(n, path, "a list of rules {status, header, header_value, body_contains}")
	if !ok {
		return nil
	}
	var out []backoff.Rule
	for i, it := range items {
		ip := index(path, i)
		f := l.fields(it, ip, "status", "header", "header_value", "body_contains")
		if f == nil {
			continue
		}
		var r backoff.Rule
		good := true
		if s := f["status"]; s == nil {
			l.add(it, ip+".status", "missing: every rule names a status code, e.g. 429")
			good = false
		} else if v, ok := l.integer(s, ip+".status", 100, 599); ok {
			r.Status = int(v)
		} else {
			good = false
		}
		if h := f["header"]; h != nil {
			r.Header, ok = l.header(h, ip+".header")
			good = good && ok
		}
		if h := f["header_value"]; h != nil {
			r.HeaderValue, _ = l.str(h, ip+".header_value", "a header value")
			if f["header"] == nil {
				l.add(h, ip+".header_value", "header_value needs header: the name of the header to compare")
				good = false
			}
		}
		if b := f["body_contains"]; b != nil {
			if r.BodyContains, ok = l.str(b, ip+".body_contains", "a string"); ok && r.BodyContains == "" {
				l.add(b, ip+".body_contains", "empty: want the text the body must contain, or leave the field out")
				good = false
			}
		}
		if good {
			out = append(out, r)
		}
	}
	return out
}

// sync reads a sync field: the format of the vendor's counters and a map
// from counter names to the names of limits among stacks (what names the
// limits the field may map to). It returns nil after a problem.
func (l *loader) sync(n *yaml.Node, path, what string, stacks ...[]*limitNodes) *Sync {
	f := l.fields(n, path, "format", "counters")
	if f == nil {
		return nil
	}
	sc := &Sync{}
	ok := true
	if fn := f["format"]; fn == nil {
		l.add(n, path+".format", "missing: want one of %s", formatList())
		ok = false
	} else if s, good := l.str(fn, path+".format", "a counter format"); !good {
		ok = false
	} else if sc.Format, good = parseFormat(s); !good {
		l.add(fn, path+".format", "unknown counter format %q: want one of %s", s, formatList())
		ok = false
	}
	cn := f["counters"]
	switch {
	case cn == nil:
		l.add(n, path+".counters", "missing: want a map from the vendor's counter names to limit names, e.g. {core: core}")
		return nil
	case cn.Kind != yaml.MappingNode:
		l.wrongKind(cn, path+".counters", "a map from the vendor's counter names to limit names, e.g. {core: core}")
		return nil
	case len(cn.Content) == 0:
		l.add(cn, path+".counters", "empty: map at least one of the vendor's counters to a limit")
		return nil
	}
	sc.Counters = make(map[string]string, len(cn.Content)/2)
	for i := 0; i+1 < len(cn.Content); i += 2 {
		k, v := cn.Content[i], cn.Content[i+1]
		kp := join(path+".counters", k.Value)
		if k.Kind != yaml.ScalarNode || k.Value == "" || len(k.Value) > 64 {
			l.add(k, path+".counters", "want a vendor counter name of 1 to 64 characters")
			ok = false
			continue
		}
		if _, dup := sc.Counters[k.Value]; dup {
			l.add(k, kp, "counter %q is mapped twice", k.Value)
			ok = false
			continue
		}
		name, good := l.str(v, kp, "a limit name")
		if !good {
			ok = false
			continue
		}
		found := limitNamed(name, stacks)
		if found == nil {
			l.add(v, kp, "no limit %q in %s: sync maps a vendor counter to a limit of it", name, what)
			ok = false
			continue
		}
		if found.Quota.Kind == quota.Rolling {
			l.add(v, kp, "limit %q is a rolling window, which sync cannot drain: map the counter to a GCRA or calendar-window limit", name)
			ok = false
			continue
		}
		sc.Counters[k.Value] = name
	}
	if !ok {
		return nil
	}
	return sc
}

// parseFormat returns the counter format named s.
func parseFormat(s string) (backoff.Format, bool) {
	f, err := backoff.ParseFormat(s)
	return f, err == nil
}

// formatList lists the counter formats' names, for errors.
func formatList() string {
	var names []string
	for f := backoff.Format(1); !strings.HasPrefix(f.String(), "Format("); f++ {
		names = append(names, f.String())
	}
	return strings.Join(names, ", ")
}
