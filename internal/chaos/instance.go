package chaos

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Instance is one `notifyd serve` process, supervised like a service
// manager would: when it exits by itself (e.g. it could not reach Postgres
// at start) it is started again after a pause, until the suite stops it.
// The suite's own kill -9 is not an exit to restart from; the fault
// schedule restarts it.
type Instance struct {
	Name     string
	ID       string // instance.id in its config; "" = the id notifyd derives (stable across restarts)
	HTTPAddr string
	Config   string // path of its YAML
	Log      string // stdout+stderr of every run, appended
	// TmpDir is its TMPDIR: the plugins' socket directories (go-plugin's
	// plugin-dir*), which a kill -9 leaves behind, go there and are
	// removed with the suite's directory. "" = the test's own.
	TmpDir string

	bin string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current process has exited
	up      bool          // the suite wants it running
	starts  int
	exits   []Exit // exits the suite did not cause
	last    string // exit status of the last run
	stopped bool
}

// Exit is a run that ended without the suite killing it.
type Exit struct {
	At     time.Time
	Status string // exit status as the OS reports it
	Last   string // the last line it logged, usually why
}

// StartInstance launches bin serve --config cfg and supervises it.
func StartInstance(name, id, bin, cfg, log, httpAddr, tmpDir string) (*Instance, error) {
	in := &Instance{Name: name, ID: id, HTTPAddr: httpAddr, Config: cfg, Log: log, TmpDir: tmpDir, bin: bin}
	return in, in.Start()
}

// Start launches the process (if it is not running).
func (in *Instance) Start() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.stopped {
		return errors.New("instance stopped for good")
	}
	in.up = true
	if in.cmd != nil {
		return nil
	}
	return in.launchLocked()
}

func (in *Instance) launchLocked() error {
	logf, err := os.OpenFile(in.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	in.starts++
	fmt.Fprintf(logf, "=== chaos: run #%d of %s starts at %s\n", in.starts, in.Name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(in.bin, "serve", "--config", in.Config, "--no-migrate")
	// A clean environment: the test's own NOTIFYD_* variables must not
	// override the instance's config.
	tmp := in.TmpDir
	if tmp == "" {
		tmp = os.TempDir()
	}
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "TMPDIR=" + tmp}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so cleanup can kill it with its plugins.
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", in.Name, err)
	}
	done := make(chan struct{})
	in.cmd, in.done = cmd, done
	go in.wait(cmd, done, logf)
	return nil
}

// wait reaps the process; an exit the suite did not cause is recorded and
// the instance restarted after a pause.
func (in *Instance) wait(cmd *exec.Cmd, done chan struct{}, logf *os.File) {
	err := cmd.Wait()
	logf.Close()
	status := "exit 0"
	if err != nil {
		status = err.Error()
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.last = status
	close(done)
	if in.cmd == cmd {
		in.cmd = nil
	}
	if !in.up {
		return // stopped by the suite
	}
	in.exits = append(in.exits, Exit{At: time.Now(), Status: status, Last: tail(in.Log, 1)})
	go func() {
		time.Sleep(500 * time.Millisecond)
		in.mu.Lock()
		defer in.mu.Unlock()
		if in.up && in.cmd == nil && !in.stopped {
			_ = in.launchLocked()
		}
	}()
}

// PID is the running process' id, 0 when it is not running.
func (in *Instance) PID() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cmd == nil {
		return 0
	}
	return in.cmd.Process.Pid
}

// Kill9 sends SIGKILL to the notifyd process only (its plugins die with it
// by their parent-death signal, as in production) and waits for it to go.
// It stays down until Start.
func (in *Instance) Kill9() bool {
	in.mu.Lock()
	in.up = false
	cmd, done := in.cmd, in.done
	in.mu.Unlock()
	if cmd == nil {
		return false
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	return true
}

// Terminate stops the process gracefully, as a service manager's restart
// does (SIGTERM), and waits up to limit for it to exit, killing it after
// that. It stays down until Start. It returns the exit status and how long
// the stop took; ok is false when it had to be killed.
func (in *Instance) Terminate(limit time.Duration) (status string, took time.Duration, ok bool) {
	in.mu.Lock()
	in.up = false
	cmd, done := in.cmd, in.done
	in.mu.Unlock()
	if cmd == nil {
		return "not running", 0, true
	}
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		ok = true
	case <-time.After(limit):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.last, time.Since(start), ok
}

// Signal sends sig to the notifyd process (e.g. SIGSTOP, SIGCONT).
func (in *Instance) Signal(sig syscall.Signal) error {
	pid := in.PID()
	if pid == 0 {
		return errors.New("not running")
	}
	return syscall.Kill(pid, sig)
}

// Stop kills the process group for good (cleanup).
func (in *Instance) Stop() {
	in.mu.Lock()
	in.up, in.stopped = false, true
	cmd, done := in.cmd, in.done
	in.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// Exits returns the exits the suite did not cause, and how many times the
// process was started.
func (in *Instance) Exits() (exits []Exit, starts int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]Exit(nil), in.exits...), in.starts
}

// Children returns the pids of the process' children: its plugins.
func (in *Instance) Children() []int {
	pid := in.PID()
	if pid == 0 {
		return nil
	}
	return childrenOf(pid)
}

func childrenOf(parent int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == parent {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, pid)
		}
	}
	return out
}

// LogFindings counts the lines of the instance's log (every run) that are
// always bugs: Go panics and fatal errors, and data races (when the binary
// is built with -race).
func (in *Instance) LogFindings() (panics, races int, first string) {
	f, err := os.Open(in.Log)
	if err != nil {
		return 0, 0, ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "panic: "), strings.HasPrefix(line, "fatal error: "):
			panics++
		case strings.Contains(line, "WARNING: DATA RACE"):
			races++
		default:
			continue
		}
		if first == "" {
			first = line
		}
	}
	return panics, races, first
}

// Tail returns the last n lines of the instance's log.
func (in *Instance) Tail(n int) string { return tail(in.Log, n) }

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
