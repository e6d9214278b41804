package hostile

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/client"
)

const token = "hostile-token-0123456789abcdef"

// daemon is one `notifyd serve` process under test.
type daemon struct {
	t      *testing.T
	bin    string
	cfg    string
	addr   string
	cmd    *exec.Cmd
	log    *syncBuffer
	c      *client.Client
	ok     *httptest.Server // answers 200
	reject *httptest.Server // answers 400
}

func start(t *testing.T) *daemon {
	t.Helper()
	db := testenv.NewDB(t)
	rds := testenv.NewRedis(t)
	dir := t.TempDir()
	plugins := filepath.Join(dir, "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.InstallPlugin(t, plugins, "webhook", "github.com/notifyd/notifyd/plugins/webhook")
	d := &daemon{t: t, bin: testenv.BuildPlugin(t, "github.com/notifyd/notifyd/cmd/notifyd"), log: &syncBuffer{}}
	d.ok = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	d.reject = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, "no such user", http.StatusBadRequest)
	}))
	t.Cleanup(d.ok.Close)
	t.Cleanup(d.reject.Close)
	d.addr = freeAddr(t)
	d.cfg = filepath.Join(dir, "notifyd.yaml")
	yaml := fmt.Sprintf(`
postgres: {url: %q}
redis:    {url: %q, prefix: %q}
plugins:  {dir: %q}
http:     {listen: %q, tokens: [%q]}
log:      {level: warn}
delivery: {sweep_after: 5s, sweep_interval: 1s}
channels:
  hooks:
    plugin: webhook
    config: {url: %q, timeout: 2s}
    retry: {max_attempts: 3, base: 100ms, max: 500ms}
  refused:
    plugin: webhook
    config: {url: %q, timeout: 2s}
    retry: {max_attempts: 2, base: 100ms, max: 500ms}
`, db.URL, rds.URL, rds.Prefix, plugins, d.addr, token, d.ok.URL+"/hook", d.reject.URL+"/hook")
	if err := os.WriteFile(d.cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(d.bin, "serve", "--config", d.cfg)
	d.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir}
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("notifyd's log:\n%s", tail(d.log.String(), 60))
		}
	})
	var err error
	if d.c, err = client.New("http://"+d.addr, token); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if r, err := d.c.Ready(context.Background()); err == nil && r.Status == "ready" {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("notifyd not ready after 60 s; log:\n%s", tail(d.log.String(), 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// syncBuffer is the daemon's output, written by exec's copiers while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// alive fails the test if the daemon's process is gone or was replaced.
func (d *daemon) alive() {
	d.t.Helper()
	if err := syscall.Kill(d.cmd.Process.Pid, 0); err != nil || d.cmd.ProcessState != nil {
		d.t.Fatalf("notifyd (pid %d) is gone; log:\n%s", d.cmd.Process.Pid, tail(d.log.String(), 40))
	}
	if err := d.c.Health(context.Background()); err != nil {
		d.t.Fatalf("/healthz: %v", err)
	}
}

// rssBytes is the daemon's resident memory.
func (d *daemon) rssBytes() int64 {
	d.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		d.t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// raw sends a request as bytes (no client-side checks) and returns the
// status and body.
func (d *daemon) raw(method, path string, body []byte) (int, string) {
	d.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+d.addr+path, rd)
	if err != nil {
		return 0, err.Error() // a path Go itself refuses to send
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// cli runs a notifyd command against the daemon's API.
func (d *daemon) cli(args ...string) (string, error) {
	cmd := exec.Command(d.bin, append(args, "--addr", "http://"+d.addr, "--token", token)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// waitFinal polls until every id is SENT, FAILED with a reason or
// CANCELLED, and returns the final rows.
func (d *daemon) waitFinal(ids []int64, within time.Duration) map[int64]*client.NotificationInfo {
	d.t.Helper()
	deadline := time.Now().Add(within)
	out := map[int64]*client.NotificationInfo{}
	for _, id := range ids {
		for {
			n, err := d.c.Notification(context.Background(), id)
			if err != nil {
				d.t.Fatalf("notification %d: %v", id, err)
			}
			if n.Status == "SENT" || n.Status == "CANCELLED" || n.Status == "FAILED" {
				if n.Status == "FAILED" && n.LastError == "" {
					d.t.Errorf("notification %d FAILED without a reason", id)
				}
				out[id] = n
				break
			}
			if time.Now().After(deadline) {
				d.t.Fatalf("notification %d still %s after %s (last error %q)", id, n.Status, within, n.LastError)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return out
}
