package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin/runner"

	"github.com/notifyd/notifyd/sdk/proto/providerv1"
)

// procRunner runs one plugin process for go-plugin. It exists so that the
// process is forked on the launcher thread (see launcher) with a parent-death
// signal, and so that the supervisor hears the moment the process exits.
type procRunner struct {
	name     string
	path     string
	launcher *launcher
	logLevel string
	// maxMemory is plugins.max_memory_bytes: the bound on the process's
	// resident memory (Plugin.watchProcess), and a quarter of what it may
	// map (limitMapped, set the moment it runs).
	maxMemory int64

	cmd            *exec.Cmd
	output         *outputBudget // what the host takes of the process's output
	stdout, stderr *pipeEnd      // the host's read ends
	childEnds      []*os.File    // the write ends the process gets; closed here once it has them
	pid            int
	// group is pid once started, for kill: the start watchdog kills while
	// go-plugin may still be starting the process on another goroutine.
	group atomic.Int64

	exited  chan struct{} // closed when the process has exited and been reaped
	waitMu  sync.Mutex
	waitRes error

	// network and addr are where the plugin serves, as its handshake said
	// (PluginToHost), for dial.
	addrMu        sync.Mutex
	network, addr string
	// frames counts the frame units the host read from the plugin's gRPC
	// connection (frames.go).
	frames atomic.Int64
}

// pipeDrain is how long the host reads what a plugin wrote to stdout and
// stderr after it exited. Its output is in the pipes by then; only a process
// it left behind holding them can keep them open longer, and the host does
// not wait for that (docs/design.md §7).
const pipeDrain = 2 * time.Second

var _ runner.Runner = (*procRunner)(nil)

// attach is the go-plugin RunnerFunc: spec carries the environment go-plugin
// prepared (handshake cookie, protocol versions, socket dir).
func (r *procRunner) attach(_ hclog.Logger, spec *exec.Cmd, _ string) (runner.Runner, error) {
	cmd := exec.Command(r.path)
	cmd.Env = append(spec.Env, providerv1.EnvLogLevel+"="+r.logLevel)
	cmd.SysProcAttr = sysProcAttr()
	// The pipes are the host's own *os.File, not exec's: exec's are closed
	// by Wait, and go-plugin calls Wait only once they reached EOF, which a
	// grandchild holding them (setsid, out of reach of killGroup) can put
	// off for good. These are closed by the host when it stops reading.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	r.stdout, r.stderr = &pipeEnd{f: outR, budget: r.output}, &pipeEnd{f: errR, budget: r.output}
	r.childEnds = []*os.File{outW, errW}
	r.cmd = cmd
	return r, nil
}

func (r *procRunner) Start(context.Context) error {
	err := r.launcher.do(r.cmd.Start)
	// The process has its copies; the host's would keep the read ends from
	// ever seeing EOF.
	for _, f := range r.childEnds {
		_ = f.Close()
	}
	if err != nil {
		_ = r.stdout.Close()
		_ = r.stderr.Close()
		return fmt.Errorf("start %s: %w", r.path, err)
	}
	r.pid = r.cmd.Process.Pid
	r.group.Store(int64(r.pid))
	go r.reap()
	// cmd.Start returns once the plugin's executable runs: the limit is
	// set before its runtime has finished starting, long before its first
	// message. A process the host cannot bound does not run.
	if err := limitMapped(r.pid, mappedPerResident*r.maxMemory); err != nil {
		r.kill()
		return fmt.Errorf("start %s: limit what it may map to %d bytes (4 × plugins.max_memory_bytes): %w",
			r.path, mappedPerResident*r.maxMemory, err)
	}
	return nil
}

// reap waits for the process itself, not its pipes (exec copies nothing
// for *os.File outputs), so its exit is seen, and it is restarted, whoever
// still holds its stdout or stderr. The host then reads what is left in
// the pipes for pipeDrain and takes them for closed.
//
// What the process started in its group dies with it, however it ended (an
// exit it chose, a crash, a graceful stop): killed while the exited process
// is not yet reaped, so the group's id is still its own. A helper left
// running spun or held memory with nothing to bound it.
func (r *procRunner) reap() {
	awaitExit(r.pid)
	_ = killGroup(r.pid)
	err := r.cmd.Wait()
	r.waitMu.Lock()
	r.waitRes = err
	r.waitMu.Unlock()
	close(r.exited)
	deadline := time.Now().Add(pipeDrain)
	_ = r.stdout.f.SetReadDeadline(deadline)
	_ = r.stderr.f.SetReadDeadline(deadline)
}

// Wait is called once, by go-plugin, after its readers of stdout and
// stderr returned.
func (r *procRunner) Wait(context.Context) error {
	<-r.exited
	_ = r.stdout.Close()
	_ = r.stderr.Close()
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	return r.waitRes
}

func (r *procRunner) waitErr() error {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	if r.waitRes == nil {
		return errors.New("exit status 0")
	}
	return r.waitRes
}

// exitReason says why the exited process is down: its exit and its peak
// resident memory against plugins.max_memory_bytes, so a plugin that died
// allocating past the bound says so ("fatal error: runtime: out of memory"
// is in its stderr).
func (r *procRunner) exitReason() error {
	peak := int64(0)
	if ps := r.cmd.ProcessState; ps != nil { // set by Wait, before exited closed
		peak = peakResident(ps)
	}
	return fmt.Errorf("process exited: %v (resident memory peaked at %d MiB; plugins.max_memory_bytes is %d MiB, and what it may map %d MiB)",
		r.waitErr(), peak>>20, r.maxMemory>>20, mappedPerResident*r.maxMemory>>20)
}

// mappedPerResident is how much more than plugins.max_memory_bytes a
// plugin may map (RLIMIT_DATA): mappings are not memory until touched — a
// Go runtime maps its heap 64 MiB at a time, every thread's stack is 8 MiB
// of mapping (a Go plugin built with cgo on a 128 MiB limit could not start
// its threads) — so the resident bound is the bound, checked often, and the
// mapped one only refuses a single allocation far past it at once.
const mappedPerResident = 4

func (r *procRunner) kill() { _ = killGroup(int(r.group.Load())) }

// Kill kills the plugin's whole process group: go-plugin calls it when the
// handshake does not come within plugins.start_timeout. A child the plugin
// forked would otherwise keep running; one that left the group (setsid)
// outlives it, but holds nothing of the host's (see reap).
func (r *procRunner) Kill(context.Context) error {
	if err := killGroup(int(r.group.Load())); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

func (r *procRunner) Stdout() io.ReadCloser           { return r.stdout }
func (r *procRunner) Stderr() io.ReadCloser           { return r.stderr }
func (r *procRunner) Name() string                    { return r.name }
func (r *procRunner) Diagnose(context.Context) string { return "" }

func (r *procRunner) ID() string {
	if r.pid == 0 {
		return ""
	}
	return strconv.Itoa(r.pid)
}

func (r *procRunner) PluginToHost(network, addr string) (string, string, error) {
	r.addrMu.Lock()
	r.network, r.addr = network, addr
	r.addrMu.Unlock()
	return network, addr, nil
}

func (r *procRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}

// pipeEnd is the host's end of a plugin's stdout or stderr. Past the drain
// deadline set at exit, or once closed, it reads as EOF: for go-plugin's
// readers that is the end of the plugin's output, not an error to log.
// pipeEnd is the host's read end of a plugin's stdout or stderr; each read
// draws on the process's output budget (output.go).
type pipeEnd struct {
	f      *os.File
	budget *outputBudget
}

func (p *pipeEnd) Read(b []byte) (int, error) {
	if len(b) > maxOutputRead {
		b = b[:maxOutputRead]
	}
	n, err := p.f.Read(b)
	p.budget.take(n)
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, os.ErrClosed) {
		err = io.EOF
	}
	return n, err
}

func (p *pipeEnd) Close() error { return p.f.Close() }

// launcher forks every plugin from one OS thread that lives as long as the
// host. Linux delivers the parent-death signal when the *thread* that forked
// the child exits, not the process; a thread the Go runtime retires would
// kill healthy plugins. This thread is locked and never retired until Close.
type launcher struct {
	reqs chan func()
	done chan struct{}
	once sync.Once
}

func newLauncher() *launcher {
	l := &launcher{reqs: make(chan func()), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *launcher) run() {
	runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
	for {
		select {
		case f := <-l.reqs:
			f()
		case <-l.done:
			return
		}
	}
}

func (l *launcher) do(f func() error) error {
	res := make(chan error, 1)
	select {
	case l.reqs <- func() { res <- f() }:
		return <-res
	case <-l.done:
		return ErrClosed
	}
}

func (l *launcher) stop() { l.once.Do(func() { close(l.done) }) }

// tail keeps the last lines a plugin wrote to stderr, for start errors.
type tail struct {
	mu    sync.Mutex
	max   int
	lines []string
	part  strings.Builder
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range string(b) {
		if c == '\n' {
			if s := strings.TrimSpace(t.part.String()); s != "" {
				t.lines = append(t.lines, s)
				if len(t.lines) > t.max {
					t.lines = t.lines[1:]
				}
			}
			t.part.Reset()
			continue
		}
		if t.part.Len() < 1024 {
			t.part.WriteRune(c)
		}
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if s := strings.TrimSpace(t.part.String()); s != "" {
		lines = append(lines[:len(lines):len(lines)], s)
	}
	return strings.Join(lines, " | ")
}
