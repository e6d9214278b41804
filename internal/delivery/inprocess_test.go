package delivery_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk"
)

// memo is a provider written here, in the test: no plugin binary.
type memo struct{ sent atomic.Int64 }

func (*memo) Describe() sdk.Info { return sdk.Info{Name: "memo", Version: "1"} }

func (m *memo) Configure(_ context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	return sdk.SenderFunc(func(_ context.Context, msg sdk.Message) sdk.Verdict {
		if msg.Recipient == "nobody" {
			return sdk.Permanent("no such recipient")
		}
		m.sent.Add(1)
		return sdk.Success(json.RawMessage(`{"channel":"` + req.Channel + `"}`))
	}), nil
}

// TestEngine_InProcessProvider: the engine runs with a provider compiled into
// the process (as an application embedding notifyd would), and with a
// channel built in code that leaves its settings zero (the engine applies
// the defaults itself).
func TestEngine_InProcessProvider(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil))
	cfg := *b.cfg
	cfg.Channels = map[string]config.Channel{testChannel: {Plugin: "memo"}} // every other setting zero
	m := &memo{}
	b.startInProcess(&cfg, map[string]sdk.Provider{"memo": m})
	ok := b.send("somebody", "")
	bad := b.send("nobody", "")
	if n := b.wait(ok, 15*time.Second); n.Status != outbox.StatusSent || string(n.Result) != `{"channel": "hooks"}` {
		t.Errorf("somebody: %s result %s, want SENT with the provider's result", n.Status, n.Result)
	}
	if n := b.wait(bad, 15*time.Second); n.Status != outbox.StatusFailed || n.LastError != "no such recipient" {
		t.Errorf("nobody: %s (%q), want FAILED with the provider's reason", n.Status, n.LastError)
	}
	if m.sent.Load() != 1 {
		t.Errorf("provider sent %d, want 1", m.sent.Load())
	}
}
