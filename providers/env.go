package providers

import (
	"fmt"
	"strings"
)

// expand replaces ${NAME} and ${NAME:-default} in s using lookup. "$$" is a
// literal "$"; a "$" followed by anything else is kept as it is. NAME is
// letters, digits and underscores, not starting with a digit. ${NAME} with
// NAME unset is an error; ${NAME:-default} uses default when NAME is unset
// or empty. Defaults are not expanded again.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
			continue
		case '{':
		default:
			b.WriteByte(c)
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated %s: write ${NAME} or ${NAME:-default} (or $$ for a literal $)", quote(s[i:]))
		}
		body := s[i+2 : i+2+end]
		name, def, hasDef := strings.Cut(body, ":-")
		if !validVarName(name) {
			return "", fmt.Errorf("invalid variable name %s in ${%s}: use letters, digits and _ (not starting with a digit)", quote(name), pathPart(body))
		}
		v, ok := lookup(name)
		switch {
		case hasDef && v == "":
			v = def
		case !ok:
			return "", fmt.Errorf("variable %s is not set: set it or write ${%s:-default}", pathPart(name), pathPart(name))
		}
		b.WriteString(v)
		i += 2 + end + 1
	}
	return b.String(), nil
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
