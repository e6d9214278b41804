package outbox_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
)

func TestStore_ListByRecipient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// alice has a row in every state, on two channels; bob and "Alice"
	// (a case-insensitive or linguistic match would mix her in) do too.
	statuses := []string{
		outbox.StatusSent, outbox.StatusPending, outbox.StatusFailed, outbox.StatusQueued,
		outbox.StatusProcessing, outbox.StatusCancelled, outbox.StatusSent, outbox.StatusPending,
	}
	var alice []int64
	for i, st := range statuses {
		ch := "a"
		if i%2 == 1 {
			ch = "b"
		}
		ids := b.insert(t,
			outbox.NewNotification{Channel: ch, Recipient: "alice", Payload: json.RawMessage(`{}`)},
			outbox.NewNotification{Channel: ch, Recipient: "bob", Payload: json.RawMessage(`{}`)},
			outbox.NewNotification{Channel: ch, Recipient: "Alice", Payload: json.RawMessage(`{}`)},
		)
		b.force(t, st, 1, time.Now(), ids...)
		alice = append(alice, ids[0])
	}
	slices.Reverse(alice) // newest first

	for _, size := range []int{1, 3, 100} {
		var got []int64
		before := int64(0)
		for range len(alice) + 2 {
			page, cut, err := b.store.ListByRecipient(b.ctx, "alice", before, size)
			if err != nil || cut {
				t.Fatalf("ListByRecipient: cut %v, %v; want small rows never cut", cut, err)
			}
			for _, n := range page {
				if n.Recipient != "alice" {
					t.Fatalf("row %d recipient %q, want alice", n.ID, n.Recipient)
				}
				got = append(got, n.ID)
			}
			if len(page) < size {
				break
			}
			before = page[len(page)-1].ID
		}
		if !slices.Equal(got, alice) {
			t.Errorf("pages of %d: ids %v, want %v (every state, newest first)", size, got, alice)
		}
	}
	t.Run("unknown recipient", func(t *testing.T) {
		got, _, err := b.store.ListByRecipient(b.ctx, "carol", 0, 10)
		if err != nil || len(got) != 0 {
			t.Errorf("got %v, %v; want nothing, nil", got, err)
		}
	})
	t.Run("every branch reads an index", func(t *testing.T) {
		// The planner prefers a seq scan on a tiny table; forbid it so the
		// plan shows whether each branch can use its partial index.
		tx, err := b.db.Pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(b.ctx) }()
		if _, err := tx.Exec(b.ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			t.Fatal(err)
		}
		var plan strings.Builder
		rows, err := tx.Query(b.ctx, `EXPLAIN `+outbox.ListByRecipientSQL, "alice", int64(1)<<62, 10)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		for _, index := range []string{"notifications_recipient_bounded", "notifications_pending_due", "notifications_inflight_id"} {
			if !strings.Contains(plan.String(), index) {
				t.Errorf("plan does not use %s:\n%s", index, plan.String())
			}
		}
	})
	t.Run("bad input", func(t *testing.T) {
		if _, _, err := b.store.ListByRecipient(b.ctx, "", 0, 10); err == nil || !strings.Contains(err.Error(), "recipient is empty") {
			t.Errorf("empty recipient: err %v, want one naming the empty recipient", err)
		}
		if _, _, err := b.store.ListByRecipient(b.ctx, "alice", 0, 0); err == nil || !strings.Contains(err.Error(), "limit 0") {
			t.Errorf("limit 0: err %v, want one naming the limit", err)
		}
	})
}

// A recipient's page holds at most MaxPageBytes past its first row however
// large a limit it is asked for: 40 rows of 800 KB (each within the row
// bounds), settled, pending and in flight, come in cut pages, and paging on
// reads every one exactly once, newest first.
func TestStore_ListByRecipient_pageBytes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.db.Pool.Exec(b.ctx, `
		INSERT INTO notifications (channel, recipient, payload, status, attempts)
		SELECT 'big', 'heavy', jsonb_build_object('t', repeat('x', 800000)),
		       (ARRAY['SENT', 'PENDING', 'PROCESSING', 'FAILED'])[1 + i % 4], 1
		FROM generate_series(1, 40) AS i`); err != nil {
		t.Fatal(err)
	}
	readCutPages(t, 40, -1, func(before int64) ([]outbox.Notification, bool, error) {
		return b.store.ListByRecipient(b.ctx, "heavy", before, 1000)
	})
}
