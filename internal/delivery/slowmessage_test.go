package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

// One message whose provider holds it until its deadline (a receiver that
// takes a minute to answer, a recipient address that is a tarpit) shares a
// plugin call with 15 others the provider answers at once. The call answered
// every verdict together, so the 15 waited for the slowest — SENT only a
// timeout later — and the call's 16 send permits, the channel's whole
// concurrency, were held all that time: one such message in every batch
// and the channel delivered concurrency messages a timeout. Now a plugin
// answers each verdict as it is known (the protocol's SendStream), the
// engine settles it and frees its permit at once, and the next part does
// not wait for the one permit the slow message holds.
func TestEngine_SlowMessageHoldsNoBatchMate(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil), func(_ *config.Config, ch *config.Channel) {
		ch.Plugin = "behave"
		ch.Config = map[string]any{"name": "x"}
		ch.Concurrency, ch.BatchSize = 16, 16
		ch.Timeout = 2 * time.Minute // the slow message is released by the test, not its deadline
	})
	testenv.InstallPlugin(t, b.cfg.Plugins.Dir, "behave", "github.com/notifyd/notifyd/internal/pluginhost/testdata/behave")
	release := filepath.Join(t.TempDir(), "release")
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o600) })
	insert := func(n int, slow bool) []int64 {
		ns := make([]outbox.NewNotification, n)
		for i := range ns {
			ns[i] = outbox.NewNotification{Channel: testChannel, Recipient: fmt.Sprint("r", i), Payload: json.RawMessage(`{}`)}
		}
		if slow {
			ns[0].Payload = json.RawMessage(fmt.Sprintf(`{"wait":%q}`, release))
		}
		res, err := b.store.Insert(context.Background(), ns)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]int64, n)
		for i, r := range res {
			ids[i] = r.ID
		}
		return ids
	}
	// One batch, one call: inserted together before the engine starts.
	first := insert(16, true)
	slow := first[0]
	b.engine("", delivery.Hooks{})
	sentWhileHeld := func(what string, ids []int64) {
		t.Helper()
		var p testenv.Progress
		for {
			n := 0
			for _, id := range ids {
				row, err := b.store.Get(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				if row.Status == outbox.StatusSent {
					n++
				}
			}
			if n == len(ids) {
				return
			}
			p.Observe(int64(n))
			if p.Stalled(20*time.Second, 3) {
				t.Fatalf("%s: %d of %d SENT while the slow message is held (%s): they wait for it", what, n, len(ids), &p)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	sentWhileHeld("its 15 batch-mates", first[1:])
	// The slow message holds one permit; the next parts use the others.
	sentWhileHeld("32 notifications enqueued after it", insert(32, false))
	if row, err := b.store.Get(context.Background(), slow); err != nil || row.Status != outbox.StatusProcessing {
		t.Fatalf("the slow message = %+v (%v), want still PROCESSING (held by its provider)", row, err)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if row := b.wait(slow, time.Minute); row.Status != outbox.StatusSent || row.AttemptCount != 1 {
		t.Errorf("the slow message: %s after %d attempts (%q), want SENT at its first", row.Status, row.AttemptCount, row.LastError)
	}
}

// A plugin answers a call at its messages' deadline — an SDK plugin whose
// one message its provider held until then answers the others with it, by
// Send (a plugin built before SendStream, or one not on the SDK) — having
// delivered every message. The engine stopped waiting at that very
// deadline, so the answer's trip back came too late: every message of the
// call, delivered, was taken for an unknown outcome and sent again (here SENT
// after 2 and 3 attempts, FAILED after 5). The host waits the trip back past
// the deadline now (answerGrace), as the plugin host meant to (its
// sendGrace).
func TestEngine_AnswerAtTheDeadlineTaken(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil), func(_ *config.Config, ch *config.Channel) {
		ch.Plugin = "answerlate"
		ch.Config = map[string]any{}
		// The plugin answers at the deadline, so the timeout is the test's
		// length; 1 s was shorter than a claim's wait for its send beside
		// two CPU burners (rehearsal 66: "not sent: the channel's timeout
		// had passed since its claim"), which is not what this is about.
		ch.Timeout = 10 * time.Second
	})
	testenv.InstallPlugin(t, b.cfg.Plugins.Dir, "answerlate", "github.com/notifyd/notifyd/internal/pluginhost/testdata/rawplugin")
	ids := b.sendMany(3, func(i int) string { return fmt.Sprint("r", i) })
	b.engine("", delivery.Hooks{})
	for _, id := range ids {
		if n := b.wait(id, time.Minute); n.Status != outbox.StatusSent || n.AttemptCount != 1 {
			t.Errorf("notification %d: %s after %d attempts (%q), want SENT at its first: the plugin delivered it and said so",
				id, n.Status, n.AttemptCount, n.LastError)
		}
	}
}
