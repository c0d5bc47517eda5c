// Package snippets holds the test that runs the shell, Python and Procfile
// snippets of README.md and docs/*.md, so that what a newcomer copies from
// them works as written. It has no code of its own: see snippets_test.go
// for the rules a document's code blocks follow.
package snippets
