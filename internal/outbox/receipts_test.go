package outbox_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/notifyd/notifyd/internal/outbox"
)

// TestStore_ApplyReceipts: a receipt is recorded once, only on a SENT
// notification of the channel; every other one is answered with its reason,
// and the notification row is never written.
func TestStore_ApplyReceipts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.insertN(t, 6)
	sent, sent2, processing, failed, pending, queued := ids[0], ids[1], ids[2], ids[3], ids[4], ids[5]
	old := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	b.force(t, outbox.StatusSent, 2, old, sent, sent2)
	b.force(t, outbox.StatusProcessing, 1, old, processing)
	b.force(t, outbox.StatusFailed, 3, old, failed)
	b.force(t, outbox.StatusQueued, 1, old, queued)
	other := b.insert(t, outbox.NewNotification{Channel: "other", Recipient: "r", Payload: []byte(`{}`)})[0]
	b.force(t, outbox.StatusSent, 1, old, other)

	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	rs := []outbox.Receipt{
		{NotificationID: sent, Outcome: outbox.ReceiptDelivered, Detail: "handset", ProviderCode: "1000", ReportedAt: at},
		{NotificationID: sent2, Outcome: outbox.ReceiptFailedAfterSend, Detail: "unreachable"},
		{NotificationID: sent, Outcome: outbox.ReceiptFailedAfterSend},
		{NotificationID: processing, Outcome: outbox.ReceiptDelivered},
		{NotificationID: queued, Outcome: outbox.ReceiptDelivered},
		{NotificationID: failed, Outcome: outbox.ReceiptDelivered},
		{NotificationID: pending, Outcome: outbox.ReceiptDelivered},
		{NotificationID: other, Outcome: outbox.ReceiptDelivered},
		{NotificationID: 1 << 50, Outcome: outbox.ReceiptDelivered},
	}
	got, err := b.store.ApplyReceipts(b.ctx, "ch", rs)
	if err != nil {
		t.Fatalf("ApplyReceipts: %v", err)
	}
	want := []string{"", "", outbox.ReceiptRepeated, outbox.ReceiptInFlight, outbox.ReceiptInFlight,
		outbox.ReceiptNotSent, outbox.ReceiptNotSent, outbox.ReceiptUnknown, outbox.ReceiptUnknown}
	if len(got) != len(want) {
		t.Fatalf("got %d answers, want %d", len(got), len(want))
	}
	for i, a := range got {
		if a.NotificationID != rs[i].NotificationID || a.Reason != want[i] || a.Applied != (want[i] == "") {
			t.Errorf("answer %d = %+v; want id %d reason %q", i, a, rs[i].NotificationID, want[i])
		}
	}

	// Again, with the other outcome: nothing changes, and the answer says
	// what is recorded already.
	again, err := b.store.ApplyReceipts(b.ctx, "ch", []outbox.Receipt{{NotificationID: sent, Outcome: outbox.ReceiptFailedAfterSend}})
	if err != nil {
		t.Fatalf("ApplyReceipts again: %v", err)
	}
	if a := again[0]; a.Applied || a.Reason != outbox.ReceiptHasOne || a.Existing != outbox.ReceiptDelivered {
		t.Errorf("second receipt = %+v; want not applied, duplicate of DELIVERED", a)
	}
	if n := b.count(t, `SELECT count(*) FROM notification_receipts`); n != 2 {
		t.Errorf("%d receipts stored, want 2", n)
	}

	n, err := b.store.Get(b.ctx, sent)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	r := n.Receipt
	if r == nil || r.Outcome != outbox.ReceiptDelivered || r.Detail != "handset" || r.ProviderCode != "1000" ||
		!r.ReportedAt.Equal(at) || r.Attempt != 2 || r.ReceivedAt.IsZero() {
		t.Errorf("receipt read back = %+v; want DELIVERED, handset, 1000, reported %s, attempt 2", r, at)
	}
	if n.Status != outbox.StatusSent || !n.UpdatedAt.Equal(old) {
		t.Errorf("notification after its receipt: status %s, updated_at %s; want SENT, untouched %s", n.Status, n.UpdatedAt, old)
	}
	if n2, err := b.store.Get(b.ctx, sent2); err != nil || n2.Receipt == nil || n2.Receipt.Outcome != outbox.ReceiptFailedAfterSend || !n2.Receipt.ReportedAt.IsZero() {
		t.Errorf("Get(%d) receipt = %+v, %v; want FAILED_AFTER_SEND without a reported time", sent2, n2.Receipt, err)
	}
	if n3, err := b.store.Get(b.ctx, pending); err != nil || n3.Receipt != nil {
		t.Errorf("Get(%d) receipt = %+v, %v; want none", pending, n3.Receipt, err)
	}
}

// TestStore_ApplyReceipts_bounds: an outcome the table does not know and a
// batch over the bound are refused before any statement.
func TestStore_ApplyReceipts_bounds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.store.ApplyReceipts(b.ctx, "ch", []outbox.Receipt{{NotificationID: 1, Outcome: "READ"}}); err == nil {
		t.Error("outcome READ accepted")
	}
	if _, err := b.store.ApplyReceipts(b.ctx, "ch", make([]outbox.Receipt, outbox.MaxReceiptBatch+1)); err == nil {
		t.Error("a batch over MaxReceiptBatch accepted")
	}
}

// notification_receipts has no CHECK on its text (migration 00015 bounded
// the other tables' columns): a receipt an application's SQL wrote with a
// 64 MiB detail and a 1 MiB provider code was read whole by every GET of its
// notification (the API, the dashboard, `notifyd status`). It reads back
// within what a callback can record (sdk.MaxReceiptDetail, the provider
// code's 256 bytes), cut and marked; Postgres sends no more than that.
func TestStore_GetReceiptReadBackBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.insertN(t, 1)[0]
	b.force(t, outbox.StatusSent, 1, time.Now(), id)
	if _, err := b.db.Pool.Exec(b.ctx, `INSERT INTO notification_receipts (notification_id, outcome, attempt, provider_code, detail)
		VALUES ($1, 'DELIVERED', 1, repeat('c', 1 << 20), repeat('한', 22 << 20))`, id); err != nil {
		t.Fatal(err)
	}
	n, err := b.store.Get(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r := n.Receipt
	switch {
	case r == nil:
		t.Fatal("no receipt read")
	case len(r.Detail) > outbox.MaxReceiptDetail || !strings.HasSuffix(r.Detail, "[truncated]") || !strings.HasPrefix(r.Detail, "한한"):
		t.Errorf("receipt detail read back as %d bytes (%.20q…), want at most %d, cut and marked", len(r.Detail), r.Detail, outbox.MaxReceiptDetail)
	case len(r.ProviderCode) > outbox.MaxProviderCodeLen || !strings.HasSuffix(r.ProviderCode, "[truncated]"):
		t.Errorf("receipt provider code read back as %d bytes, want at most %d, cut and marked", len(r.ProviderCode), outbox.MaxProviderCodeLen)
	case !utf8.ValidString(r.Detail):
		t.Errorf("receipt detail cut inside a character: %q", r.Detail[len(r.Detail)-20:])
	}
}
