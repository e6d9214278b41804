package hostile

import (
	"context"
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
	var hog string
	t.Cleanup(func() { // after the daemon's own cleanup: the grandchildren left its process group on purpose
		for _, pid := range hogGrandchildren(hog) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	d := start(t, withPlugin("sessionhog", "github.com/notifyd/notifyd/internal/pluginhost/testdata/sessionhog"),
		withStartTimeout("3s"), withStoppedChannels(), withChannels(func(*daemon) string { return "\n  hog:\n    plugin: sessionhog\n" }))
	hog = d.plugins["sessionhog"]

	// Up (start waited for it), with the bad channel reported stopped and
	// why, which keeps /readyz at 503 (the default rule: a rollout stops
	// here); a grandchild still alive then proves the start did not wait.
	if r, err := d.c.Ready(context.Background()); client.StatusCode(err) != 503 || r.Checks["channel:hog"] != "stopped" ||
		!strings.Contains(r.Stopped["hog"], "plugins.start_timeout") {
		t.Fatalf("/readyz = %+v, %v; want 503 with channel:hog stopped, its reason naming plugins.start_timeout", r, err)
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
func hogGrandchildren(exe string) []int { return testenv.ReadPIDs(exe + ".children") }
