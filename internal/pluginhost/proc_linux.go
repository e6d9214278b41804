package pluginhost

import (
	"errors"
	"syscall"
)

// sysProcAttr has the kernel kill a plugin the moment the host dies, even by
// kill -9, and puts it in a process group of its own: a child the plugin
// forked (holding its stdout open, say) is killed with it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// killGroup kills the plugin's process group: the plugin and anything it
// started. A plugin that has already exited leaves its children behind in
// the group, so this runs whatever the plugin's own state.
func killGroup(pid int) error {
	if pid <= 0 {
		return nil
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
