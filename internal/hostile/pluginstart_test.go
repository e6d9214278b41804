package hostile

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/client"
)

// pluginStart is issue 26's sixth finding: a plugin that leaves a
// grandchild in a session of its own holding its stdout and stderr, and
// never completes the handshake, once held `serve` at "starting the
// pipeline" until the grandchild exited (120 s here), with the API
// answering 503 and no other channel started. Now, with
// plugins.start_timeout 3s, the daemon becomes ready while the grandchild
// still lives, the webhook channel beside it delivers, and the bad channel
// is reported stopped with a reason naming the plugin and the bound.
func pluginStart(t *testing.T) {
	db := testenv.NewDB(t)
	rds := testenv.NewRedis(t)
	dir := t.TempDir()
	plugins := filepath.Join(dir, "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.InstallPlugin(t, plugins, "webhook", "github.com/notifyd/notifyd/plugins/webhook")
	hog := testenv.InstallPlugin(t, plugins, "sessionhog", "github.com/notifyd/notifyd/core/pluginhost/testdata/sessionhog")
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	t.Cleanup(ok.Close)
	d := &daemon{db: db, bin: testenv.BuildPlugin(t, "github.com/notifyd/notifyd/cmd/notifyd"), log: &syncBuffer{}, addr: freeAddr(t)}
	d.cfg = filepath.Join(dir, "notifyd.yaml")
	yaml := fmt.Sprintf(`
postgres: {url: %q}
redis:    {url: %q, prefix: %q}
plugins:  {dir: %q, start_timeout: 3s}
http:     {listen: %q, tokens: [%q]}
log:      {level: warn}
channels:
  hooks:
    plugin: webhook
    config: {url: %q, timeout: 2s}
  hog:
    plugin: sessionhog
`, db.URL, rds.URL, rds.Prefix, plugins, d.addr, token, ok.URL+"/hook")
	if err := os.WriteFile(d.cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(d.bin, "serve", "--config", d.cfg)
	d.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir}
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
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		// The grandchildren left their process group on purpose.
		for _, pid := range hogGrandchildren(hog) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("notifyd's log:\n%s", tail(d.log.String(), 40))
		}
	})
	var err error
	if d.c, err = client.New("http://"+d.addr, token); err != nil {
		t.Fatal(err)
	}

	// Ready, with the bad channel reported stopped; a grandchild still
	// alive then proves the start did not wait for it.
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := d.c.Ready(context.Background())
		if err == nil && r.Status == "ready" && r.Checks["channel:hog"] == "stopped" {
			break
		}
		select {
		case <-d.exited:
			t.Fatalf("notifyd serve exited before it was ready (%v)", d.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("notifyd not ready with channel hog stopped 60 s after its start (plugins.start_timeout 3s): /readyz %+v, %v", r, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	pids := hogGrandchildren(hog)
	if len(pids) == 0 {
		t.Fatal("the hog wrote no grandchild pid: the test proves nothing")
	}
	if syscall.Kill(pids[0], 0) != nil {
		t.Errorf("the hog's grandchild %d is gone: the start may have waited for it", pids[0])
	}

	for id, n := range d.waitFinal(t, enqueueOK(t, d, "hooks", 5), 60*time.Second) {
		if n.Status != "SENT" {
			t.Errorf("notification %d on the webhook channel: %s (%q), want SENT", id, n.Status, n.LastError)
		}
	}
	chs, err := d.c.Channels(context.Background())
	if err != nil {
		t.Fatalf("GET /v1/channels: %v", err)
	}
	seen := false
	for _, ch := range chs.Channels {
		if ch.Name != "hog" {
			continue
		}
		seen = true
		if ch.Running || !strings.Contains(ch.Error, "plugin sessionhog") || !strings.Contains(ch.Error, "plugins.start_timeout") {
			t.Errorf("channel hog: running %v, error %.300q; want stopped with an error naming plugin sessionhog and plugins.start_timeout", ch.Running, ch.Error)
		}
	}
	if !seen {
		t.Error("GET /v1/channels does not list channel hog")
	}
	d.alive(t)
}

// hogGrandchildren are the pids the sessionhog plugin at exe wrote.
func hogGrandchildren(exe string) []int {
	raw, _ := os.ReadFile(exe + ".children")
	var pids []int
	for _, f := range strings.Fields(string(raw)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}
