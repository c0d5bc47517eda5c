//go:build linux

package quota_test

import (
	"syscall"
	"time"
	"unsafe"
)

// threadCPU returns the CPU time the calling thread has used, and true; a
// goroutine that calls it twice must be locked to its thread in between.
func threadCPU() (time.Duration, bool) {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano()), errno == 0
}
