// Package hotpath holds Go benchmarks of throttle's hot paths that its own
// packages do not have (reading a vendor's throttling headers); the
// others (decision, registry lookup, transport overhead) live next to the
// code and are run from bench/README.md's command.
package hotpath
