package providers

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// yamlLine reads the line number out of a YAML syntax error.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// maxSyntaxSearch bounds the bytes syntaxProblem parses again to find
// where a syntax error is: a file's worth of re-parses for a file of a few
// hundred lines, and a bounded cost for a big one, which then gets the line
// yaml.v3 reports.
const maxSyntaxSearch = 16 << 20

// syntaxProblem turns a yaml.v3 syntax error in data into a problem at the
// line and column of what is wrong, naming a tab when one is the cause.
//
// yaml.v3 does not report where it found the problem but where the
// construct around it began (a mapping's first line, counted from 0, for
// errors of structure such as a bad indentation): "line 1" for a key
// misindented on line 40. Parsing stops at the first problem, so the first
// prefix of data, in whole lines from that line on, that fails with the
// same message ends at the line of the problem.
func syntaxProblem(file string, data []byte, err error) Problem {
	msg := err.Error()
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return Problem{File: file, Message: clip(msg, maxMessage)}
	}
	line, _ := strconv.Atoi(m[1])
	if l, ok := failingLine(data, line, m[2]); ok {
		line = l
	}
	p := Problem{File: file, Line: line, Message: "YAML syntax: " + m[2]}
	text := lineText(data, line)
	indent := len(text) - len(strings.TrimLeft(text, " \t"))
	switch tab := strings.IndexByte(text, '\t'); {
	case tab >= 0 && tab < indent:
		p.Column = tab + 1
		p.Message = "YAML syntax: a tab character indents this line; YAML indents with spaces only (" + m[2] + ")"
	case tab >= 0 && strings.Contains(m[2], "cannot start any token"):
		p.Column = tab + 1
		p.Message = "YAML syntax: a tab character where a value or key was expected; use spaces (" + m[2] + ")"
	case strings.Contains(m[2], "expected ',' or ']'") && strings.LastIndexByte(text, '[') >= 0:
		p.Column = strings.LastIndexByte(text, '[') + 1
		p.Message = "YAML syntax: this '[' list is not closed by a ']' (" + m[2] + ")"
	case strings.Contains(m[2], "expected ',' or '}'") && strings.LastIndexByte(text, '{') >= 0:
		p.Column = strings.LastIndexByte(text, '{') + 1
		p.Message = "YAML syntax: this '{' mapping is not closed by a '}' (" + m[2] + ")"
	case indent < len(text):
		p.Column = indent + 1
		if strings.Contains(m[2], "did not find expected key") || strings.Contains(m[2], "expected '-' indicator") {
			p.Message = "YAML syntax: this line's indentation matches no line above it (" + m[2] + ")"
		}
	}
	p.Message = clip(p.Message, maxMessage)
	return p
}

// failingLine returns the first line n, from line on (counted from 1),
// such that data's first n lines fail to parse with message msg; false
// when there is none within maxSyntaxSearch bytes of parsing.
func failingLine(data []byte, line int, msg string) (int, bool) {
	lines := bytes.SplitAfter(data, []byte("\n"))
	line = max(line, 1)
	if line > len(lines) {
		return 0, false
	}
	end := len(bytes.Join(lines[:line-1], nil))
	budget := maxSyntaxSearch
	for n := line; n <= len(lines); n++ {
		end += len(lines[n-1])
		if budget -= end; budget < 0 {
			return 0, false
		}
		var doc yaml.Node
		err := yaml.NewDecoder(bytes.NewReader(data[:end])).Decode(&doc)
		if err != nil && !errors.Is(err, io.EOF) {
			if m := yamlLine.FindStringSubmatch(err.Error()); m != nil && m[2] == msg {
				return n, true
			}
		}
	}
	return 0, false
}

// lineText returns line n of data (counted from 1) without its line
// break; "" when there is none.
func lineText(data []byte, n int) string {
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(data, '\n')
		if j < 0 {
			return ""
		}
		data = data[j+1:]
	}
	if j := bytes.IndexByte(data, '\n'); j >= 0 {
		data = data[:j]
	}
	return strings.TrimSuffix(string(data), "\r")
}
