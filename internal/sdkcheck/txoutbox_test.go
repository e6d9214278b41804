package sdkcheck_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/traceparent"
	"github.com/notifyd/notifyd/sdk/txoutbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// The transactional enqueue is in the SDK module, but its contract is with
// the daemon's schema (internal/outbox's migrations): it is tested here, against
// a real Postgres migrated by the daemon, beside the daemon's own store.

// txBundle is a schema with an application table beside notifyd's.
type txBundle struct {
	ctx   context.Context
	db    *testenv.DB
	store *outbox.Store
}

func setupTx(t *testing.T) *txBundle {
	t.Helper()
	db := testenv.NewDB(t)
	ctx := testenv.Context(t)
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE shop_orders (id bigint PRIMARY KEY, item text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return &txBundle{ctx: ctx, db: db, store: testenv.Store(t, db.Pool)}
}

func (b *txBundle) count(t *testing.T, sql string) int {
	t.Helper()
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestEnqueueTx(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	shipped := wire.Notification{Channel: "orders", Recipient: "user-7", Payload: json.RawMessage(`{"text":"shipped"}`), IdempotencyKey: "order-1"}

	t.Run("a rolled-back transaction leaves no notification", func(t *testing.T) {
		tx, err := b.db.Pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(b.ctx, `INSERT INTO shop_orders VALUES (1, 'book')`); err != nil {
			t.Fatal(err)
		}
		res, err := txoutbox.EnqueueTx(b.ctx, tx, shipped)
		if err != nil || res.ID <= 0 || res.Status != wire.StatusPending {
			t.Fatalf("EnqueueTx = %+v, %v", res, err)
		}
		// Inside the transaction the row is there; outside, not yet.
		if n := b.count(t, `SELECT count(*) FROM notifications`); n != 0 {
			t.Errorf("%d notifications visible before commit, want 0", n)
		}
		if err := tx.Rollback(b.ctx); err != nil {
			t.Fatal(err)
		}
		if n := b.count(t, `SELECT count(*) FROM notifications`); n != 0 {
			t.Errorf("%d notifications after rollback, want 0", n)
		}
		if n := b.count(t, `SELECT count(*) FROM shop_orders`); n != 0 {
			t.Errorf("%d orders after rollback, want 0", n)
		}
		if _, err := b.store.Get(b.ctx, res.ID); !errors.Is(err, outbox.ErrNotFound) {
			t.Errorf("Get(%d) after rollback = %v, want not found", res.ID, err)
		}
	})

	var committed int64
	t.Run("a committed transaction leaves exactly one PENDING notification", func(t *testing.T) {
		at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
		err := pgx.BeginFunc(b.ctx, b.db.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(b.ctx, `INSERT INTO shop_orders VALUES (1, 'book')`); err != nil {
				return err
			}
			later := wire.Notification{Channel: "orders", Recipient: "user-7", Payload: json.RawMessage(`{"text":"review it"}`), SendAt: at}
			res, err := txoutbox.EnqueueBatchTx(b.ctx, tx, []wire.Notification{shipped, later})
			if err != nil {
				return err
			}
			committed = res[0].ID
			if res[0].Duplicate || res[1].Duplicate || res[0].ID == res[1].ID {
				t.Errorf("EnqueueBatchTx = %+v, want two new notifications", res)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		n, err := b.store.Get(b.ctx, committed)
		if err != nil || n.Status != outbox.StatusPending || n.IdempotencyKey != "order-1" || n.Recipient != "user-7" {
			t.Errorf("committed notification %+v, %v", n, err)
		}
		if got := b.count(t, `SELECT count(*) FROM notifications WHERE due_at > now() + interval '59 minutes'`); got != 1 {
			t.Errorf("%d notifications due in an hour, want the SendAt one", got)
		}
	})

	t.Run("the same idempotency key in a later transaction is the original", func(t *testing.T) {
		err := pgx.BeginFunc(b.ctx, b.db.Pool, func(tx pgx.Tx) error {
			res, err := txoutbox.EnqueueTx(b.ctx, tx, shipped)
			if err == nil && (!res.Duplicate || res.ID != committed) {
				t.Errorf("repeat = %+v, want duplicate of %d", res, committed)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("bad input fails inside the transaction, naming the field", func(t *testing.T) {
		tx, err := b.db.Pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(b.ctx)
		for _, tc := range []struct {
			n    wire.Notification
			want string
		}{
			{wire.Notification{Channel: "no spaces", Recipient: "r", Payload: json.RawMessage(`{}`)}, "channel"},
			{wire.Notification{Channel: "orders", Payload: json.RawMessage(`{}`)}, "recipient"},
			{wire.Notification{Channel: "orders", Recipient: "r", Payload: json.RawMessage(`{`)}, "payload"},
		} {
			if _, err := txoutbox.EnqueueTx(b.ctx, tx, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("EnqueueTx(%+v) = %v, want an error naming %s", tc.n, err, tc.want)
			}
		}
		if _, err := txoutbox.EnqueueTx(b.ctx, nil, shipped); err == nil {
			t.Error("EnqueueTx with a nil tx succeeded")
		}
		if res, err := txoutbox.EnqueueBatchTx(b.ctx, tx, nil); err != nil || res != nil {
			t.Errorf("EnqueueBatchTx(nil) = %v, %v", res, err)
		}
	})
}

// TestEnqueueTx_trace: the trace of EnqueueTx's ctx is stored with the
// notification; without one, and for a Row whose TraceParent is not a
// traceparent, the column stays NULL and the insert succeeds.
func TestEnqueueTx_trace(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	stored := func(t *testing.T, id int64) string {
		t.Helper()
		var s *string
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT trace_parent FROM notifications WHERE id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		if s == nil {
			return ""
		}
		return *s
	}
	n := wire.Notification{Channel: "orders", Recipient: "user-7", Payload: json.RawMessage(`{}`)}
	tx, err := b.db.Pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	traced, err := txoutbox.EnqueueTx(traceparent.ContextWith(b.ctx, tp), tx, n)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := txoutbox.EnqueueTx(b.ctx, tx, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(b.ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, traced.ID); got != tp {
		t.Errorf("traced: trace_parent %q, want %q", got, tp)
	}
	if got := stored(t, plain.ID); got != "" {
		t.Errorf("untraced: trace_parent %q, want NULL", got)
	}
	res, err := txoutbox.Insert(b.ctx, b.db.Pool, []txoutbox.Row{
		{Channel: "orders", Recipient: "a", Payload: json.RawMessage(`{}`), TraceParent: strings.Repeat("0", 4000)},
		{Channel: "orders", Recipient: "b", Payload: json.RawMessage(`{}`), TraceParent: tp},
	})
	if err != nil {
		t.Fatalf("Insert with a garbage trace_parent: %v, want it dropped", err)
	}
	if got := stored(t, res[0].ID); got != "" {
		t.Errorf("garbage: trace_parent %q, want NULL", got)
	}
	if got := stored(t, res[1].ID); got != tp {
		t.Errorf("valid beside garbage: trace_parent %q, want %q", got, tp)
	}
}
