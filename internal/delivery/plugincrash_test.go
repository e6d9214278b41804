package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/providerclient"
)

// A payload that kills its plugin process (behave's {"crash":true} exits
// mid-call; a real one might exhaust its memory bound or hit a fatal bug)
// costs only itself. Its call's batch-mates used to be retried with it —
// same backoff, same call — and killed again, until retry.max_attempts
// FAILED 15 to 28 of 2,000 innocent notifications around two such payloads (2 of 400 in this test, 20 of 1,000)
// (attempts spent on "plugin exited" and on "plugin unavailable" while it
// restarted). Now a message whose plugin died during its call is left in
// flight, as in a crash of notifyd itself, and comes back as a suspect once
// its claim is stale (design.md §10): through the lane, alone from its
// second crash, quarantined at delivery.quarantine_after. Every innocent
// is SENT, each poison FAILED "quarantined", and the plugin dies at most
// quarantine_after times a poison.
//
// Not parallel: its crash-looping plugin is load the package's heavy-load
// tests (TestEngine_RedisFlushAll) should not run beside.
func TestEngine_PluginKillingPayloadQuarantined(t *testing.T) {
	s := newSink(t, nil)
	b := setup(t, s, func(_ *config.Config, ch *config.Channel) {
		ch.Plugin = "behave"
		ch.Config = map[string]any{"name": "x"}
	})
	testenv.InstallPlugin(t, b.cfg.Plugins.Dir, "behave", "github.com/notifyd/notifyd/internal/pluginhost/testdata/behave")
	ns := make([]outbox.NewNotification, 400)
	for i := range ns {
		ns[i] = outbox.NewNotification{Channel: testChannel, Recipient: "r", Payload: json.RawMessage(`{}`)}
	}
	isPoison := map[int]bool{120: true, 280: true}
	for i := range isPoison {
		ns[i].Payload = json.RawMessage(`{"crash":true}`)
	}
	res, err := b.store.Insert(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	_, host := b.engineHost("n1", delivery.Hooks{})
	counts := b.waitAll(2 * time.Minute)
	if counts[outbox.StatusSent] != int64(len(ns)-len(isPoison)) || counts[outbox.StatusFailed] != int64(len(isPoison)) {
		t.Errorf("finished %v, want %d SENT and the %d poisons FAILED", counts, len(ns)-len(isPoison), len(isPoison))
	}
	quarantine := b.cfg.Delivery.QuarantineAfter
	wrong := 0
	for i, r := range res {
		n := b.wait(r.ID, time.Second)
		switch {
		case isPoison[i] && (n.Status != outbox.StatusFailed || !strings.Contains(n.LastError, "quarantined: notifyd or its plugin died")):
			t.Errorf("poison %d: %s %q, want FAILED quarantined", r.ID, n.Status, n.LastError)
		case isPoison[i] && n.AttemptCount > quarantine+1:
			t.Errorf("poison %d: %d attempts, want at most %d (quarantined at its %dth crash)", r.ID, n.AttemptCount, quarantine+1, quarantine)
		case !isPoison[i] && n.Status != outbox.StatusSent:
			if wrong++; wrong <= 3 {
				t.Errorf("innocent %d: %s after %d attempts, last error %.200q, want SENT", r.ID, n.Status, n.AttemptCount, n.LastError)
			}
		}
	}
	if wrong > 3 {
		t.Errorf("… %d innocents not SENT in all", wrong)
	}
	p, err := host.Plugin(context.Background(), "behave")
	if err != nil {
		t.Fatal(err)
	}
	if got, most := p.Restarts(), quarantine*len(isPoison); got > most {
		t.Errorf("the plugin was restarted %d times, want at most %d (each poison kills it %d times at most)", got, most, quarantine)
	}
}

// Only the host says a plugin died: a plugin's own verdict whose detail
// reads as the host's DetailProcessExited is taken for what it is. A success
// so worded used to be sent again as a suspect (a second send of a message
// its provider took) until quarantined FAILED; a transient one skipped its
// retries for the crash path. Now the first is SENT once, the second retried
// as any transient failure, with the plugin's words marked as its own.
func TestEngine_PluginCannotForgeItsDeath(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	b := setup(t, s, func(_ *config.Config, ch *config.Channel) {
		ch.Plugin = "behave"
		ch.Config = map[string]any{"name": "x"}
		ch.Retry.MaxAttempts = 2
	})
	testenv.InstallPlugin(t, b.cfg.Plugins.Dir, "behave", "github.com/notifyd/notifyd/internal/pluginhost/testdata/behave")
	forged := providerclient.DetailProcessExited + ": forged by the plugin"
	res, err := b.store.Insert(context.Background(), []outbox.NewNotification{
		{Channel: testChannel, Recipient: "r", Payload: json.RawMessage(fmt.Sprintf(`{"say":%q}`, forged))},
		{Channel: testChannel, Recipient: "r", Payload: json.RawMessage(fmt.Sprintf(`{"say":%q,"transient":true}`, forged))},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.engine("", delivery.Hooks{})
	b.waitAll(time.Minute)
	ok, tr := b.wait(res[0].ID, time.Second), b.wait(res[1].ID, time.Second)
	crashes := func(id int64) (n int) {
		if err := b.store.Pool().QueryRow(context.Background(), `SELECT crashes FROM notifications WHERE id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if ok.Status != outbox.StatusSent || ok.AttemptCount != 1 || crashes(ok.ID) != 0 {
		t.Errorf("the success worded as a death: %s after %d attempts, %d crashes (%q), want SENT at its first",
			ok.Status, ok.AttemptCount, crashes(ok.ID), ok.LastError)
	}
	if tr.Status != outbox.StatusFailed || tr.AttemptCount != 2 || crashes(tr.ID) != 0 ||
		!strings.Contains(tr.LastError, "plugin said: "+forged) {
		t.Errorf("the transient failure worded as a death: %s after %d attempts, %d crashes, last error %q; want FAILED at retry.max_attempts (2), no crash, the plugin's words marked %q",
			tr.Status, tr.AttemptCount, crashes(tr.ID), tr.LastError, "plugin said: ")
	}
}

// An SDK plugin refuses one message with its provider's error text as it
// came — Latin-1, not UTF-8 — and delivers its batch-mate in the same call.
// Protobuf refused to marshal the answer, the whole call failed, and the
// host took both for an unknown outcome: the delivered message was sent
// again (SENT after 2 attempts) and the refused one FAILED with the marshal
// error instead of its reason. The SDK now sends every text as valid UTF-8.
func TestEngine_VerdictNotUTF8(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	b := setup(t, s, func(_ *config.Config, ch *config.Channel) {
		ch.Plugin = "behave"
		ch.Config = map[string]any{"name": "x"}
		ch.Retry.MaxAttempts = 3
	})
	testenv.InstallPlugin(t, b.cfg.Plugins.Dir, "behave", "github.com/notifyd/notifyd/internal/pluginhost/testdata/behave")
	res, err := b.store.Insert(context.Background(), []outbox.NewNotification{
		{Channel: testChannel, Recipient: "r1", Payload: json.RawMessage(`{"hello":1}`)},
		{Channel: testChannel, Recipient: "r2", Payload: json.RawMessage(`{"fail":"destinataire refusé","latin1":true}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.engine("", delivery.Hooks{})
	b.waitAll(time.Minute)
	ok, bad := b.wait(res[0].ID, time.Second), b.wait(res[1].ID, time.Second)
	if ok.Status != outbox.StatusSent || ok.AttemptCount != 1 {
		t.Errorf("the delivered message: %s after %d attempts (last error %q), want SENT at its first: the plugin delivered it each time",
			ok.Status, ok.AttemptCount, ok.LastError)
	}
	if bad.Status != outbox.StatusFailed || bad.AttemptCount != 1 || !strings.Contains(bad.LastError, "destinataire refus") {
		t.Errorf("the refused message: %s after %d attempts (last error %q), want FAILED at its first with the provider's reason",
			bad.Status, bad.AttemptCount, bad.LastError)
	}
}
