package pluginhost_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/notifyd/notifyd/core/config"
	"github.com/notifyd/notifyd/core/pluginhost"
	"github.com/notifyd/notifyd/internal/testenv"
)

// A plugin file swapped for another binary between the checksum check and
// the start must never run: the host runs a private copy of exactly the
// bytes it hashed. (Not parallel: the hook is package state.)
func TestHost_ChecksumOnTheExecutedFile(t *testing.T) {
	dir := t.TempDir()
	pinned := testenv.InstallPlugin(t, dir, "behave", behavePkg)
	sum := sha256Of(t, pinned)
	other := testenv.BuildPlugin(t, "./testdata/junk") // a different binary
	swapped := false
	defer pluginhost.SetAfterVerify(func(path string) {
		if path != pinned || swapped {
			return
		}
		swapped = true
		// Replace the pinned file by the other binary, as an attacker with
		// write access to plugins.dir would in the window.
		tmp := path + ".swap"
		b, err := os.ReadFile(other)
		if err != nil {
			t.Error(err)
			return
		}
		if err := os.WriteFile(tmp, b, 0o755); err != nil {
			t.Error(err)
			return
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Error(err)
		}
	})()
	h := pluginhost.New(config.Plugins{Dir: dir, Checksums: map[string]string{"behave": sum}, StartTimeout: 20 * time.Second}, testLogger())
	defer h.Stop(context.Background())
	p, err := h.Plugin(testenv.Context(t), "behave")
	if !swapped {
		t.Fatal("the hook never ran: the test proves nothing")
	}
	if err != nil {
		t.Fatalf("Plugin(behave): %v, want the pinned bytes running", err)
	}
	if got := p.Info().Name; got != "behave" {
		t.Errorf("the running plugin says it is %q, want behave (the pinned bytes), not the swapped-in binary", got)
	}
}

// A plugin that never completes the handshake while a child it started
// holds its stdout open is killed with its whole process group after
// plugins.start_timeout, with an error naming it; a good plugin beside it
// starts meanwhile.
func TestHost_HandshakeNeverCompletes(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Plugins) { c.StartTimeout = time.Second })
	testenv.InstallPlugin(t, b.dir, "stdouthog", "./testdata/stdouthog")
	done := make(chan error, 1)
	go func() {
		_, err := b.host.Plugin(testenv.Context(t), "stdouthog")
		done <- err
	}()
	if _, err := b.host.Plugin(testenv.Context(t), "behave"); err != nil {
		t.Errorf("a good plugin beside a hung one: %v", err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "plugin stdouthog") || !strings.Contains(err.Error(), "plugins.start_timeout") {
			t.Errorf("Plugin(stdouthog) = %v, want an error naming it and plugins.start_timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Plugin(stdouthog) still waiting 30 s after a 1 s start timeout")
	}
	raw, err := os.ReadFile(filepath.Join(b.dir, "stdouthog.child"))
	if err != nil {
		t.Fatalf("the hog never wrote its child's pid: %v", err)
	}
	pid, _ := strconv.Atoi(string(raw))
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the hog's child %d (holding its stdout) is still alive", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
