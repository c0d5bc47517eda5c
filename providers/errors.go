package providers

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrConfig is wrapped by every error that reports a bad configuration, so
// errors.Is(err, ErrConfig) tells a bad file from an unreadable one.
var ErrConfig = errors.New("providers: invalid configuration")

// ErrMissingScope is wrapped by the error Resolve returns when a limit whose
// missing-scope policy is "refuse" has no scope value for the request: no
// business in the Input, no such header, no such label.
var ErrMissingScope = errors.New("providers: missing scope value")

// ErrKeysMoved is wrapped by the error Registry.Reload returns for a
// configuration that would move a provider's keys to other hash tags: its
// keys field (per_provider, per_tenant) or its tenant scope changed. The
// old configuration stays in use; see AllowMovedKeys.
var ErrKeysMoved = errors.New("providers: the new configuration moves keys to other hash tags")

// A Problem is one thing wrong with a configuration.
type Problem struct {
	// File is the name given to Load (the path for LoadFile).
	File string
	// Line and Column are 1-based; zero when unknown (an empty file; a
	// syntax error has only a line).
	Line, Column int
	// Path is the field path, e.g. "providers.github.limits[1].burst".
	Path string
	// Message says what is wrong and what would be valid.
	Message string
}

// String formats the problem as "file:line:column: path: message" (the
// YAML parser's syntax errors have a line but no column).
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
		if p.Column > 0 {
			fmt.Fprintf(&b, ":%d", p.Column)
		}
	}
	b.WriteString(": ")
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// A ConfigError lists the problems found in a configuration, in the order
// of the file: the first MaxProblems of them, and how many more there are.
// It wraps ErrConfig.
type ConfigError struct {
	// Problems is never empty, and holds at most MaxProblems.
	Problems []Problem
	// More counts the problems found after the last one listed.
	More int
}

// Error lists the problems, one per line, and says how many more there are.
func (e *ConfigError) Error() string {
	var b strings.Builder
	if len(e.Problems) == 1 && e.More == 0 {
		b.WriteString("providers: invalid configuration: ")
		b.WriteString(e.Problems[0].String())
		return b.String()
	}
	fmt.Fprintf(&b, "providers: invalid configuration: %d problems:", len(e.Problems)+e.More)
	for _, p := range e.Problems {
		b.WriteString("\n\t")
		b.WriteString(p.String())
	}
	if e.More > 0 {
		b.WriteString("\n\t")
		b.WriteString(e.MoreLine())
	}
	return b.String()
}

// MoreLine is the line that stands for the problems not listed, e.g.
// "… and 199900 more problems"; empty when every problem is listed.
func (e *ConfigError) MoreLine() string {
	switch e.More {
	case 0:
		return ""
	case 1:
		return "… and 1 more problem"
	}
	return "… and " + strconv.Itoa(e.More) + " more problems"
}

// The bounds on what a ConfigError repeats of its input. A configuration
// is untrusted input, up to maxFileSize bytes: without them, 200,000
// unknown fields made a 39 MB error, and a 3 MB host name was echoed
// whole.
const (
	// MaxProblems is how many problems a ConfigError lists. The first
	// hundred say what is wrong with a file as well as all of them.
	MaxProblems = 100
	// maxEcho is how many bytes of a value from the file a message or a
	// field path repeats: enough to recognise any sensible value.
	maxEcho = 80
	// maxMessage and maxPath bound a whole message and path, for what no
	// value's own bound covers.
	maxMessage = 1024
	maxPath    = 512
)

// clip returns s cut to at most max bytes, on a rune boundary, with "…"
// when something was cut.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// quote is strconv.Quote of at most maxEcho bytes of s: how every message
// repeats a value from the file. Control characters and invalid UTF-8 come
// out escaped.
func quote(s string) string { return strconv.Quote(clip(s, maxEcho)) }

// pathPart is a key from the file as a segment of a field path: at most
// maxEcho bytes, with control characters and invalid UTF-8 escaped but
// no quotes.
func pathPart(s string) string {
	q := quote(s)
	return q[1 : len(q)-1]
}

// echoed is a string argument of a problem's message: with %q it prints as
// quote does, bounded and escaped; with any other verb as it is (a message
// already built from quoted values).
type echoed string

// Format implements fmt.Formatter.
func (e echoed) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		io.WriteString(f, quote(string(e)))
		return
	}
	io.WriteString(f, string(e))
}

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }
