//go:build !linux

package chaos

import "syscall"

// sysProcAttr puts a child in its own process group, so cleanup can kill it
// with its own children.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
