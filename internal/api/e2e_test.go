package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/api"
	"github.com/notifyd/notifyd/sdk/wire"
)

// hookSink records webhook deliveries; a recipient listed in reject is
// answered 400 (a permanent failure) until accept is called.
type hookSink struct {
	srv    *httptest.Server
	reject atomic.Bool
	mu     sync.Mutex
	got    []hookDelivery
}

type hookDelivery struct {
	webhookID, recipient string
	payload              json.RawMessage
}

func newHookSink(t *testing.T) *hookSink {
	s := &hookSink{}
	s.reject.Store(true)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var env struct {
			Recipient string          `json:"recipient"`
			Payload   json.RawMessage `json:"payload"`
		}
		_ = json.Unmarshal(body, &env)
		s.mu.Lock()
		s.got = append(s.got, hookDelivery{r.Header.Get("Idempotency-Key"), env.Recipient, env.Payload})
		s.mu.Unlock()
		if env.Recipient == "picky" && s.reject.Load() {
			http.Error(w, "no such user", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *hookSink) deliveries(recipient string) []hookDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []hookDelivery
	for _, d := range s.got {
		if d.recipient == recipient {
			out = append(out, d)
		}
	}
	return out
}

// waitStatus polls the API until notification id reaches want.
func waitStatus(t *testing.T, b *bundle, id int64, want string) *wire.NotificationInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := b.c.Notification(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if n.Status == want {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("notification %d is %s after 30s, want %s (last error %q)", id, n.Status, want, n.LastError)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServer_EndToEnd drives a real engine with the real webhook plugin
// through the API only: enqueue, status, readiness, channels, metrics, and a
// dead letter replayed once the receiver accepts it.
func TestServer_EndToEnd(t *testing.T) {
	t.Parallel()
	sink := newHookSink(t)
	b := setup(t, setupOptions{sinkURL: sink.srv.URL + "/hook", startEngine: true})

	sent, err := b.c.Enqueue(b.ctx, wire.Notification{
		Channel: "orders", Recipient: "user-7", Payload: json.RawMessage(`{"text":"shipped"}`), IdempotencyKey: "order-42-shipped",
	})
	if err != nil {
		t.Fatal(err)
	}
	n := waitStatus(t, b, sent.ID, wire.StatusSent)
	if n.Attempts != 1 || len(n.History) != 1 || n.History[0].Outcome != "SUCCESS" || n.SentAt.IsZero() {
		t.Errorf("sent notification %+v: want one SUCCESS attempt and sent_at", n)
	}
	got := sink.deliveries("user-7")
	if len(got) != 1 || got[0].webhookID != "order-42-shipped" || !strings.Contains(string(got[0].payload), "shipped") {
		t.Errorf("sink received %+v, want one delivery keyed order-42-shipped", got)
	}

	t.Run("readyz asks the running plugin", func(t *testing.T) {
		r, err := b.c.Ready(b.ctx)
		if err != nil || r.Status != "ready" || r.Checks["plugin:webhook"] != "ok" {
			t.Errorf("Ready = %+v, %v; want ready with plugin:webhook ok", r, err)
		}
	})
	t.Run("channels show the running plugin and the sent count", func(t *testing.T) {
		// The daemon's counts are sampled in the background and may be up
		// to CountsTTL old: the send shows within that bound.
		var chs *wire.Channels
		for deadline := time.Now().Add(api.CountsTTLDefault + time.Second); ; time.Sleep(50 * time.Millisecond) {
			var err error
			if chs, err = b.c.Channels(b.ctx); err != nil {
				t.Fatal(err)
			}
			if i := slices.IndexFunc(chs.Channels, func(c wire.ChannelStats) bool { return c.Name == "orders" }); i < 0 ||
				chs.Channels[i].Sent != 0 || time.Now().After(deadline) {
				break
			}
		}
		for _, c := range chs.Channels {
			if c.Name == "orders" && (!c.Running || c.Plugin != "webhook" || c.Sent != 1) {
				t.Errorf("orders %+v: want running webhook with 1 sent", c)
			}
		}
	})
	t.Run("a dead letter, replayed after the receiver is fixed, is delivered", func(t *testing.T) {
		bad, err := b.c.Enqueue(b.ctx, wire.Notification{Channel: "orders", Recipient: "picky", Payload: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		dead := waitStatus(t, b, bad.ID, wire.StatusFailed)
		if !strings.Contains(dead.LastError, "400") {
			t.Errorf("last_error %q, want the receiver's 400", dead.LastError)
		}
		page, err := b.c.DLQ(b.ctx, wire.DLQQuery{Channel: "orders"})
		if err != nil || len(page.Notifications) != 1 || page.Notifications[0].ID != bad.ID {
			t.Fatalf("DLQ = %+v, %v; want just %d", page, err, bad.ID)
		}
		sink.reject.Store(false)
		rep, err := b.c.ReplayDLQ(b.ctx, wire.DLQSelector{IDs: []int64{bad.ID}})
		if err != nil || rep.Replayed != 1 || rep.Warning != "" {
			t.Fatalf("ReplayDLQ = %+v, %v", rep, err)
		}
		done := waitStatus(t, b, bad.ID, wire.StatusSent)
		if len(done.History) != 2 || done.History[0].Outcome != "PERMANENT" || done.History[1].Outcome != "SUCCESS" {
			t.Errorf("history %+v, want PERMANENT then SUCCESS", done.History)
		}
		if n := len(sink.deliveries("picky")); n != 2 {
			t.Errorf("receiver saw %d deliveries of the replayed one, want 2", n)
		}
	})
	t.Run("plugin and delivery metrics", func(t *testing.T) {
		body := string(wantStatus(t, b.do("GET", "/metrics", ""), 200).body)
		for _, want := range []string{
			`notifyd_plugin_up{plugin="webhook"} 1`,
			`notifyd_plugin_restarts_total{plugin="webhook"} 0`,
			// Counted by the engine through the same registry.
			`notifyd_notifications_total{channel="orders",outcome="sent"} 2`,
			`notifyd_notifications_total{channel="orders",outcome="failed"} 1`,
			`notifyd_dead_letters_total{channel="orders",reason="permanent"} 1`,
			`notifyd_send_duration_seconds_count{channel="orders"} 3`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}
