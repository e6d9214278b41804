package peers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/notifyd/notifyd/internal/bench"
)

// proc is a child process: one of this program's roles (the sink, a peer's
// worker, the raw client) or the notifyd daemon.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser // nil for the daemon
	lines chan string    // its standard output, line by line (roles only)
	log   string         // the file its standard error (the daemon: both) goes to
	done  chan struct{}  // closed when it has exited
	err   error          // its exit, once done is closed
}

// startRole starts this executable again as role with args, and waits for
// its "ready" line; the rest of that line is returned.
func startRole(ctx context.Context, dir, role string, args ...string) (*proc, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), EnvChild+"="+role)
	p := &proc{name: role, cmd: cmd, lines: make(chan string, 16)}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, "", err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := p.start(dir); err != nil {
		return nil, "", err
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody reads past "ready" and "done"
			}
		}
	}()
	line, err := p.waitLine(ctx, "ready", time.Minute)
	if err != nil {
		p.stop(5 * time.Second)
		return nil, "", err
	}
	return p, strings.TrimSpace(strings.TrimPrefix(line, "ready")), nil
}

// startDaemon starts the notifyd binary with args, its output to a log file.
func startDaemon(dir, bin string, env []string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	// The daemon dies with this process even if it is killed; a daemon left
	// running would hold its database.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	p := &proc{name: "notifyd", cmd: cmd}
	return p, p.start(dir)
}

func (p *proc) start(dir string) error {
	f, err := os.CreateTemp(dir, p.name+"-*.log")
	if err != nil {
		return err
	}
	p.log = f.Name()
	p.cmd.Stderr = f
	if p.cmd.Stdout == nil { // the daemon; a role's is its pipe
		p.cmd.Stdout = f
	}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.done = make(chan struct{})
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return nil
}

// waitLine waits for a line of standard output starting with prefix.
func (p *proc) waitLine(ctx context.Context, prefix string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case line := <-p.lines:
			if strings.HasPrefix(line, prefix) {
				return line, nil
			}
		case <-p.done:
			return "", fmt.Errorf("%s exited (%v) before saying %q: %s", p.name, p.err, prefix, p.tail())
		case <-t.C:
			return "", fmt.Errorf("%s did not say %q within %s: %s", p.name, prefix, timeout, p.tail())
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// pid is the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited is non-nil once the process has ended, saying how.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited early (%v): %s", p.name, p.err, p.tail())
	default:
		return nil
	}
}

// stop ends the process: a role by closing its standard input, the daemon
// by SIGTERM; past grace it is killed.
func (p *proc) stop(grace time.Duration) error {
	if p == nil || p.done == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	if p.stdin != nil {
		_ = p.stdin.Close()
	} else {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s; killed", p.name, grace)
	}
}

// tail is the end of the process's log, for an error message.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	s := strings.TrimSpace(string(b))
	if len(s) > 1500 {
		s = "…" + s[len(s)-1500:]
	}
	if s == "" {
		return "(no output)"
	}
	return s
}

// children are the pids whose parent is pid (the daemon's plugin processes).
func children(pid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			c, _ := strconv.Atoi(filepath.Base(d))
			out = append(out, c)
		}
	}
	return out
}

// group is a set of processes whose CPU is summed under one name.
type group struct {
	name string
	pids []int
}

// cpuSample is one reading of every counter a result needs.
type cpuSample struct {
	at          time.Time
	groups      map[string]time.Duration
	backends    map[int]time.Duration // the system's Postgres backends by pid
	postgres    time.Duration         // every postgres process
	redis       time.Duration         // the Redis server at -redis
	busy, total time.Duration         // the machine, all CPUs
}

// sample reads the groups' CPU time, the given Postgres backends', every
// postgres process's, the Redis server's (redisPID) and the machine's.
func sample(groups []group, backends []int, redisPID int) cpuSample {
	s := cpuSample{at: time.Now(), groups: map[string]time.Duration{}, backends: map[int]time.Duration{}}
	for _, g := range groups {
		for _, pid := range g.pids {
			t, _ := bench.ProcCPU(pid)
			s.groups[g.name] += t
		}
	}
	for _, pid := range backends {
		if t, ok := bench.ProcCPU(pid); ok {
			s.backends[pid] = t
		}
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil {
			continue
		}
		if strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		t, _ := bench.ProcCPU(pid)
		s.postgres += t
	}
	if redisPID > 0 {
		s.redis, _ = bench.ProcCPU(redisPID)
	}
	s.busy, s.total = bench.MachineCPU()
	return s
}

// CPU is the CPU time, in seconds, each part used during a timed phase.
type CPU struct {
	WallSeconds float64 `json:"wall_seconds"`
	// Own is the system's own processes by name: notifyd's daemon and its
	// webhook plugin, River's or asynq's worker process, the raw client.
	Own map[string]float64 `json:"own_seconds"`
	// Postgres is the backends of the system's own database (none for asynq
	// and raw); PostgresOther every other postgres process (WAL writer,
	// checkpointer, and on a shared machine other sessions): an upper
	// bound, not in Total.
	Postgres      float64 `json:"postgres_seconds"`
	PostgresOther float64 `json:"postgres_other_seconds"`
	// Redis is the whole Redis server at -redis (shared with whatever else
	// uses it: an upper bound), counted for the systems that use Redis
	// (notifyd, asynq) only.
	Redis float64 `json:"redis_seconds"`
	Sink  float64 `json:"sink_seconds"`
	// Total is Own + Postgres + Redis (when counted) + Sink.
	Total          float64 `json:"total_seconds"`
	MachineBusyPct float64 `json:"machine_busy_pct"` // of all CPUs over the wall time
}

// since is the usage between prev and s. A backend that appeared in between
// counts in full (all its time came after prev); one that ended in between
// took its time with it.
func (s cpuSample) since(prev cpuSample, redis bool) CPU {
	u := CPU{WallSeconds: s.at.Sub(prev.at).Seconds(), Own: map[string]float64{}}
	for name, t := range s.groups {
		d := (t - prev.groups[name]).Seconds()
		if name == "sink" {
			u.Sink = d
		} else {
			u.Own[name] = d
		}
	}
	var ours time.Duration
	for pid, t := range s.backends {
		ours += t - prev.backends[pid]
	}
	u.Postgres = ours.Seconds()
	u.PostgresOther = max(0, (s.postgres - prev.postgres - ours).Seconds())
	if redis {
		u.Redis = max(0, (s.redis - prev.redis).Seconds())
	}
	u.Total = u.Postgres + u.Redis + u.Sink
	for _, v := range u.Own {
		u.Total += v
	}
	if total := s.total - prev.total; total > 0 {
		u.MachineBusyPct = 100 * float64(s.busy-prev.busy) / float64(total)
	}
	return u
}

// stopAll stops the processes in reverse order of start (the workers
// before the sink they post to) and joins their errors.
func stopAll(ps []*proc, grace time.Duration) error {
	var errs []error
	for i := len(ps) - 1; i >= 0; i-- {
		if err := ps[i].stop(grace); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
