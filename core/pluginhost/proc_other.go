//go:build !linux

package pluginhost

import "syscall"

// sysProcAttr: without a parent-death signal, plugins rely on the sdk's
// parent watch to exit when the host dies.
func sysProcAttr() *syscall.SysProcAttr { return nil }
