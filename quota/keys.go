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

// MaxKeyLen is the longest key or tag SafeKey keeps as it is: a name and
// one scope part.
const MaxKeyLen = 2*maxPart + 1

// SafeKey returns s unchanged when it is at most MaxKeyLen long and made of
// parts joined by ":", each a value SafePart keeps or a hash SafePart
// made: what KeyOf builds for a key, and the providers package for a tag
// ("shopify", "shopify:store-9.example.com", "stripe:#3f…"). Anything else
// becomes SafePart(s). Stores apply it to every tag and key they write, so
// none holds a brace (a tag is a Redis Cluster hash tag) or grows without
// bound, and a per-tenant tag stays readable in Redis.
func SafeKey(s string) string {
	if len(s) == 0 || len(s) > MaxKeyLen {
		return SafePart(s)
	}
	for rest := s; ; {
		part, after, more := strings.Cut(rest, ":")
		if !isSafe(part) && !IsHash(part) {
			return SafePart(s)
		}
		if !more {
			return s
		}
		rest = after
	}
}

// IsHash reports whether s is a hash SafePart made: "#" and 32 lower-case
// hex digits. A tool that reads keys back (an operator typing a value that
// status showed hashed) uses it to take such a part as it is.
func IsHash(s string) bool {
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
