package delivery

import (
	"fmt"
	"testing"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/providerclient"
)

// TestDefaultKeys: a message without an idempotency key gets notifyd-<id>
// (what fmt.Sprintf("notifyd-%d", id) wrote before); one with a key keeps
// it; a batch's default keys cost one allocation.
func TestDefaultKeys(t *testing.T) {
	ids := []int64{1, 42, 9, 1 << 40, 100, -3, 1<<63 - 1, 7}
	msgs := make([]sdk.Message, len(ids))
	for i, id := range ids {
		msgs[i].ID = id
		if i%3 == 1 {
			msgs[i].IdempotencyKey = fmt.Sprint("client-", id)
		}
	}
	defaultKeys(msgs)
	for i, m := range msgs {
		want := fmt.Sprintf("notifyd-%d", m.ID)
		if i%3 == 1 {
			want = fmt.Sprint("client-", m.ID)
		}
		if m.IdempotencyKey != want {
			t.Errorf("message %d: key %q, want %q", i, m.IdempotencyKey, want)
		}
	}
	keyed := []sdk.Message{{ID: 5, IdempotencyKey: "k"}}
	defaultKeys(keyed)
	if keyed[0].IdempotencyKey != "k" {
		t.Errorf("a keyed message's key became %q", keyed[0].IdempotencyKey)
	}

	batch := make([]sdk.Message, 256)
	if n := testing.AllocsPerRun(20, func() {
		for i := range batch {
			batch[i] = sdk.Message{ID: int64(1e9 + i)}
		}
		defaultKeys(batch)
	}); n > 2 {
		t.Errorf("default keys of 256 messages: %v allocations, want 2 at most", n)
	}
}

// TestKeepAnswered: the partial-death path (one call's verdicts split between
// a death and answers happens only when a batch past maxCallBytes goes out in
// several calls and the process dies between them): the answered messages
// keep their own verdicts, in order, and the dead ones go.
func TestKeepAnswered(t *testing.T) {
	batch := []outbox.Claimed{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}}
	verdicts := []sdk.Verdict{
		sdk.Success(nil),
		sdk.Transient(providerclient.DetailProcessExited + ": exit 3"),
		sdk.Permanent("HTTP 400"),
		sdk.Transient(providerclient.DetailProcessExited + ": exit 3"),
	}
	kb, kv, ks := keepAnswered(batch, verdicts, nil, []bool{false, true, false, true})
	if len(kb) != 2 || kb[0].ID != 1 || kb[1].ID != 3 {
		t.Fatalf("kept %v, want ids 1 and 3", kb)
	}
	if kv[0].Outcome != sdk.OutcomeSuccess || kv[1].Outcome != sdk.OutcomePermanent || kv[1].Detail != "HTTP 400" {
		t.Errorf("kept verdicts %v, want each kept message's own", kv)
	}
	if ks != nil {
		t.Errorf("spans %v, want nil when the batch had none", ks)
	}
}
