package providers

import (
	"errors"
	"fmt"
	"strings"
)

// ErrConfig is wrapped by every error that reports a bad configuration, so
// errors.Is(err, ErrConfig) tells a bad file from an unreadable one.
var ErrConfig = errors.New("providers: invalid configuration")

// ErrMissingScope is wrapped by the error Resolve returns when a limit whose
// missing-scope policy is "refuse" has no scope value for the request: no
// business in the Input, no such header, no such label.
var ErrMissingScope = errors.New("providers: missing scope value")

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

// A ConfigError lists every problem found in a configuration, in the order
// of the file. It wraps ErrConfig.
type ConfigError struct {
	// Problems is never empty.
	Problems []Problem
}

// Error lists every problem, one per line.
func (e *ConfigError) Error() string {
	var b strings.Builder
	if len(e.Problems) == 1 {
		b.WriteString("providers: invalid configuration: ")
		b.WriteString(e.Problems[0].String())
		return b.String()
	}
	fmt.Fprintf(&b, "providers: invalid configuration: %d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n\t")
		b.WriteString(p.String())
	}
	return b.String()
}

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }
