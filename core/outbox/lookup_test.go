package outbox_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/core/outbox"
)

func TestStore_ListByRecipient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var alice []int64
	for i := range 5 {
		ch := "a"
		if i%2 == 1 {
			ch = "b"
		}
		alice = append(alice, b.insert(t,
			outbox.NewNotification{Channel: ch, Recipient: "alice", Payload: json.RawMessage(`{}`)},
			outbox.NewNotification{Channel: ch, Recipient: "bob", Payload: json.RawMessage(`{}`)},
			// Differs from "alice" only in case: a case-insensitive or
			// linguistic match would mix it in.
			outbox.NewNotification{Channel: ch, Recipient: "Alice", Payload: json.RawMessage(`{}`)},
		)[0])
	}
	slices.Reverse(alice) // newest first

	t.Run("pages newest first on every channel", func(t *testing.T) {
		var got []int64
		before := int64(0)
		for {
			page, err := b.store.ListByRecipient(b.ctx, "alice", before, 2)
			if err != nil {
				t.Fatalf("ListByRecipient: %v", err)
			}
			for _, n := range page {
				if n.Recipient != "alice" {
					t.Fatalf("row %d recipient %q, want alice", n.ID, n.Recipient)
				}
				got = append(got, n.ID)
			}
			if len(page) < 2 {
				break
			}
			before = page[len(page)-1].ID
		}
		if !slices.Equal(got, alice) {
			t.Errorf("ids %v, want %v", got, alice)
		}
	})
	t.Run("unknown recipient", func(t *testing.T) {
		got, err := b.store.ListByRecipient(b.ctx, "carol", 0, 10)
		if err != nil || len(got) != 0 {
			t.Errorf("got %v, %v; want nothing, nil", got, err)
		}
	})
	t.Run("uses the recipient index", func(t *testing.T) {
		// The planner prefers a seq scan on a tiny table; forbid it so the
		// plan shows whether the index is usable by the query as written.
		tx, err := b.db.Pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(b.ctx) }()
		if _, err := tx.Exec(b.ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			t.Fatal(err)
		}
		var plan strings.Builder
		rows, err := tx.Query(b.ctx, `EXPLAIN SELECT id FROM notifications
 WHERE recipient COLLATE "C" = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, "alice", int64(1)<<62, 10)
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
		if !strings.Contains(plan.String(), "notifications_recipient") {
			t.Errorf("plan does not use notifications_recipient:\n%s", plan.String())
		}
	})
	t.Run("bad input", func(t *testing.T) {
		if _, err := b.store.ListByRecipient(b.ctx, "", 0, 10); err == nil || !strings.Contains(err.Error(), "recipient is empty") {
			t.Errorf("empty recipient: err %v, want one naming the empty recipient", err)
		}
		if _, err := b.store.ListByRecipient(b.ctx, "alice", 0, 0); err == nil || !strings.Contains(err.Error(), "limit 0") {
			t.Errorf("limit 0: err %v, want one naming the limit", err)
		}
	})
}
