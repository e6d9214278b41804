package pluginhost

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/notifyd/notifyd/internal/procfs"
)

// sysProcAttr has the kernel kill a plugin the moment the host dies, even by
// kill -9, and puts it in a process group of its own: a child the plugin
// forked (holding its stdout open, say) is killed with it, and is counted
// with it against plugins.max_memory_bytes and plugins.max_cpu. Not a
// session of its own: where the kernel shares CPU by session (autogroup) that
// would bound a spinning plugin's threads against the host's too, but it cost
// the 08:00 burst 13-25% of its throughput (docs/performance.md); the CPU bound
// is plugins.max_cpu.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// awaitExit returns once process pid (a child of this process) has exited,
// without reaping it: until it is reaped its pid, hence its process group's
// id, cannot name another process.
func awaitExit(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

// pauseGroup stops (SIGSTOP) or resumes (SIGCONT) every process of process
// group pgid: the plugin and what it started.
func pauseGroup(pgid int, stop bool) error {
	if pgid <= 0 {
		return nil
	}
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
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

// limitMapped caps the private writable memory process pid may map — its
// heap, thread stacks and anonymous mappings, in whatever language it is
// written, touched or not — at max bytes (RLIMIT_DATA); a process it starts
// later inherits the limit. An allocation past it fails at once: a Go
// plugin dies ("fatal error: runtime: out of memory"), before a single
// huge allocation can be touched faster than the resident check reads it.
func limitMapped(pid int, max int64) error {
	lim := unix.Rlimit{Cur: uint64(max), Max: uint64(max)}
	return unix.Prlimit(pid, unix.RLIMIT_DATA, &lim, nil)
}

// residentBytes is process pid's resident memory now, shared mappings
// included (which RLIMIT_DATA does not count); 0 when it cannot be read.
func residentBytes(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b)) // size resident shared text lib data dt, in pages
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// groupMembers lists the processes of process group pgid other than its
// leader: those a plugin (which leads a group of its own: sysProcAttr)
// started — a helper, a worker pool — and theirs, which killGroup kills
// with it. One read of /proc/N/stat a process on the machine.
func groupMembers(pgid int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	_ = d.Close()
	var out []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == pgid {
			continue
		}
		f, ok := procfs.Stat(name) // state ppid pgrp …
		if ok && len(f) >= 3 && f[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}

// peakResident is the largest resident memory an exited process had.
func peakResident(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10 // KiB on Linux
	}
	return 0
}
