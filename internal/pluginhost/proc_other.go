//go:build !linux

package pluginhost

import (
	"os"
	"syscall"
)

// sysProcAttr: without a parent-death signal, plugins rely on the sdk's
// parent watch to exit when the host dies.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// killGroup kills the plugin (no process groups here).
func killGroup(pid int) error {
	if pid <= 0 {
		return nil
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	return p.Kill()
}

// limitMapped: no RLIMIT_DATA here, and no /proc for residentBytes: a
// plugin's memory is bounded on Linux only (docs/config.md).
func limitMapped(int, int64) error { return nil }

func residentBytes(int) int64 { return 0 }

func groupMembers(int) []int { return nil }

func awaitExit(int) {}

// pauseGroup: a plugin's CPU is bounded on Linux only (procfs reads
// nothing elsewhere).
func pauseGroup(int, bool) error { return nil }

func peakResident(*os.ProcessState) int64 { return 0 }
