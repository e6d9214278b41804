package notifyd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/providers"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/client"
)

// inbox is a provider written here: what an application embedding notifyd
// might deliver through (an in-app inbox), no plugin binary involved.
type inbox struct {
	mu  sync.Mutex
	got map[string][]string // recipient → texts
}

func (*inbox) Describe() sdk.Info { return sdk.Info{Name: "inbox", Version: "1"} }

func (b *inbox) Configure(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	return sdk.SenderFunc(func(_ context.Context, m sdk.Message) sdk.Verdict {
		var p struct{ Text string }
		if err := json.Unmarshal(m.Payload, &p); err != nil || p.Text == "" {
			return sdk.Permanent("payload has no text")
		}
		b.mu.Lock()
		b.got[m.Recipient] = append(b.got[m.Recipient], p.Text)
		b.mu.Unlock()
		return sdk.Success(nil)
	}), nil
}

// TestStart_embedded: the whole daemon in this process, from a config built
// in code and a provider written in Go; a notification sent through its API
// is delivered, one the provider refuses is dead-lettered, and Stop stops it.
func TestStart_embedded(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	rds := testenv.NewRedis(t)
	cfg := config.Default()
	cfg.Postgres.URL, cfg.Redis.URL, cfg.Redis.Prefix = db.URL, rds.URL, rds.Prefix
	cfg.HTTP.Listen, cfg.HTTP.Tokens = "127.0.0.1:0", []string{"embedded-token-0123456789"}
	cfg.Log.Level = "warn"
	cfg.Channels = map[string]config.Channel{"inbox": {Plugin: "inbox"}} // the rest: defaults, applied by the engine
	box := &inbox{got: map[string][]string{}}
	providers := providers.NewInProcess(map[string]sdk.Provider{"inbox": box}, nil)
	t.Cleanup(providers.Close)

	d, err := notifyd.Start(context.Background(), &cfg, notifyd.Options{Providers: providers})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = d.Stop(context.Background())
		}
	})
	c, err := client.New(fmt.Sprintf("http://%s", d.Addr()), "embedded-token-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	ok, err := c.Enqueue(ctx, client.Notification{Channel: "inbox", Recipient: "ada", Payload: json.RawMessage(`{"text":"hello"}`)})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := c.Enqueue(ctx, client.Notification{Channel: "inbox", Recipient: "bob", Payload: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]string{ok.ID: "SENT", bad.ID: "FAILED"} {
		deadline := time.Now().Add(15 * time.Second)
		for {
			n, err := c.Notification(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if n.Status == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("notification %d is %s (%q), want %s", id, n.Status, n.LastError, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	box.mu.Lock()
	got := box.got["ada"]
	box.mu.Unlock()
	if len(got) != 1 || got[0] != "hello" {
		t.Errorf("the inbox holds %v for ada, want [hello]", got)
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	stopped = true
	if _, err := c.Notification(ctx, ok.ID); err == nil {
		t.Error("the API still answers after Stop")
	}
}
