package api_test

import (
	"strings"
	"testing"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/sdk/client"
)

// withStoppedChannels adds two channels that cannot start to the test
// config: relay, whose plugin is not in plugins.dir, and strict, whose
// webhook config the plugin refuses, quoting a value that must not reach
// the open /readyz.
func withStoppedChannels(ready bool) func(*config.Config) {
	return func(cfg *config.Config) {
		cfg.HTTP.ReadyWithStoppedChannels = ready
		cfg.Channels["relay"] = config.FillChannel(config.Channel{Plugin: "relay"})
		cfg.Channels["strict"] = config.FillChannel(config.Channel{Plugin: "webhook",
			Config: map[string]any{"url": "http://127.0.0.1:9/unused", "timeout": "hunter2-secret"}})
	}
}

func TestServer_StoppedChannel(t *testing.T) {
	t.Parallel()

	wantStopped := func(t *testing.T, got client.Readiness) {
		t.Helper()
		if got.Checks["channel:relay"] != "stopped" || got.Checks["channel:strict"] != "stopped" {
			t.Errorf("checks %v, want channel:relay and channel:strict stopped", got.Checks)
		}
		if _, ok := got.Checks["channel:orders"]; ok {
			t.Errorf("checks %v name the running channel orders", got.Checks)
		}
		if r := got.Stopped["relay"]; !strings.Contains(r, "no such plugin executable") || !strings.Contains(r, "notifyd-plugin-relay") {
			t.Errorf("relay's reason %q, want the missing plugin named", r)
		}
		if r := got.Stopped["strict"]; !strings.Contains(r, "timeout") || strings.Contains(r, "hunter2-secret") {
			t.Errorf("strict's reason %q, want the key named and its value redacted", r)
		}
		if len(got.Stopped) != 2 {
			t.Errorf("stopped %v, want relay and strict only", got.Stopped)
		}
	}

	t.Run("default: /readyz is 503 while a configured channel is stopped", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOptions{startEngine: true, edit: withStoppedChannels(false)})
		got := decode[client.Readiness](t, wantStatus(t, b.doAuth("GET", "/readyz", "", ""), 503))
		if got.Status != "unavailable" || got.Checks["postgres"] != "ok" || got.Checks["plugin:webhook"] != "ok" {
			t.Errorf("readiness %+v, want unavailable with postgres and plugin:webhook ok", got)
		}
		wantStopped(t, got)

		// The other doors: the channel list, the metric and the enqueue.
		chs, err := b.c.Channels(b.ctx)
		must(t, err)
		for _, ch := range chs.Channels {
			switch ch.Name {
			case "relay":
				if ch.Running || !strings.Contains(ch.Error, "no such plugin executable") {
					t.Errorf("GET /v1/channels relay: running %v, error %q; want stopped with the reason", ch.Running, ch.Error)
				}
			case "orders":
				if !ch.Running || ch.Error != "" {
					t.Errorf("GET /v1/channels orders: running %v, error %q; want running", ch.Running, ch.Error)
				}
			}
		}
		metrics := string(wantStatus(t, b.do("GET", "/metrics", ""), 200).body)
		for _, want := range []string{
			`notifyd_channel_up{channel="relay"} 0`, `notifyd_channel_up{channel="strict"} 0`, `notifyd_channel_up{channel="orders"} 1`,
		} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}

		one := decode[client.Enqueued](t, wantStatus(t, b.do("POST", "/v1/notifications", `{"channel":"relay","recipient":"r","payload":{}}`), 202))
		if !strings.Contains(one.Warning, "channel relay is stopped on this instance: ") ||
			!strings.Contains(one.Warning, "no such plugin executable") || !strings.Contains(one.Warning, "kept") {
			t.Errorf("enqueue to relay: warning %q, want the channel, its reason and that it is kept", one.Warning)
		}
		if n, err := b.store.Get(b.ctx, one.ID); err != nil || n.Channel != "relay" {
			t.Errorf("the notification is not kept: %v, %v", n, err)
		}
		batch := decode[client.EnqueuedBatch](t, wantStatus(t, b.do("POST", "/v1/notifications",
			`{"notifications":[{"channel":"orders","recipient":"a","payload":{}},{"channel":"relay","recipient":"b","payload":{}}]}`), 202))
		if w := batch.Notifications[0].Warning; w != "" {
			t.Errorf("batch: the running channel's notification has a warning %q", w)
		}
		if w := batch.Notifications[1].Warning; !strings.HasPrefix(w, "channel relay is stopped") {
			t.Errorf("batch: the stopped channel's notification warns %q", w)
		}
		ok := decode[client.Enqueued](t, wantStatus(t, b.do("POST", "/v1/notifications", `{"channel":"orders","recipient":"r","payload":{}}`), 202))
		if ok.Warning != "" {
			t.Errorf("enqueue to a running channel warns %q", ok.Warning)
		}
	})

	t.Run("http.ready_with_stopped_channels: /readyz is 200 and still names them", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOptions{startEngine: true, edit: withStoppedChannels(true)})
		got := decode[client.Readiness](t, wantStatus(t, b.doAuth("GET", "/readyz", "", ""), 200))
		if got.Status != "ready" {
			t.Errorf("readiness %+v, want ready", got)
		}
		wantStopped(t, got)
	})
}
