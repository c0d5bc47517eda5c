package fleet

import "syscall"

// childAttr puts a child in its own process group (an interrupt of the
// harness reaches it only through the harness, which stops it in order)
// and kills it if the harness dies first.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
