//go:build !linux

package quota_test

import "time"

// threadCPU reports false: this system's thread CPU time is not read.
func threadCPU() (time.Duration, bool) { return 0, false }
