package pluginhost

import "syscall"

// sysProcAttr has the kernel kill a plugin the moment the host dies, even by
// kill -9.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
