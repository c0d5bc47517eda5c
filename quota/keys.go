package quota

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxPart is the longest key part kept as it is. Longer values are hashed,
// so no caller can make a key (or the memory it costs) large.
const maxPart = 64

// SafePart returns s unchanged when it is short and made only of ASCII
// letters, digits and "-_.@+=/", and otherwise "#" followed by the hex
// SHA-256 of s (truncated to 128 bits). "#" is outside the safe set, so a
// hashed value can never equal a value kept as it is, and no value can
// carry a brace, colon, newline or invalid UTF-8 into a key. Scope values
// come from callers and headers: always pass them through SafePart.
func SafePart(s string) string {
	if isSafe(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "#" + hex.EncodeToString(sum[:16])
}

func isSafe(s string) bool {
	if len(s) == 0 || len(s) > maxPart {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == '@', c == '+', c == '=', c == '/':
		default:
			return false
		}
	}
	return true
}

// KeyOf returns the key of a limit's state for one scope value: the name
// alone for a limit without scope (scope ""), else name ":" SafePart(scope).
func KeyOf(name, scope string) string {
	name = SafePart(name)
	if scope == "" {
		return name
	}
	return name + ":" + SafePart(scope)
}

// maxTag is the longest tag kept as it is: a provider name and one scope
// part.
const maxTag = 2*maxPart + 1

// SafeTag returns tag unchanged when it is short and made of parts joined
// by ":", each a value SafePart keeps or a hash SafePart made, as the
// providers package builds them ("shopify", "shopify:store-9.example.com",
// "stripe:#3f…"); otherwise SafePart(tag). Stores apply it to every
// Request.Tag: a tag can then hold no brace (it is a Redis Cluster hash
// tag) and is bounded, and a per-tenant tag stays readable in Redis.
func SafeTag(tag string) string {
	if len(tag) == 0 || len(tag) > maxTag {
		return SafePart(tag)
	}
	for rest := tag; ; {
		part, after, more := strings.Cut(rest, ":")
		if !isSafe(part) && !isHash(part) {
			return SafePart(tag)
		}
		if !more {
			return tag
		}
		rest = after
	}
}

// isHash reports whether s is a hash SafePart made: "#" and 32 lower-case
// hex digits.
func isHash(s string) bool {
	if len(s) != 33 || s[0] != '#' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
