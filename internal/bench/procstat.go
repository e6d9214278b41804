package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/notifyd/notifyd/internal/procfs"
)

// clockTick is the unit of /proc CPU times (USER_HZ).
const clockTick = procfs.ClockTick

// CPUUsage is the CPU time each process group used during a phase, read
// from /proc (Linux; zero elsewhere). Postgres is the backends of this run's
// own connections (application_name bench-<id>); PostgresOther is every
// other postgres process — WAL writer, checkpointer, and on a shared machine
// other people's sessions — and Redis is the whole (shared) server: read
// those two as upper bounds.
type CPUUsage struct {
	WallSeconds     float64 `json:"wall_seconds"`
	Bench           float64 `json:"bench_seconds"`    // this process: engine, sink, raw client
	Plugin          float64 `json:"plugin_seconds"`   // the webhook plugin processes (one per instance)
	Postgres        float64 `json:"postgres_seconds"` // this run's Postgres backends
	PostgresOther   float64 `json:"postgres_other_seconds"`
	Redis           float64 `json:"redis_seconds"` // every redis-server process
	MachineBusy     float64 `json:"machine_busy_seconds"`
	MachineBusyPct  float64 `json:"machine_busy_pct"` // of all CPUs over the wall time
	MachineCapacity float64 `json:"machine_capacity_seconds"`
}

// add sums two phases' usage.
func (u CPUUsage) add(o CPUUsage) CPUUsage {
	u.WallSeconds += o.WallSeconds
	u.Bench += o.Bench
	u.Plugin += o.Plugin
	u.Postgres += o.Postgres
	u.PostgresOther += o.PostgresOther
	u.Redis += o.Redis
	u.MachineBusy += o.MachineBusy
	u.MachineCapacity += o.MachineCapacity
	u.MachineBusyPct = 0
	if u.MachineCapacity > 0 {
		u.MachineBusyPct = 100 * u.MachineBusy / u.MachineCapacity
	}
	return u
}

type cpuSample struct {
	at           time.Time
	self, plugin time.Duration
	ours         map[int]time.Duration // this run's Postgres backends by pid
	postgres     time.Duration         // every postgres process
	redis        time.Duration
	busy, total  time.Duration // machine-wide, all CPUs
}

// sampleCPU reads the counters; plugins are the plugin processes' pids (0
// skips one), backends the pids of this run's Postgres connections.
func sampleCPU(plugins []int, backends []int) cpuSample {
	s := cpuSample{at: time.Now(), ours: map[int]time.Duration{}}
	s.self, _ = procCPU("self")
	for _, pid := range plugins {
		if pid > 0 {
			t, _ := procCPU(strconv.Itoa(pid))
			s.plugin += t
		}
	}
	for _, pid := range backends {
		if t, ok := procCPU(strconv.Itoa(pid)); ok {
			s.ours[pid] = t
		}
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

// since is the usage between prev and s. A backend that appeared in
// between counts in full: all its CPU time came after prev.
func (s cpuSample) since(prev cpuSample) CPUUsage {
	var ours time.Duration
	for pid, t := range s.ours {
		ours += t - prev.ours[pid]
	}
	u := CPUUsage{
		WallSeconds: s.at.Sub(prev.at).Seconds(),
		Bench:       (s.self - prev.self).Seconds(),
		Plugin:      (s.plugin - prev.plugin).Seconds(),
		Postgres:    ours.Seconds(),
		// Sessions that ended in between take their time with them, so the
		// difference can come out negative.
		PostgresOther: max(0, (s.postgres - prev.postgres - ours).Seconds()),
		Redis:         max(0, (s.redis - prev.redis).Seconds()),
		MachineBusy:   (s.busy - prev.busy).Seconds(),
	}
	u.MachineCapacity = (s.total - prev.total).Seconds()
	if u.MachineCapacity > 0 {
		u.MachineBusyPct = 100 * u.MachineBusy / u.MachineCapacity
	}
	return u
}

// procCPU is a process's user+system time from /proc/<pid>/stat.
func procCPU(pid string) (time.Duration, bool) { return procfs.CPU(pid) }

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
