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

// holder holds the message to "slow" until release is closed and answers
// every other at once.
type holder struct{ release chan struct{} }

func (*holder) Describe() sdk.Info { return sdk.Info{Name: "holder", Version: "1"} }

func (h *holder) Configure(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	return sdk.SenderFunc(func(ctx context.Context, msg sdk.Message) sdk.Verdict {
		if msg.Recipient == "slow" {
			select {
			case <-h.release:
			case <-ctx.Done():
				return sdk.Transient("released by its deadline")
			}
		}
		return sdk.Success(nil)
	}), nil
}

// An in-process provider gets the streamed send a plugin binary gets: one
// message it holds does not hold the verdicts of the messages sent with it
// (TestEngine_SlowMessageHoldsNoBatchMate, without a plugin binary).
func TestEngine_InProcessSlowMessageHoldsNoBatchMate(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil))
	cfg := *b.cfg
	cfg.Channels = map[string]config.Channel{testChannel: {Plugin: "holder", Concurrency: 16, BatchSize: 16, Timeout: 2 * time.Minute}}
	h := &holder{release: make(chan struct{})}
	t.Cleanup(func() { close(h.release) })
	ns := make([]outbox.NewNotification, 16)
	for i := range ns {
		ns[i] = outbox.NewNotification{Channel: testChannel, Recipient: "r", Payload: json.RawMessage(`{}`)}
	}
	ns[0].Recipient = "slow"
	res, err := b.store.Insert(context.Background(), ns) // one batch, one call
	if err != nil {
		t.Fatal(err)
	}
	b.startInProcess(&cfg, map[string]sdk.Provider{"holder": h})
	for _, r := range res[1:] {
		// Well within the 2 min the slow message is held: a batch-mate
		// that waited for it would still be PROCESSING.
		if n := b.wait(r.ID, time.Minute); n.Status != outbox.StatusSent {
			t.Fatalf("batch-mate %d: %s (%q), want SENT while the slow message is held", r.ID, n.Status, n.LastError)
		}
	}
	if n, err := b.store.Get(context.Background(), res[0].ID); err != nil || n.Status != outbox.StatusProcessing {
		t.Fatalf("the slow message: %+v (%v), want still PROCESSING (held by its provider)", n, err)
	}
}
