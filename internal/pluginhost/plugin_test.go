package pluginhost_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/pluginhost"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/proto/providerv1"
)

func resultPID(t *testing.T, v sdk.Verdict) int {
	t.Helper()
	var r struct{ PID int }
	if err := json.Unmarshal(v.Result, &r); err != nil || r.PID == 0 {
		t.Fatalf("result %s: want {\"pid\":N} (%v)", v.Result, err)
	}
	return r.PID
}

func TestPlugin_Send(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.behave(t)
	vs := p.Send(testenv.Context(t), msgs(`{}`, `{"fail":"no such user"}`, `{"x":1}`))
	checkVerdicts(t, vs[:1], []sdk.Outcome{sdk.OutcomeSuccess}, "")
	checkVerdicts(t, vs[1:2], []sdk.Outcome{sdk.OutcomePermanent}, "no such user")
	checkVerdicts(t, vs[2:], []sdk.Outcome{sdk.OutcomeSuccess}, "")
	if got := resultPID(t, vs[0]); got != p.PID() {
		t.Errorf("result pid: got %d, want the plugin's %d", got, p.PID())
	}
	if got := p.Send(testenv.Context(t), nil); len(got) != 0 {
		t.Errorf("Send(nil): got %d verdicts, want 0", len(got))
	}
}

func TestPlugin_Send_Crash(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.behave(t)
	ctx := testenv.Context(t)
	pid := p.PID()

	vs := p.Send(ctx, msgs(`{}`, `{}`, `{"crash":true}`, `{}`, `{}`))
	want := make([]sdk.Outcome, 5)
	for i := range want {
		want[i] = sdk.OutcomeTransient
	}
	checkVerdicts(t, vs, want, pluginhost.DetailExited)

	// The next send waits through the restart; the restarted process has
	// channel ch configured again (behave refuses messages otherwise).
	vs = p.Send(ctx, msgs(`{}`, `{}`))
	checkVerdicts(t, vs, []sdk.Outcome{sdk.OutcomeSuccess, sdk.OutcomeSuccess}, "")
	if got := resultPID(t, vs[0]); got == pid {
		t.Errorf("after the crash: answered by pid %d, want a new process", got)
	}
	if got := p.Restarts(); got != 1 {
		t.Errorf("Restarts: got %d, want 1", got)
	}
	if alive(pid) {
		t.Errorf("crashed pid %d: still alive", pid)
	}
}

func TestPlugin_Send_Hang(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.behave(t)
	ms := msgs(`{}`, `{"hang":true}`, `{}`)
	for i := range ms {
		ms[i].Deadline = time.Now().Add(300 * time.Millisecond)
	}
	vs := p.Send(testenv.Context(t), ms)
	checkVerdicts(t, vs[:1], []sdk.Outcome{sdk.OutcomeSuccess}, "")
	checkVerdicts(t, vs[1:2], []sdk.Outcome{sdk.OutcomeTransient}, sdk.DetailDeadline)
	checkVerdicts(t, vs[2:], []sdk.Outcome{sdk.OutcomeSuccess}, "")
	if got := p.Restarts(); got != 0 {
		t.Errorf("Restarts: got %d, want 0 (a hung Send is the message's problem, not the process's)", got)
	}
}

func TestPlugin_Configure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.behave(t)
	ctx := testenv.Context(t)

	err := p.Configure(ctx, "broken", json.RawMessage(`{}`))
	var ce *pluginhost.ConfigError
	if !errors.As(err, &ce) || ce.Channel != "broken" || ce.Message != "config.name is required" {
		t.Fatalf("Configure(broken, {}): got %v, want a ConfigError for broken with the plugin's message %q", err, "config.name is required")
	}
	if want := "plugin behave: channel broken: config rejected: config.name is required"; err.Error() != want {
		t.Errorf("error text: got %q, want %q", err, want)
	}
	if err := p.Configure(ctx, "typo", json.RawMessage(`{"nmae":"x"}`)); err == nil || !strings.Contains(err.Error(), `config: unknown key "nmae"`) {
		t.Errorf("Configure(typo): got %v, want the unknown key named", err)
	}

	// Only that channel stops.
	ms := msgs(`{}`)
	ms[0].Channel = "broken"
	checkVerdicts(t, p.Send(ctx, ms), []sdk.Outcome{sdk.OutcomeTransient}, "config.name is required")
	checkVerdicts(t, p.Send(ctx, msgs(`{}`)), []sdk.Outcome{sdk.OutcomeSuccess}, "")

	// A good config brings it back.
	if err := p.Configure(ctx, "broken", json.RawMessage(`{"name":"fixed"}`)); err != nil {
		t.Fatalf("Configure(broken, fixed): %v", err)
	}
	checkVerdicts(t, p.Send(ctx, ms), []sdk.Outcome{sdk.OutcomeSuccess}, "")
	if err := p.Health(ctx); err != nil {
		t.Errorf("Health: %v", err)
	}
}

func TestPlugin_Supervise(t *testing.T) {
	t.Parallel()

	t.Run("killed -9 is restarted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.behave(t)
		pid := p.PID()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitRestarts(t, p, 1)
		vs := p.Send(testenv.Context(t), msgs(`{}`))
		checkVerdicts(t, vs, []sdk.Outcome{sdk.OutcomeSuccess}, "")
		if got := resultPID(t, vs[0]); got == pid {
			t.Errorf("answered by the killed pid %d", pid)
		}
	})

	t.Run("not answering Health is restarted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *config.Plugins) { c.HealthInterval = 300 * time.Millisecond })
		p := b.behave(t)
		pid := p.PID()
		// A stopped process keeps its socket but answers nothing.
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		waitRestarts(t, p, 1)
		if alive(pid) {
			t.Errorf("hung pid %d: still alive after the restart", pid)
		}
		checkVerdicts(t, p.Send(testenv.Context(t), msgs(`{}`)), []sdk.Outcome{sdk.OutcomeSuccess}, "")
	})

	t.Run("one missed health check restarts nothing", func(t *testing.T) {
		t.Parallel()
		// 2 s: after the first miss is seen, the test has two more intervals
		// (4 s) to let the process go on before a third miss would replace it.
		b := setup(t, func(c *config.Plugins) { c.HealthInterval = 2 * time.Second })
		p := b.behave(t)
		pid := p.PID()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a missed health check", func() bool { return p.HealthMisses() >= 1 })
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the next health check answered", func() bool { return p.HealthMisses() == 0 })
		if got := p.Restarts(); got != 0 || p.PID() != pid {
			t.Errorf("after one missed health check: %d restarts, pid %d (was %d); want the same process", got, p.PID(), pid)
		}
		checkVerdicts(t, p.Send(testenv.Context(t), msgs(`{}`)), []sdk.Outcome{sdk.OutcomeSuccess}, "")
	})

	t.Run("a slow provider health check restarts nothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *config.Plugins) { c.HealthInterval = 200 * time.Millisecond })
		p := b.behave(t)
		ctx := testenv.Context(t)
		if err := p.Configure(ctx, "slow", json.RawMessage(`{"name":"slow","health":"slow"}`)); err != nil {
			t.Fatal(err)
		}
		if err := p.Configure(ctx, "down", json.RawMessage(`{"name":"down","health":"provider unreachable"}`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // five health intervals
		if got := p.Restarts(); got != 0 {
			t.Errorf("Restarts: got %d, want 0 (the process answers; only its provider is slow)", got)
		}
		hctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		err := p.Health(hctx)
		if err == nil || !strings.Contains(err.Error(), "channel down: provider unreachable") || !strings.Contains(err.Error(), "channel slow: ") {
			t.Errorf("Health: got %v, want both channels' problems", err)
		}
	})

	t.Run("a deleted binary keeps it down with the reason", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.behave(t)
		if err := os.Remove(p.Path()); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(10 * time.Second); p.PID() != 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("plugin not marked down 10s after kill -9")
			}
		}
		ms := msgs(`{}`)
		ms[0].Deadline = time.Now().Add(time.Second)
		checkVerdicts(t, p.Send(testenv.Context(t), ms), []sdk.Outcome{sdk.OutcomeTransient}, "no such plugin executable")
	})
}

func waitRestarts(t *testing.T, p *pluginhost.Plugin, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d restarts", n), func() bool { return p.Restarts() >= n })
}

// waitFor waits up to 30 s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 30s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid runs; a zombie (exited, not yet reaped by
// whoever inherited it) counts as gone.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// exitWait is how long a test waits for a process to exit that must: it
// returns as soon as it has (a plugin's parent watch polls every 500 ms),
// and a machine busy with the whole suite and two CPU burners once took
// more than 2 s to run it.
const exitWait = 30 * time.Second

// gone waits up to d for pid to be gone.
func gone(pid int, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if !alive(pid) {
			return true
		}
	}
	return !alive(pid)
}

const envHelperDir = "NOTIFYD_PLUGINHOST_HELPER_DIR"

// TestHelperHost is not a test: TestHost_KillNine runs this test binary as a
// stand-in notifyd that launches a plugin, prints its pid and waits to be
// killed.
func TestHelperHost(t *testing.T) {
	dir := os.Getenv(envHelperDir)
	if dir == "" {
		return
	}
	h := pluginhost.New(config.Plugins{Dir: dir, StartTimeout: 20 * time.Second}, nil)
	p, err := h.Plugin(context.Background(), "behave")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("pid", p.PID())
	select {}
}

func TestHost_KillNine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testenv.InstallPlugin(t, dir, "behave", behavePkg)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHost$")
	cmd.Env = append(os.Environ(), envHelperDir+"="+dir)
	pid := startAndReadPID(t, cmd, "pid ")
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait()
	if !gone(pid, exitWait) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("plugin pid %d: still running %v after its host was killed -9", pid, exitWait)
	}
}

// TestServe_ExitsWithParent checks the sdk's own watch, the fallback where
// the kernel's parent-death signal is not set (non-Linux, or a host that
// forgot): a plugin started under a shell exits soon after the shell dies.
func TestServe_ExitsWithParent(t *testing.T) {
	t.Parallel()
	bin := testenv.BuildPlugin(t, behavePkg)
	hs := providerv1.Handshake()
	out := filepath.Join(t.TempDir(), "handshake")
	cmd := exec.Command("/bin/sh", "-c", `"$0" >"$1" & echo "pid $!"; wait`, bin, out)
	cmd.Env = append(os.Environ(), hs.MagicCookieKey+"="+hs.MagicCookieValue, "PLUGIN_PROTOCOL_VERSIONS=1")
	pid := startAndReadPID(t, cmd, "pid ")
	// The plugin serves (its handshake line written) before its parent
	// dies: by then it watches that parent. A fixed 300 ms was not enough
	// beside two CPU burners on a slow host (rehearsal 64): the parent died
	// before the plugin read who it was, and it watched its new one.
	waitFor(t, "the plugin's handshake", func() bool {
		b, _ := os.ReadFile(out)
		return bytes.Contains(b, []byte("\n"))
	})
	if !alive(pid) {
		t.Fatalf("plugin pid %d exited before the test killed its parent", pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if !gone(pid, exitWait) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("plugin pid %d: still running %v after its parent was killed -9", pid, exitWait)
	}
}

// startAndReadPID starts cmd and reads its stdout until a line with prefix.
func startAndReadPID(t *testing.T, cmd *exec.Cmd, prefix string) int {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%v: exited without printing %q", cmd.Args, prefix)
			}
			if s, found := strings.CutPrefix(l, prefix); found {
				pid, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil {
					t.Fatalf("bad pid line %q", l)
				}
				go func() {
					for range lines {
					}
				}()
				return pid
			}
			if strings.HasPrefix(l, "error:") {
				t.Fatal(l)
			}
		case <-timeout:
			t.Fatalf("%v: no %q line within 60s", cmd.Args, prefix)
		}
	}
}

// A process whose provider code ignores its context — behave's
// {"hang":true} never returns — holds that goroutine (a core, if it spins)
// for as long as it lives, one more for every retry of the message. Once
// the call has run sdk.StuckAfter past its deadline, the process's
// liveness check says so, and after three such answers the host replaces
// it: first letting the calls in flight on it answer (their verdicts kept,
// not "plugin exited"), then killing it. The next message goes to its
// successor. (TestPlugin_Send_Hang: until then, a hung Send is only its
// message's problem.)
func TestPlugin_StuckSendReplacesProcess(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Plugins) { c.HealthInterval = 200 * time.Millisecond })
	p := b.behave(t)
	ctx := testenv.Context(t)
	pid := p.PID()
	hang := func(d time.Duration) []sdk.Message {
		ms := msgs(`{"hang":true}`)
		ms[0].Deadline = time.Now().Add(d)
		return ms
	}
	checkVerdicts(t, p.Send(ctx, hang(300*time.Millisecond)), []sdk.Outcome{sdk.OutcomeTransient}, sdk.DetailDeadline)
	// A call in flight when the host decides: it answers (TRANSIENT at its
	// deadline, from the SDK) before the process goes.
	waitFor(t, "a stuck liveness answer", func() bool { return p.HealthMisses() >= 1 || p.PID() != pid })
	inFlight := p.Send(ctx, hang(1500*time.Millisecond))
	checkVerdicts(t, inFlight, []sdk.Outcome{sdk.OutcomeTransient}, sdk.DetailDeadline)
	waitFor(t, "the stuck process replaced", func() bool { n := p.PID(); return n != 0 && n != pid })
	if p.Restarts() < 1 {
		t.Errorf("Restarts: %d, want at least 1", p.Restarts())
	}
	if alive(pid) {
		t.Errorf("the stuck process %d still runs", pid)
	}
	checkVerdicts(t, p.Send(ctx, msgs(`{}`)), []sdk.Outcome{sdk.OutcomeSuccess}, "")
}
