package outbox_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/internal/outbox"
)

// The dashboard's lists are charged httpguard.SummaryBytes a row of the
// bound on answers in flight: what a Summary reads at most.
func TestStore_SummaryBytesIsTheChargesRow(t *testing.T) {
	t.Parallel()
	if httpguard.SummaryBytes != outbox.SummaryBytes {
		t.Errorf("httpguard.SummaryBytes = %d, outbox.SummaryBytes = %d: keep them equal", httpguard.SummaryBytes, outbox.SummaryBytes)
	}
}

// A summary reads what a list shows of a row and nothing more: the row's
// payload and result are neither read nor sent, its error is cut to
// SummaryErrorChars characters in Postgres (and says so), and the pages
// go as ListFailed's and ListByRecipient's do.
func TestStore_Summaries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []int64
	for i := range 5 {
		ch := "a"
		if i%2 == 1 {
			ch = "b"
		}
		ids = append(ids, b.insert(t, outbox.NewNotification{Channel: ch, Recipient: "alice", Payload: json.RawMessage(`{"k":1}`)})...)
	}
	long := strings.Repeat("é", outbox.SummaryErrorChars) + "TAIL" // 2 bytes a character
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET status = 'FAILED', attempts = 3,
	       payload = jsonb_build_object('p', repeat('x', 1000000)), result = '{"r":1}', last_error = $2
	 WHERE id = ANY($1)`, ids[:4], long); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET last_error = 'short' WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}

	all, err := b.store.ListFailedSummaries(b.ctx, "", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 || all[0].ID != ids[0] || all[3].ID != ids[3] {
		t.Fatalf("every channel's dead letters: %+v, want ids %v", all, ids[:4])
	}
	if m := all[0]; m.LastError != "short" || m.LastErrorCut || m.Status != "FAILED" || m.Attempts != 3 || m.Recipient != "alice" || m.Channel != "a" || m.CreatedAt.IsZero() {
		t.Errorf("a summary: %+v", m)
	}
	if m := all[1]; m.LastError != strings.Repeat("é", outbox.SummaryErrorChars) || !m.LastErrorCut {
		t.Errorf("a summary of a long error: %d bytes, cut %v; want the first %d characters, cut", len(m.LastError), m.LastErrorCut, outbox.SummaryErrorChars)
	}
	page, err := b.store.ListFailedSummaries(b.ctx, "a", ids[0], 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].ID != ids[2] {
		t.Errorf("channel a's dead letters after %d: %+v, want [%d]", ids[0], page, ids[2])
	}
	if _, err := b.store.ListFailedSummaries(b.ctx, "", 0, outbox.MaxSummaryPage+1); err == nil {
		t.Errorf("a page of %d summaries was read", outbox.MaxSummaryPage+1)
	}

	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET idempotency_key = 'k' WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	if m, err := b.store.SummaryOf(b.ctx, ids[1]); err != nil || m.ID != ids[1] || !m.LastErrorCut {
		t.Errorf("SummaryOf(%d): %+v, %v", ids[1], m, err)
	}
	if m, err := b.store.SummaryByKey(b.ctx, "k"); err != nil || m.ID != ids[1] {
		t.Errorf("SummaryByKey(k): %+v, %v", m, err)
	}
	if _, err := b.store.SummaryOf(b.ctx, ids[4]+100); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("SummaryOf an id that does not exist: %v, want ErrNotFound", err)
	}
	if _, err := b.store.SummaryByKey(b.ctx, "none"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("SummaryByKey of a key nobody has: %v, want ErrNotFound", err)
	}

	byRecipient, err := b.store.ListSummariesByRecipient(b.ctx, "alice", ids[4], 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(byRecipient) != 2 || byRecipient[0].ID != ids[3] || byRecipient[1].ID != ids[2] {
		t.Errorf("alice's notifications before %d: %+v, want [%d %d]", ids[4], byRecipient, ids[3], ids[2])
	}
}
