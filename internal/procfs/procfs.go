// Package procfs reads the little notifyd needs of Linux's /proc: a
// process's stat fields and its CPU time. Elsewhere every read fails (ok is
// false).
package procfs

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockTick is the unit of the CPU times in /proc (USER_HZ): fixed at 100 a
// second for user space on every Linux architecture Go supports, whatever
// the kernel's own tick.
const ClockTick = 10 * time.Millisecond

// Stat is /proc/<pid>/stat's fields after the command name (which may hold
// spaces and ')'): Stat(pid)[0] is field 3, the state; [2] the process
// group, [11] and [12] the user and system time. pid may be "self".
func Stat(pid string) ([]string, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(s[i+1:]), true
}

// CPU is the user and system time process pid has used, all its threads
// together; ok is false once it is gone.
func CPU(pid string) (d time.Duration, ok bool) {
	f, ok := Stat(pid)
	if !ok || len(f) < 13 {
		return 0, false
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(user+sys) * ClockTick, true
}
