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

	cmd            *exec.Cmd
	stdout, stderr io.ReadCloser
	pid            int

	exited  chan struct{}
	waitMu  sync.Mutex
	waitRes error
}

var _ runner.Runner = (*procRunner)(nil)

// attach is the go-plugin RunnerFunc: spec carries the environment go-plugin
// prepared (handshake cookie, protocol versions, socket dir).
func (r *procRunner) attach(_ hclog.Logger, spec *exec.Cmd, _ string) (runner.Runner, error) {
	cmd := exec.Command(r.path)
	cmd.Env = append(spec.Env, providerv1.EnvLogLevel+"="+r.logLevel)
	cmd.SysProcAttr = sysProcAttr()
	var err error
	if r.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if r.stderr, err = cmd.StderrPipe(); err != nil {
		return nil, err
	}
	r.cmd = cmd
	return r, nil
}

func (r *procRunner) Start(context.Context) error {
	if err := r.launcher.do(r.cmd.Start); err != nil {
		return fmt.Errorf("start %s: %w", r.path, err)
	}
	r.pid = r.cmd.Process.Pid
	return nil
}

// Wait is called once, by go-plugin, after the process's pipes closed.
func (r *procRunner) Wait(context.Context) error {
	err := r.cmd.Wait()
	r.waitMu.Lock()
	r.waitRes = err
	r.waitMu.Unlock()
	close(r.exited)
	return err
}

func (r *procRunner) waitErr() error {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	if r.waitRes == nil {
		return errors.New("exit status 0")
	}
	return r.waitRes
}

func (r *procRunner) kill() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = killGroup(r.pid)
	}
}

// Kill kills the plugin's whole process group: go-plugin calls it when the
// handshake does not come within plugins.start_timeout, and a child the
// plugin forked would otherwise keep its stdout open, and the host's reader
// of it, for good.
func (r *procRunner) Kill(context.Context) error {
	if r.cmd == nil || r.cmd.Process == nil {
		return nil
	}
	if err := killGroup(r.pid); err != nil && !errors.Is(err, os.ErrProcessDone) {
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
	return network, addr, nil
}

func (r *procRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}

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
