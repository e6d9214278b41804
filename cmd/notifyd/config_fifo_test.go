package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/testenv"
)

// lockedBuffer is a process's stderr, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCLI_ConfigFIFONothingWrites runs the built `notifyd serve`
// (and `migrate`) with --config naming a FIFO nothing writes to: opening it
// blocks. The CLI must say what it waits for, and stop on Ctrl-C or
// SIGTERM, where it used to hang silently and, since main catches both
// signals, ignore them: only SIGKILL ended it.
func TestCLI_ConfigFIFONothingWrites(t *testing.T) {
	t.Parallel()
	bin := testenv.BuildPlugin(t, "github.com/notifyd/notifyd/cmd/notifyd")
	for _, tc := range []struct {
		cmd string
		sig syscall.Signal
	}{{"serve", syscall.SIGINT}, {"migrate", syscall.SIGTERM}} {
		t.Run(tc.cmd, func(t *testing.T) {
			t.Parallel()
			fifo := filepath.Join(t.TempDir(), "notifyd.yaml")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			var stderr lockedBuffer
			cmd := exec.Command(bin, tc.cmd, "--config", fifo)
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				// Let a process stuck in open(2) go: open the FIFO for
				// writing without blocking (it has a reader) and close it.
				if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
			})
			// The note comes once the read has waited a while: the
			// process is then past installing its signal handlers.
			deadline := time.Now().Add(time.Minute)
			for !strings.Contains(stderr.String(), fifo) {
				if time.Now().After(deadline) {
					t.Fatalf("notifyd %s --config FIFO: nothing said after a minute; stderr:\n%s", tc.cmd, tail(stderr.String()))
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
					t.Errorf("notifyd %s: %v, want exit status 1; stderr:\n%s", tc.cmd, err, tail(stderr.String()))
				}
			case <-time.After(time.Minute):
				t.Fatalf("notifyd %s still running a minute after %v; stderr:\n%s", tc.cmd, tc.sig, tail(stderr.String()))
			}
			out := stderr.String()
			for _, want := range []string{"FIFO", "nothing", "stopped"} {
				if !strings.Contains(out, want) {
					t.Errorf("notifyd %s stderr:\n%s\nwant it to say %q", tc.cmd, tail(out), want)
				}
			}
		})
	}
}
