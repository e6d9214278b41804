package outbox_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/outbox"
)

func TestInsert(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("one row, every field stored", func(t *testing.T) {
		due := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		got, err := b.store.Insert(b.ctx, []outbox.NewNotification{{
			Channel: "quiz", Recipient: "alice", Payload: json.RawMessage(`{"text":"hi"}`),
			IdempotencyKey: "one-row", DueAt: due, JobID: 42,
		}})
		if err != nil {
			t.Fatalf("Insert: %v", err)
		}
		if len(got) != 1 || got[0].ID == 0 || got[0].Duplicate || got[0].Status != outbox.StatusPending {
			t.Fatalf("Insert = %+v, want one new PENDING row", got)
		}
		n, err := b.store.Get(b.ctx, got[0].ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if n.Channel != "quiz" || n.Recipient != "alice" || n.IdempotencyKey != "one-row" || n.JobID != 42 ||
			!n.DueAt.Equal(due) || n.Status != outbox.StatusPending || n.AttemptCount != 0 {
			t.Errorf("Get = %+v, want the inserted fields", n)
		}
		var payload map[string]string
		if err := json.Unmarshal(n.Payload, &payload); err != nil || payload["text"] != "hi" {
			t.Errorf("payload = %s, want {\"text\":\"hi\"}", n.Payload)
		}
	})

	t.Run("zero due_at is now, no key and no job are null", func(t *testing.T) {
		before := time.Now().Add(-time.Second)
		got, err := b.store.Insert(b.ctx, []outbox.NewNotification{{Channel: "c", Recipient: "r", Payload: json.RawMessage(`1`)}})
		if err != nil {
			t.Fatalf("Insert: %v", err)
		}
		n, err := b.store.Get(b.ctx, got[0].ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if n.DueAt.Before(before) || n.DueAt.After(time.Now().Add(time.Second)) {
			t.Errorf("due_at = %v, want about now", n.DueAt)
		}
		if nulls := b.count(t, `SELECT count(*) FROM notifications WHERE id = $1 AND idempotency_key IS NULL AND job_id IS NULL`, n.ID); nulls != 1 {
			t.Errorf("idempotency_key/job_id not NULL for a row without them")
		}
	})

	t.Run("repeated key returns the original", func(t *testing.T) {
		first := b.insert(t, outbox.NewNotification{Channel: "c", Recipient: "r", Payload: json.RawMessage(`{}`), IdempotencyKey: "again"})
		got, err := b.store.Insert(b.ctx, []outbox.NewNotification{
			{Channel: "c", Recipient: "other", Payload: json.RawMessage(`{}`), IdempotencyKey: "again"},
			{Channel: "c", Recipient: "new", Payload: json.RawMessage(`{}`), IdempotencyKey: "again-new"},
		})
		if err != nil {
			t.Fatalf("Insert: %v", err)
		}
		if got[0].ID != first[0] || !got[0].Duplicate || got[0].Status != outbox.StatusPending {
			t.Errorf("repeat = %+v, want id %d duplicate PENDING", got[0], first[0])
		}
		if got[1].Duplicate || got[1].ID == first[0] {
			t.Errorf("new key = %+v, want a new row", got[1])
		}
		if n := b.count(t, `SELECT count(*) FROM notifications WHERE idempotency_key = 'again'`); n != 1 {
			t.Errorf("rows with key again = %d, want 1", n)
		}
	})

	t.Run("duplicate reports the original's current status", func(t *testing.T) {
		id := b.insert(t, outbox.NewNotification{Channel: "c", Recipient: "r", Payload: json.RawMessage(`{}`), IdempotencyKey: "cancelled-key"})
		if _, err := b.store.Cancel(b.ctx, id); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		got, err := b.store.Insert(b.ctx, []outbox.NewNotification{{Channel: "c", Recipient: "r", Payload: json.RawMessage(`{}`), IdempotencyKey: "cancelled-key"}})
		if err != nil {
			t.Fatalf("Insert: %v", err)
		}
		if want := (outbox.Inserted{ID: id[0], Duplicate: true, Status: outbox.StatusCancelled}); got[0] != want {
			t.Errorf("Insert = %+v, want %+v", got[0], want)
		}
	})

	t.Run("duplicates inside one batch", func(t *testing.T) {
		got, err := b.store.Insert(b.ctx, []outbox.NewNotification{
			{Channel: "c", Recipient: "a", Payload: json.RawMessage(`{}`), IdempotencyKey: "batch-k1"},
			{Channel: "c", Recipient: "b", Payload: json.RawMessage(`{}`)},
			{Channel: "c", Recipient: "c", Payload: json.RawMessage(`{}`), IdempotencyKey: "batch-k1"},
			{Channel: "c", Recipient: "d", Payload: json.RawMessage(`{}`)},
			{Channel: "c", Recipient: "e", Payload: json.RawMessage(`{}`), IdempotencyKey: "batch-k1"},
		})
		if err != nil {
			t.Fatalf("Insert: %v", err)
		}
		if got[0].Duplicate || got[1].Duplicate || got[3].Duplicate {
			t.Errorf("first of a key or keyless rows marked duplicate: %+v", got)
		}
		for _, i := range []int{2, 4} {
			if !got[i].Duplicate || got[i].ID != got[0].ID || got[i].Status != outbox.StatusPending {
				t.Errorf("row %d = %+v, want duplicate of id %d", i, got[i], got[0].ID)
			}
		}
		if got[1].ID == got[3].ID || got[1].ID == got[0].ID {
			t.Errorf("keyless rows share an id: %+v", got)
		}
		n, err := b.store.Get(b.ctx, got[0].ID)
		if err != nil || n.Recipient != "a" {
			t.Errorf("the key's row = %+v (%v), want the first of the batch (recipient a)", n, err)
		}
		if c := b.count(t, `SELECT count(*) FROM notifications WHERE idempotency_key = 'batch-k1'`); c != 1 {
			t.Errorf("rows with key batch-k1 = %d, want 1", c)
		}
	})

	t.Run("empty batch", func(t *testing.T) {
		got, err := b.store.Insert(b.ctx, nil)
		if err != nil || len(got) != 0 {
			t.Errorf("Insert(nil) = %v, %v; want nothing", got, err)
		}
	})
}

func TestInsert_Batch10000(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ns := make([]outbox.NewNotification, outbox.MaxInsertBatch)
	for i := range ns {
		ns[i] = notif(i)
		if i%2 == 0 {
			ns[i].IdempotencyKey = fmt.Sprintf("k-%d", i)
		}
	}
	got, err := b.store.Insert(b.ctx, ns)
	if err != nil {
		t.Fatalf("Insert 10,000: %v", err)
	}
	seen := make(map[int64]bool, len(got))
	for i, in := range got {
		if in.Duplicate || in.ID == 0 || seen[in.ID] {
			t.Fatalf("row %d = %+v, want a new distinct id", i, in)
		}
		seen[in.ID] = true
	}
	if n := b.count(t, `SELECT count(*) FROM notifications`); n != len(ns) {
		t.Errorf("rows = %d, want %d", n, len(ns))
	}
	// Each returned id holds its own input row.
	if n := b.count(t, `SELECT count(*) FROM notifications n JOIN unnest($1::bigint[]) WITH ORDINALITY AS t(id, ord) ON t.id = n.id
		WHERE n.recipient = 'user-' || (t.ord - 1)`, func() []int64 {
		out := make([]int64, len(got))
		for i, in := range got {
			out[i] = in.ID
		}
		return out
	}()); n != len(ns) {
		t.Errorf("rows whose id maps back to their input = %d, want %d", n, len(ns))
	}

	again, err := b.store.Insert(b.ctx, ns)
	if err != nil {
		t.Fatalf("Insert the same 10,000 again: %v", err)
	}
	dups := 0
	for i, in := range again {
		if in.Duplicate {
			dups++
			if in.ID != got[i].ID {
				t.Fatalf("row %d: duplicate id %d, want the original %d", i, in.ID, got[i].ID)
			}
		}
	}
	if dups != len(ns)/2 {
		t.Errorf("duplicates on re-insert = %d, want %d (the keyed half)", dups, len(ns)/2)
	}

	if _, err := b.store.Insert(b.ctx, make([]outbox.NewNotification, outbox.MaxInsertBatch+1)); err == nil ||
		!strings.Contains(err.Error(), "at most 10000") {
		t.Errorf("Insert 10,001: err %v, want a batch-size error", err)
	}
}

func TestInsert_Transaction(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("rolled back leaves nothing", func(t *testing.T) {
		tx, err := b.db.Pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := notif(1)
		n.IdempotencyKey = "rolled-back"
		got, err := outbox.Insert(b.ctx, tx, []outbox.NewNotification{n, n})
		if err != nil {
			t.Fatalf("Insert in tx: %v", err)
		}
		if got[0].Duplicate || !got[1].Duplicate {
			t.Errorf("Insert in tx = %+v, want new then duplicate", got)
		}
		if err := tx.Rollback(b.ctx); err != nil {
			t.Fatal(err)
		}
		if c := b.count(t, `SELECT count(*) FROM notifications WHERE idempotency_key = 'rolled-back'`); c != 0 {
			t.Errorf("rows after rollback = %d, want 0", c)
		}
		// The key is free again.
		again, err := b.store.Insert(b.ctx, []outbox.NewNotification{n})
		if err != nil || again[0].Duplicate {
			t.Errorf("Insert after rollback = %+v, %v; want a new row", again, err)
		}
	})

	t.Run("key committed by a concurrent transaction", func(t *testing.T) {
		n := notif(2)
		n.IdempotencyKey = "concurrent"
		tx, err := b.db.Pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(b.ctx) //nolint:errcheck // after Commit it is a no-op
		first, err := outbox.Insert(b.ctx, tx, []outbox.NewNotification{n})
		if err != nil {
			t.Fatalf("Insert in tx: %v", err)
		}
		// The second insert waits on the first transaction's key, takes its
		// snapshot before the commit, and must still report the original.
		done := make(chan []outbox.Inserted, 1)
		errc := make(chan error, 1)
		go func() {
			got, err := b.store.Insert(b.ctx, []outbox.NewNotification{notif(3), n})
			errc <- err
			done <- got
		}()
		waitForLockWait(t, b)
		if err := tx.Commit(b.ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("concurrent Insert: %v", err)
		}
		got := <-done
		if got[0].Duplicate || !got[1].Duplicate || got[1].ID != first[0].ID {
			t.Errorf("concurrent Insert = %+v, want new, then duplicate of %d", got, first[0].ID)
		}
	})
}

// waitForLockWait waits until some session of this schema waits on a lock.
func waitForLockWait(t *testing.T, b *bundle) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var waiting bool
		err := b.db.Pool.QueryRow(b.ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%notifications%' AND datname = current_database()
			  AND pid IN (SELECT pid FROM pg_locks WHERE relation = 'notifications'::regclass))`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the concurrent insert never waited on the first transaction's key")
}

func TestValidate(t *testing.T) {
	t.Parallel()
	ok := outbox.NewNotification{Channel: "c", Recipient: "r", Payload: json.RawMessage(`{}`)}
	with := func(f func(*outbox.NewNotification)) outbox.NewNotification {
		n := ok
		f(&n)
		return n
	}
	tests := []struct {
		name string
		n    outbox.NewNotification
		want string
	}{
		{"empty channel", with(func(n *outbox.NewNotification) { n.Channel = "" }), "notification 1: channel is empty"},
		{"long channel", with(func(n *outbox.NewNotification) { n.Channel = strings.Repeat("x", 201) }), "notification 1: channel is 201 bytes long"},
		{"empty recipient", with(func(n *outbox.NewNotification) { n.Recipient = "" }), "notification 1: recipient is empty"},
		{"long recipient", with(func(n *outbox.NewNotification) { n.Recipient = strings.Repeat("r", 1025) }), "notification 1: recipient is 1025 bytes long, at most 1024"},
		{"large payload", with(func(n *outbox.NewNotification) {
			n.Payload = json.RawMessage(`"` + strings.Repeat("p", outbox.MaxPayloadBytes) + `"`)
		}), "notification 1: payload is 1048578 bytes, at most 1048576"},
		{"NUL in recipient", with(func(n *outbox.NewNotification) { n.Recipient = "a\x00b" }), "notification 1: recipient contains a NUL byte"},
		{"bad UTF-8 in key", with(func(n *outbox.NewNotification) { n.IdempotencyKey = "\xff" }), "notification 1: idempotency_key is not valid UTF-8"},
		{"long key", with(func(n *outbox.NewNotification) { n.IdempotencyKey = strings.Repeat("k", 513) }), "notification 1: idempotency_key is 513 bytes long"},
		{"empty payload", with(func(n *outbox.NewNotification) { n.Payload = nil }), "notification 1: payload is empty"},
		{"invalid payload", with(func(n *outbox.NewNotification) { n.Payload = json.RawMessage(`{"a":`) }), "notification 1: payload is not valid JSON"},
		{"NUL escape in payload", with(func(n *outbox.NewNotification) { n.Payload = json.RawMessage(`{"a":"x\u0000"}`) }), `notification 1: payload contains \u0000`},
		{"a number past numeric's range", with(func(n *outbox.NewNotification) { n.Payload = json.RawMessage(`{"n":1e999999}`) }), "payload has a number at $.n"},
		{"a tiny number past numeric's range", with(func(n *outbox.NewNotification) { n.Payload = json.RawMessage(`{"n":[1,-1e-999999]}`) }), "payload has a number at $.n[1]"},
		{"lone high surrogate in payload", with(func(n *outbox.NewNotification) { n.Payload = json.RawMessage(`{"a":"\ud800x"}`) }), `payload has an unpaired surrogate escape \uD800`},
		{"lone low surrogate in payload", with(func(n *outbox.NewNotification) { n.Payload = json.RawMessage(`{"a":"\udc00"}`) }), `payload has an unpaired surrogate escape \uDC00`},
		{"negative job", with(func(n *outbox.NewNotification) { n.JobID = -1 }), "notification 1: job_id is -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := outbox.Validate([]outbox.NewNotification{ok, tt.n})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	t.Run("valid", func(t *testing.T) {
		pair := with(func(n *outbox.NewNotification) {
			n.Payload = json.RawMessage(`{"a":"\ud83d\ude00","e":"1e999999 in a string","n":-12.5e-3,"q":"\"1e999999"}`)
		})
		if err := outbox.Validate([]outbox.NewNotification{ok, pair}); err != nil {
			t.Errorf("Validate of a surrogate pair = %v, want nil", err)
		}
		escaped := with(func(n *outbox.NewNotification) { n.Payload = json.RawMessage(`{"a":"\\u0000 is text"}`) })
		if err := outbox.Validate([]outbox.NewNotification{ok, escaped}); err != nil {
			t.Errorf("Validate = %v, want nil", err)
		}
	})
	t.Run("stored as validated", func(t *testing.T) {
		b := setup(t)
		escaped := with(func(n *outbox.NewNotification) { n.Payload = json.RawMessage(`{"a":"\\u0000 is text"}`) })
		if _, err := b.store.Insert(b.ctx, []outbox.NewNotification{escaped}); err != nil {
			t.Errorf("Insert of a valid escaped backslash: %v", err)
		}
		if _, err := b.store.Insert(b.ctx, []outbox.NewNotification{ok, with(func(n *outbox.NewNotification) { n.Recipient = "" })}); err == nil ||
			!strings.Contains(err.Error(), "notification 1: recipient is empty") {
			t.Errorf("Insert of a bad batch: %v, want the validation error", err)
		}
	})
}

// The API's payload bound may only lower the outbox's: config validates
// http.max_payload_bytes against its own copy of the ceiling.
func TestBounds_PayloadCeilingMatchesConfig(t *testing.T) {
	if config.MaxPayloadCeiling != outbox.MaxPayloadBytes {
		t.Fatalf("config.MaxPayloadCeiling = %d, outbox.MaxPayloadBytes = %d; want them equal",
			config.MaxPayloadCeiling, outbox.MaxPayloadBytes)
	}
}
