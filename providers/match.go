package providers

import (
	"path"
	"strconv"
	"strings"
)

// maxHostLen bounds the host names looked up; longer ones match nothing.
// It is above the longest pattern Load accepts: 253 characters, a
// trailing dot, brackets and a port.
const maxHostLen = 272

// splitHostPort splits "host", "host:port", "[v6]" or "[v6]:port" without
// allocating. A bare IPv6 address (more than one colon, no brackets) is
// all host.
func splitHostPort(s string) (host, port string) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return s, ""
		}
		host, rest := s[1:end], s[end+1:]
		if strings.HasPrefix(rest, ":") {
			return host, rest[1:]
		}
		return host, ""
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 || strings.IndexByte(s, ':') != i {
		return s, ""
	}
	return s[:i], s[i+1:]
}

// hostIndex finds a provider by host in time that depends on the number of
// labels of the host, not on the number of providers.
type hostIndex struct {
	// exact maps "host" and "host:port" to the provider.
	exact map[string]*Provider
	// wild maps ".suffix" and ".suffix:port" of a "*.suffix" pattern.
	wild map[string]*Provider
}

// lookup returns the provider of a request host ("host[:port]") and scheme.
// The most specific pattern wins: an exact host with the port, an exact
// host, then wildcards from the longest suffix, each with the port first.
func (ix *hostIndex) lookup(hostport, scheme string) *Provider {
	if len(hostport) == 0 || len(hostport) > maxHostLen {
		return nil
	}
	var buf [maxHostLen + 8]byte
	host, port := splitHostPort(hostport)
	if port == "" {
		switch scheme {
		case "https", "wss":
			port = "443"
		case "http", "ws":
			port = "80"
		}
	}
	b := append(buf[:0], foldHost(host)...)
	hlen := len(b)
	if port != "" {
		b = append(b, ':')
		b = append(b, port...)
	}
	if port != "" {
		if p := ix.exact[string(b)]; p != nil {
			return p
		}
	}
	if p := ix.exact[string(b[:hlen])]; p != nil {
		return p
	}
	if len(ix.wild) == 0 {
		return nil
	}
	for i := 0; i < hlen; i++ {
		if b[i] != '.' {
			continue
		}
		if port != "" {
			if p := ix.wild[string(b[i:])]; p != nil {
				return p
			}
		}
		if p := ix.wild[string(b[i:hlen])]; p != nil {
			return p
		}
	}
	return nil
}

// foldHost returns a host name as every rule compares it: ASCII lower
// case (host names on the wire are ASCII; IDNs travel as punycode),
// without a final dot. A host already folded comes back as it is, so a
// request's host costs no allocation.
func foldHost(host string) string {
	host = strings.TrimSuffix(host, ".")
	for i := 0; i < len(host); i++ {
		if 'A' <= host[i] && host[i] <= 'Z' {
			b := []byte(host)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return host
}

// normalizeHost checks a configured host pattern and returns its index key
// and whether it is a wildcard. The key is lower case, without a trailing
// dot; a wildcard's key is its suffix with the leading dot.
func normalizeHost(s string) (key string, wild bool, msg string) {
	const valid = `want a host name ("api.example.com"), a wildcard ("*.example.com") or either with a port (":8443")`
	if s == "" {
		return "", false, "empty host: " + valid
	}
	if strings.Contains(s, "/") {
		return "", false, "invalid host " + quote(s) + ": a host is a name, not a URL; " + valid
	}
	host, port := splitHostPort(s)
	if port != "" || strings.HasSuffix(s, ":") {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return "", false, "invalid port " + quote(port) + " in host " + quote(s) + ": want 1-65535"
		}
	}
	host = foldHost(host)
	if strings.HasPrefix(host, "*.") {
		wild = true
		host = host[2:]
	}
	if host == "" || len(host) > 253 {
		return "", false, "invalid host " + quote(s) + ": " + valid
	}
	if strings.HasPrefix(s, "[") {
		if wild {
			return "", false, "invalid host " + quote(s) + ": an IP address cannot be a wildcard"
		}
		for i := 0; i < len(host); i++ {
			c := host[i]
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || c == ':' || c == '.') {
				return "", false, "invalid IPv6 address in host " + quote(s)
			}
		}
	} else {
		for _, label := range strings.Split(host, ".") {
			if label == "" || len(label) > 63 {
				return "", false, "invalid host " + quote(s) + ": empty or over-long label; " + valid
			}
			for i := 0; i < len(label); i++ {
				c := label[i]
				if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
					return "", false, "invalid host " + quote(s) + ": " + strconv.QuoteRune(rune(c)) + " is not allowed (a wildcard is only a leading \"*.\"); " + valid
				}
			}
		}
	}
	key = host
	if wild {
		key = "." + host
	}
	if port != "" {
		key += ":" + port
	}
	return key, wild, ""
}

// segKind is the kind of one segment of a route's path pattern.
type segKind uint8

const (
	segLit  segKind = iota // matches itself
	segOne                 // "*" or "{name}": one non-empty segment
	segRest                // "**", last: the rest of the path, maybe nothing
)

type segment struct {
	kind segKind
	lit  string
}

// parsePattern splits a route's path pattern into segments.
func parsePattern(p string) ([]segment, string) {
	const valid = `want a path starting with "/" whose segments are literals, "*" or "{name}" (one segment) or a final "**" (the rest), e.g. "/search/*" or "/repos/{owner}/{repo}/**"`
	if !strings.HasPrefix(p, "/") {
		return nil, "path " + quote(p) + " does not start with \"/\": " + valid
	}
	p = strings.TrimSuffix(p[1:], "/")
	if p == "" {
		return []segment{}, ""
	}
	parts := strings.Split(p, "/")
	segs := make([]segment, 0, len(parts))
	for i, s := range parts {
		switch {
		case s == "":
			return nil, "path has an empty segment (\"//\"): " + valid
		case s == "**":
			if i != len(parts)-1 {
				return nil, "\"**\" must be the last segment: " + valid
			}
			segs = append(segs, segment{kind: segRest})
		case s == "*", len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}' && !strings.ContainsAny(s[1:len(s)-1], "{}*"):
			segs = append(segs, segment{kind: segOne})
		case strings.ContainsAny(s, "*{}"):
			return nil, "segment " + quote(s) + " mixes a wildcard with text; wildcards match whole segments: " + valid
		case strings.ContainsAny(s, "?#"):
			return nil, "segment " + quote(s) + " holds a query or fragment; routes match the path only"
		default:
			segs = append(segs, segment{kind: segLit, lit: s})
		}
	}
	return segs, ""
}

// cleanPath returns the request path routes are matched against: p with
// repeated slashes collapsed and "." and ".." segments resolved, as
// path.Clean does and as vendors' servers (nginx merges slashes) read it,
// so that "/repos//o/r/issues" or "/repos/o/r/x/../issues" cannot slip
// past a route's limits. A trailing slash goes too, which matchPath
// ignores anyway. path.Clean allocates only when it changes something, so
// the usual, already clean path costs nothing. Case is kept: paths are
// matched case-sensitively, as vendors' routers do.
func cleanPath(p string) string {
	if p == "" {
		return p // no path: path.Clean would make it "."
	}
	return path.Clean(p)
}

// matchPath reports whether the request path p matches segs. A single
// trailing slash is ignored.
func matchPath(segs []segment, p string) bool {
	p = strings.TrimPrefix(p, "/")
	if len(p) > 0 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	done := p == ""
	for _, s := range segs {
		if s.kind == segRest {
			return true
		}
		if done {
			return false
		}
		seg := p
		if i := strings.IndexByte(p, '/'); i >= 0 {
			seg, p = p[:i], p[i+1:]
		} else {
			p, done = "", true
		}
		if seg == "" || s.kind == segLit && s.lit != seg {
			return false
		}
	}
	return done
}

// covers reports whether every path that b matches is matched by a.
func covers(a, b []segment) bool {
	for {
		if len(a) > 0 && a[0].kind == segRest {
			return true
		}
		if len(a) == 0 || len(b) == 0 {
			return len(a) == 0 && len(b) == 0
		}
		switch {
		case b[0].kind == segRest:
			return false
		case a[0].kind == segOne:
		case b[0].kind == segLit && a[0].lit == b[0].lit:
		default:
			return false
		}
		a, b = a[1:], b[1:]
	}
}

// methodsCover reports whether method set a (empty: any) includes all of b.
func methodsCover(a, b []string) bool {
	if len(a) == 0 {
		return true
	}
	if len(b) == 0 {
		return false
	}
	for _, m := range b {
		found := false
		for _, n := range a {
			if m == n {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// matchMethod reports whether method is in the set (empty: any).
func matchMethod(set []string, method string) bool {
	if len(set) == 0 {
		return true
	}
	if method == "" {
		method = "GET"
	}
	for _, m := range set {
		if m == method {
			return true
		}
	}
	return false
}
