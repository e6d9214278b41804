package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc CPU times (USER_HZ), 100 on every Linux
// architecture Go supports.
const clockTick = 10 * time.Millisecond

// CPUUsage is the CPU time each process group used during a phase, read
// from /proc (Linux; zero elsewhere). Postgres and Redis are every process
// of that name on the machine, other users' included: on a shared machine
// read them as an upper bound.
type CPUUsage struct {
	WallSeconds     float64 `json:"wall_seconds"`
	Bench           float64 `json:"bench_seconds"`    // this process: engine, sink, raw client
	Plugin          float64 `json:"plugin_seconds"`   // the webhook plugin process
	Postgres        float64 `json:"postgres_seconds"` // every postgres process
	Redis           float64 `json:"redis_seconds"`    // every redis-server process
	MachineBusy     float64 `json:"machine_busy_seconds"`
	MachineBusyPct  float64 `json:"machine_busy_pct"` // of all CPUs over the wall time
	MachineCapacity float64 `json:"machine_capacity_seconds"`
}

type cpuSample struct {
	at                            time.Time
	self, plugin, postgres, redis time.Duration
	busy, total                   time.Duration // machine-wide, all CPUs
}

// sampleCPU reads the counters; pluginPID 0 skips the plugin.
func sampleCPU(pluginPID int) cpuSample {
	s := cpuSample{at: time.Now()}
	s.self, _ = procCPU("self")
	if pluginPID > 0 {
		s.plugin, _ = procCPU(strconv.Itoa(pluginPID))
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid := filepath.Base(d)
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil {
			continue
		}
		switch strings.TrimSpace(string(comm)) {
		case "postgres":
			t, _ := procCPU(pid)
			s.postgres += t
		case "redis-server":
			t, _ := procCPU(pid)
			s.redis += t
		}
	}
	s.busy, s.total = machineCPU()
	return s
}

func (s cpuSample) since(prev cpuSample) CPUUsage {
	u := CPUUsage{
		WallSeconds: s.at.Sub(prev.at).Seconds(),
		Bench:       (s.self - prev.self).Seconds(),
		Plugin:      (s.plugin - prev.plugin).Seconds(),
		Postgres:    max(0, (s.postgres - prev.postgres).Seconds()),
		Redis:       max(0, (s.redis - prev.redis).Seconds()),
		MachineBusy: (s.busy - prev.busy).Seconds(),
	}
	u.MachineCapacity = (s.total - prev.total).Seconds()
	if u.MachineCapacity > 0 {
		u.MachineBusyPct = 100 * u.MachineBusy / u.MachineCapacity
	}
	return u
}

// procCPU is a process's user+system time from /proc/<pid>/stat.
func procCPU(pid string) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may contain spaces; fields after it are
	// counted from the closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * clockTick, true
}

// machineCPU is the busy and total time of all CPUs from /proc/stat.
func machineCPU() (busy, total time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	var sum, idle int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 8 { // guest times are already counted in user
			break
		}
		sum += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return time.Duration(sum-idle) * clockTick, time.Duration(sum) * clockTick
}

// loadAvg is the 1, 5 and 15 minute load average (zero where unknown).
func loadAvg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	for i, f := range strings.Fields(string(b)) {
		if i == 3 {
			break
		}
		l[i], _ = strconv.ParseFloat(f, 64)
	}
	return l
}
