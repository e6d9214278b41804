package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/api"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/sdk/wire"
)

func TestServer_Channels(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{edit: func(c *config.Config) {}})
	b.deadLetter("orders", "a", "b")
	b.insert("orders", "c", "d", "e")
	// Rows of channels no longer configured, one with a name no Redis
	// queue could have.
	_, err := b.store.Insert(b.ctx, []outbox.NewNotification{
		{Channel: "retired", Recipient: "x", Payload: json.RawMessage(`{}`)},
		{Channel: "we{ird}", Recipient: "x", Payload: json.RawMessage(`{}`)},
	})
	must(t, err)
	_, err = b.queue.Push(b.ctx, "orders", []queue.Item{{ID: 900001}, {ID: 900002, Due: time.Now().Add(time.Hour)}})
	must(t, err)

	got, err := b.c.Channels(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]wire.ChannelStats{}
	var names []string
	for _, c := range got.Channels {
		byName[c.Name] = c
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "alerts,orders,retired,we{ird}" {
		t.Fatalf("channels %v, want alerts, orders, retired, we{ird} (sorted; the last two only have outbox rows)", names)
	}
	o := byName["orders"]
	if !o.Configured || o.Plugin != "webhook" || o.Running {
		t.Errorf("orders %+v: want configured, plugin webhook, not running (engine not started)", o)
	}
	if o.Ready != 1 || o.Delayed != 1 || o.Dead != 2 || o.Processing != 0 {
		t.Errorf("orders queue ready %d delayed %d dead %d processing %d, want 1 1 2 0", o.Ready, o.Delayed, o.Dead, o.Processing)
	}
	if o.Failed != 2 || o.Sent != 0 || o.Counts[wire.StatusPending] != 3 || o.Counts[wire.StatusFailed] != 2 {
		t.Errorf("orders counts failed %d sent %d %v, want 2 failed, 3 pending", o.Failed, o.Sent, o.Counts)
	}
	if len(o.Counts) != 6 {
		t.Errorf("counts %v, want all six statuses", o.Counts)
	}
	if r := byName["retired"]; r.Configured || r.Counts[wire.StatusPending] != 1 {
		t.Errorf("retired %+v: want not configured, 1 pending", r)
	}
	if got.CountsAt.IsZero() {
		t.Error("counts_at is zero")
	}

	t.Run("counts are cached for a few seconds", func(t *testing.T) {
		b.insert("orders", "f")
		again, err := b.c.Channels(b.ctx)
		must(t, err)
		if !again.CountsAt.Equal(got.CountsAt) {
			t.Errorf("counts_at %s, want the cached %s", again.CountsAt, got.CountsAt)
		}
	})
}

// TestServer_ChannelsCountsExpire: with a short TTL a new row shows up.
func TestServer_ChannelsCountsExpire(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	srv := newServer(t, serverOptions{Config: b.cfg, Store: b.store, Engine: b.engine, Redis: b.rds.Client, CountsTTL: time.Nanosecond})
	_ = srv
	b.insert("alerts", "x")
	first := pending(t, b, srv)
	b.insert("alerts", "y")
	if second := pending(t, b, srv); second != first+1 {
		t.Errorf("pending %d after one more insert, want %d (TTL expired)", second, first+1)
	}
}

func pending(t *testing.T, b *bundle, srv *api.Server) int64 {
	t.Helper()
	a := serve(t, srv, "GET", "/v1/channels", "Bearer "+tokenA, "")
	got := decode[wire.Channels](t, wantStatus(t, a, 200))
	for _, c := range got.Channels {
		if c.Name == "alerts" {
			return c.Counts[wire.StatusPending]
		}
	}
	t.Fatalf("no alerts channel in %s", a.body)
	return 0
}

func TestServer_PauseResume(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	t.Run("pause with a reason", func(t *testing.T) {
		if a := b.do("POST", "/v1/channels/orders/pause", `{"reason":"provider maintenance"}`); a.status != 200 {
			t.Fatalf("pause: %d %s", a.status, a.body)
		}
		got, err := b.c.Channels(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range got.Channels {
			if c.Name == "orders" && (!c.Paused || c.PauseReason != "provider maintenance") {
				t.Errorf("orders %+v, want paused with the reason", c)
			}
		}
		paused, err := b.store.PausedChannels(b.ctx, []string{"orders"})
		if err != nil || paused["orders"] != "provider maintenance" {
			t.Errorf("Postgres says %v (%v), want orders paused: the pause must survive a Redis wipe", paused, err)
		}
	})
	t.Run("resume", func(t *testing.T) {
		if a := b.do("POST", "/v1/channels/orders/resume", ""); a.status != 200 {
			t.Fatalf("resume: %d %s", a.status, a.body)
		}
		if paused, _ := b.store.PausedChannels(b.ctx, []string{"orders"}); len(paused) != 0 {
			t.Errorf("paused after resume: %v", paused)
		}
	})
	t.Run("pause without a body", func(t *testing.T) {
		if a := b.do("POST", "/v1/channels/orders/pause", ""); a.status != 200 {
			t.Errorf("pause without body: %d %s", a.status, a.body)
		}
	})
	t.Run("errors", func(t *testing.T) {
		if a := b.do("POST", "/v1/channels/nope/pause", ""); a.status != 404 {
			t.Errorf("unknown channel: %d, want 404", a.status)
		}
		if a := b.do("POST", "/v1/channels/orders/pause", `{"reson":"x"}`); a.status != 400 {
			t.Errorf("unknown field: %d, want 400", a.status)
		}
		if a := b.doAuth("POST", "/v1/channels/orders/resume", "Bearer wrong-token-0123456789", ""); a.status != 401 {
			t.Errorf("wrong token: %d, want 401", a.status)
		}
	})
}
