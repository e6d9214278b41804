package hostile

import (
	"bufio"
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
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/client"
)

const token = "hostile-token-0123456789abcdef"

// daemon is one `notifyd serve` process under test.
type daemon struct {
	db     *testenv.DB // read only to find a job's notifications
	bin    string
	cfg    string
	addr   string
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited and been reaped
	log    *testenv.SyncBuffer
	c      *client.Client
	ok     *httptest.Server // answers 200
	reject *httptest.Server // answers 400
	odd    *httptest.Server // answers as the recipient asks: see oddReceiver
	// plugins are the paths of the plugins withPlugin installed, by name.
	plugins map[string]string
}

// startOption adds to the daemon start configures.
type startOption func(*startConfig)

type startConfig struct {
	channels []func(*daemon) string     // YAML under channels:, given the daemon's receivers
	via      [2]func(url string) string // rewrite the Postgres and the Redis URL (a proxy the test can cut)
	plugins  map[string]string          // more plugins to install: name → Go package
	timeout  string                     // plugins.start_timeout, when set
	// stopped: some channel cannot start, so /readyz stays 503 (the
	// default rule); the daemon is up once that is all it reports.
	stopped bool
}

// withPlugin installs the plugin built from pkg as name; its path is then
// d.plugins[name].
func withPlugin(name, pkg string) startOption {
	return func(c *startConfig) {
		if c.plugins == nil {
			c.plugins = map[string]string{}
		}
		c.plugins[name] = pkg
	}
}

// withStartTimeout sets plugins.start_timeout.
func withStartTimeout(d string) startOption { return func(c *startConfig) { c.timeout = d } }

// withStoppedChannels says a channel the test adds cannot start: start
// waits for a /readyz whose only failures are stopped channels.
func withStoppedChannels() startOption { return func(c *startConfig) { c.stopped = true } }

// upBut is a readiness that fails only for stopped channels.
func upBut(r *client.Readiness) bool {
	if r == nil || len(r.Stopped) == 0 {
		return false
	}
	for name, v := range r.Checks {
		if v != "ok" && !(strings.HasPrefix(name, "channel:") && v == "stopped") {
			return false
		}
	}
	return true
}

// withChannels adds channels after the standard ones.
func withChannels(f func(*daemon) string) startOption {
	return func(c *startConfig) { c.channels = append(c.channels, f) }
}

// via has the daemon reach Postgres and Redis through the URLs these return.
func via(pg, redis func(string) string) startOption {
	return func(c *startConfig) { c.via = [2]func(string) string{pg, redis} }
}

// start runs notifyd serve on a fresh schema and key prefix with the
// channels below, and what opts add.
func start(t *testing.T, opts ...startOption) *daemon {
	var sc startConfig
	for _, o := range opts {
		o(&sc)
	}
	t.Helper()
	db := testenv.NewDB(t)
	rds := testenv.NewRedis(t)
	dir := t.TempDir()
	plugins := filepath.Join(dir, "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.InstallPlugin(t, plugins, "webhook", "github.com/notifyd/notifyd/plugins/webhook")
	d := &daemon{db: db, bin: testenv.BuildPlugin(t, "github.com/notifyd/notifyd/cmd/notifyd"), log: &testenv.SyncBuffer{}, plugins: map[string]string{}}
	for name, pkg := range sc.plugins {
		d.plugins[name] = testenv.InstallPlugin(t, plugins, name, pkg)
	}
	pluginsYAML := fmt.Sprintf("{dir: %q}", plugins)
	if sc.timeout != "" {
		pluginsYAML = fmt.Sprintf("{dir: %q, start_timeout: %s}", plugins, sc.timeout)
	}
	d.ok = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	d.reject = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, "no such user", http.StatusBadRequest)
	}))
	d.odd = httptest.NewServer(http.HandlerFunc(oddReceiver))
	t.Cleanup(d.ok.Close)
	t.Cleanup(d.reject.Close)
	t.Cleanup(d.odd.Close)
	d.addr = freeAddr(t)
	d.cfg = filepath.Join(dir, "notifyd.yaml")
	yaml := fmt.Sprintf(`
postgres: {url: %q}
redis:    {url: %q, prefix: %q}
plugins:  %s
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
  # The odd receiver's answers, each of which arrives: a timeout here would
  # be a bug, so the timeout is far above what a 20 MB answer takes even on
  # a loaded 2-core machine (make test runs packages side by side) — the
  # channel's own (the message's deadline; its 10 s default was left in
  # place until a slow host beside two CPU burners overran it), and the
  # plugin's request's. The breaker is off: these receivers fail on
  # purpose, and the test is about what each answer becomes, not about
  # pausing the channel (breaker_test).
  odd:
    plugin: webhook
    timeout: 60s
    config: {url: %q, timeout: 60s}
    retry: {max_attempts: 2, base: 100ms, max: 500ms, max_retry_after: 1s}
    breaker: {failures: -1}
  # The receiver that never answers in time: its own channel, so its
  # timeout can be short without racing the big answers above.
  slow:
    plugin: webhook
    config: {url: %q, timeout: 2s}
    retry: {max_attempts: 2, base: 100ms, max: 500ms}
    breaker: {failures: -1}
`, viaURL(sc.via[0], db.URL), viaURL(sc.via[1], rds.URL), rds.Prefix, pluginsYAML, d.addr, token, d.ok.URL+"/hook", d.reject.URL+"/hook", d.odd.URL+"/hook", d.odd.URL+"/hook")
	for _, more := range sc.channels {
		yaml += more(d)
	}
	if err := os.WriteFile(d.cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(d.bin, "serve", "--config", d.cfg)
	// A short TMPDIR: plugins listen on unix sockets there, whose paths may
	// not pass 107 bytes (a subtest's long name in t.TempDir's path did).
	tmp, err := os.MkdirTemp("", "nd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	d.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + tmp}
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start notifyd serve: %v", err)
	}
	d.exited = make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(15 * time.Second):
			t.Logf("notifyd did not exit within 15 s of SIGTERM; killed")
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.exited
		}
		// Its plugins, should any outlive it.
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("notifyd's log:\n%s", tail(d.log.String(), 60))
		}
	})

	if d.c, err = client.New("http://"+d.addr, token); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if r, err := d.c.Ready(context.Background()); (err == nil && r.Status == "ready") || (sc.stopped && upBut(r)) {
			return d
		}
		select {
		case <-d.exited:
			t.Fatalf("notifyd serve exited before it was ready (%v); log:\n%s", d.cmd.ProcessState, tail(d.log.String(), 40))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("notifyd not ready after 60 s; log:\n%s", tail(d.log.String(), 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func viaURL(via func(string) string, url string) string {
	if via != nil {
		return via(url)
	}
	return url
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

// alive fails the test if the daemon's process has exited or /healthz does
// not answer. Nothing restarts it here, so alive means the same PID.
func (d *daemon) alive(t testing.TB) {
	t.Helper()
	select {
	case <-d.exited:
		t.Fatalf("notifyd (pid %d) is gone (%v); log:\n%s", d.cmd.Process.Pid, d.cmd.ProcessState, tail(d.log.String(), 40))
	default:
	}
	if err := d.c.Health(context.Background()); err != nil {
		t.Fatalf("/healthz: %v", err)
	}
}

// memory returns a /proc/PID/status field in bytes: VmRSS (resident now)
// or VmHWM (the peak resident).
func (d *daemon) memory(t testing.TB, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("read notifyd's memory: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, d.cmd.Process.Pid)
	return 0
}

// raw sends one request over its own connection with the request line
// written verbatim, so raw NUL and invalid UTF-8 bytes reach the server as
// a hostile client sends them (net/http would escape or refuse them). It
// returns the status and body; status 0 means the server closed the
// connection without an answer.
func (d *daemon) raw(t testing.TB, method, target string, body []byte) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", d.addr, 5*time.Second)
	if err != nil {
		t.Fatalf("%s %.80q: dial: %v", method, target, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	var req bytes.Buffer
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n", method, target, d.addr, token)
	if body != nil {
		fmt.Fprintf(&req, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	req.WriteString("\r\n")
	req.Write(body)
	if _, err := conn.Write(req.Bytes()); err != nil {
		// The server may answer and close before reading a large body.
		t.Logf("%s %.80q: write: %v", method, target, err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "no answer: " + err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	return res.StatusCode, string(b)
}

// cli runs a notifyd command against the daemon's API.
func (d *daemon) cli(args ...string) (string, error) {
	cmd := exec.Command(d.bin, append(args, "--addr", "http://"+d.addr, "--token", token)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// cli5xx matches how the CLI reports a 5xx answer (sdk/client's Error).
var cli5xx = regexp.MustCompile(`notifyd API: 5[0-9][0-9]`)

// waitFinal polls until every id is SENT, FAILED with a reason or
// CANCELLED, and returns the final rows. Those still not final after within
// fail the test, listed with their state.
func (d *daemon) waitFinal(t testing.TB, ids []int64, within time.Duration) map[int64]*client.NotificationInfo {
	t.Helper()
	deadline := time.Now().Add(within)
	out := map[int64]*client.NotificationInfo{}
	pending := ids
	for {
		var still []int64
		var stuck []string
		for _, id := range pending {
			n, err := d.c.Notification(context.Background(), id)
			if err != nil {
				t.Errorf("GET /v1/notifications/%d: %v", id, err)
				continue
			}
			switch n.Status {
			case "SENT", "CANCELLED", "FAILED":
				if n.Status == "FAILED" && n.LastError == "" {
					t.Errorf("notification %d FAILED without a reason", id)
				}
				out[id] = n
			default:
				still = append(still, id)
				stuck = append(stuck, fmt.Sprintf("%d %s (attempts %d, last error %q)", id, n.Status, n.Attempts, n.LastError))
			}
		}
		if len(still) == 0 {
			return out
		}
		if time.Now().After(deadline) {
			if len(stuck) > 20 {
				stuck = append(stuck[:20], fmt.Sprintf("… and %d more", len(stuck)-20))
			}
			t.Errorf("%d notifications not final %s after they were accepted:\n%s", len(still), within, strings.Join(stuck, "\n"))
			return out
		}
		pending = still
		time.Sleep(200 * time.Millisecond)
	}
}

// panics counts the Go panics and fatal errors in the daemon's log (a
// recovered handler panic answers 500 and is logged; a plugin's is too).
func (d *daemon) panics() (n int, first string) {
	for _, line := range strings.Split(d.log.String(), "\n") {
		if strings.Contains(line, "panic") || strings.HasPrefix(line, "fatal error: ") {
			if n == 0 {
				first = line
			}
			n++
		}
	}
	return n, first
}
