//go:build !linux

package fleet

import "syscall"

// childAttr puts a child in its own process group, so that an interrupt
// of the harness reaches it only through the harness.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
