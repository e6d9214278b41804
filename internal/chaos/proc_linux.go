package chaos

import "syscall"

// sysProcAttr puts a child in its own process group (so cleanup can kill it
// with its own children) and has the kernel kill it if the test process
// dies without cleaning up (a `go test -timeout` panic skips deferred
// cleanup).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
