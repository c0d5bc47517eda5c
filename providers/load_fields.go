package providers

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return quote(n.Value)
	}
	return "something else"
}

func (l *loader) wrongKind(n *yaml.Node, path, want string) {
	l.add(n, path, "want %s, got %s", want, kindName(n))
}

// fields returns the values of a mapping by key, reporting keys that are
// not known (listing the valid ones), duplicated or not strings. It
// returns nil when n is not a mapping.
func (l *loader) fields(n *yaml.Node, path string, known ...string) map[string]*yaml.Node {
	if n.Kind != yaml.MappingNode {
		l.wrongKind(n, path, "a mapping with fields "+strings.Join(known, ", "))
		return nil
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	lines := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		fp := join(path, k.Value)
		if k.Kind != yaml.ScalarNode {
			l.add(k, path, "a field name must be a string")
			continue
		}
		if line, dup := lines[k.Value]; dup {
			l.add(k, fp, "field %q is already set at line %d", k.Value, line)
			continue
		}
		lines[k.Value] = k.Line
		isKnown := false
		for _, f := range known {
			if f == k.Value {
				isKnown = true
				break
			}
		}
		if !isKnown {
			l.add(k, fp, "unknown field %q: valid fields are %s", k.Value, strings.Join(known, ", "))
			continue
		}
		out[k.Value] = v
	}
	return out
}

// join appends a key from the file to a field path.
func join(path, field string) string {
	if path == "" {
		return pathPart(field)
	}
	return path + "." + pathPart(field)
}

// str returns a scalar's value with ${VAR} expanded.
func (l *loader) str(n *yaml.Node, path, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		l.wrongKind(n, path, want)
		return "", false
	}
	v, err := expand(n.Value, l.lookup)
	if err != nil {
		l.add(n, path, "%v", err)
		return "", false
	}
	return v, true
}

// integer returns a scalar as an integer in [lo, hi].
func (l *loader) integer(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	want := fmt.Sprintf("an integer from %d to %d", lo, hi)
	s, ok := l.str(n, path, want)
	if !ok {
		return 0, false
	}
	v, ok := parseCount(s)
	if !ok && strings.HasPrefix(s, "-") {
		if x, err := strconv.ParseInt(s, 10, 64); err == nil {
			v, ok = x, true
		}
	}
	if !ok || v < lo || v > hi {
		l.add(n, path, "want %s, got %q", want, s)
		return 0, false
	}
	return v, true
}

// duration returns a scalar as a positive Go duration.
func (l *loader) duration(n *yaml.Node, path string, allowZero bool) (time.Duration, bool) {
	want := `a duration such as "30s", "1m30s" or "2h"`
	s, ok := l.str(n, path, want)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d == 0 && !allowZero {
		l.add(n, path, "want %s, got %q", want, s)
		return 0, false
	}
	return d, true
}

// enum returns a scalar that must be one of values.
func (l *loader) enum(n *yaml.Node, path string, values ...string) (int, bool) {
	want := "one of " + strings.Join(values, ", ")
	s, ok := l.str(n, path, want)
	if !ok {
		return 0, false
	}
	for i, v := range values {
		if s == v {
			return i, true
		}
	}
	l.add(n, path, "want %s, got %q", want, s)
	return 0, false
}

// list returns the items of a sequence.
func (l *loader) list(n *yaml.Node, path, want string) ([]*yaml.Node, bool) {
	if n.Kind != yaml.SequenceNode {
		l.wrongKind(n, path, want)
		return nil, false
	}
	return n.Content, true
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

const nameRule = "want lower-case letters, digits, \"-\" and \"_\", starting with a letter or digit, at most 64 characters"

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

func validName(s string) bool { return nameRE.MatchString(s) }

// header returns a scalar as a canonical header name.
func (l *loader) header(n *yaml.Node, path string) (string, bool) {
	s, ok := l.str(n, path, "a header name")
	if !ok {
		return "", false
	}
	if !validToken(s) {
		l.add(n, path, "invalid header name %q: want letters, digits and -", s)
		return "", false
	}
	return http.CanonicalHeaderKey(s), true
}

func validToken(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
