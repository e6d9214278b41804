package outbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

func TestStore_NotifyChannel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	got, err := b.store.NotifyChannel(b.ctx)
	if err != nil {
		t.Fatalf("NotifyChannel: %v", err)
	}
	if want := "notifyd_outbox_" + b.db.Schema; got != want {
		t.Errorf("NotifyChannel = %q, want %q", got, want)
	}
}

func TestStore_Listen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(b.ctx)
	wake := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() { done <- b.store.Listen(ctx, wake) }()

	// Listen wakes once when it is connected (inserts may have been missed).
	waitWake(t, wake, "connect")

	t.Run("insert wakes", func(t *testing.T) {
		b.insertN(t, 3)
		waitWake(t, wake, "insert")
	})

	t.Run("insert in a caller's transaction wakes at commit", func(t *testing.T) {
		tx, err := b.db.Pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := outbox.Insert(b.ctx, tx, []outbox.NewNotification{notif(1)}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wake:
			t.Fatal("woken before the inserting transaction committed")
		case <-time.After(100 * time.Millisecond):
		}
		if err := tx.Commit(b.ctx); err != nil {
			t.Fatal(err)
		}
		waitWake(t, wake, "commit")
	})

	t.Run("reconnects after its connection is killed", func(t *testing.T) {
		var killed int
		err := b.db.Pool.QueryRow(b.ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE query = 'LISTEN "notifyd_outbox_' || $1::text || '"'`, b.db.Schema).Scan(&killed)
		if err != nil || killed != 1 {
			t.Fatalf("terminate the listening backend: killed %d, %v; want 1", killed, err)
		}
		waitWake(t, wake, "reconnect")
		b.insertN(t, 1)
		waitWake(t, wake, "insert after reconnect")
	})

	t.Run("no wake while the relay works through a backlog", func(t *testing.T) {
		if _, err := b.store.Relay(b.ctx, time.Now(), 1000); err != nil { // earlier subtests' rows
			t.Fatal(err)
		}
		// A full batch: the relay will call again at once, so inserts stop
		// notifying (and stop serialising on NOTIFY's commit lock).
		b.insertN(t, 5)
		// The relay is idle until the next call, so these wake it; wait for
		// that wake here, or it may arrive after the drain below and pass for
		// one the busy relay should not get (it did, once the relay took one
		// round trip instead of three).
		waitWake(t, wake, "insert while the relay is idle")
		if q, err := b.store.Relay(b.ctx, time.Now(), 2); err != nil || len(q) != 2 {
			t.Fatalf("Relay = %d rows, %v; want a full batch of 2", len(q), err)
		}
		drain(wake)
		b.insertN(t, 1)
		select {
		case <-wake:
			t.Fatal("woken by an insert while the relay was busy")
		case <-time.After(300 * time.Millisecond):
		}
		// Drained: inserts wake it again.
		if q, err := b.store.Relay(b.ctx, time.Now(), 100); err != nil || len(q) != 4 {
			t.Fatalf("Relay = %d rows, %v; want the 4 left", len(q), err)
		}
		b.insertN(t, 1)
		waitWake(t, wake, "insert after the relay drained")
	})

	t.Run("insert from a session with another search_path", func(t *testing.T) {
		conn, err := pgx.Connect(b.ctx, testenv.DatabaseURL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(b.ctx)
		_, err = conn.Exec(b.ctx, `INSERT INTO `+pgx.Identifier{b.db.Schema, "notifications"}.Sanitize()+
			` (channel, recipient, payload) VALUES ('c', 'r', '{}')`)
		if err != nil {
			t.Fatalf("schema-qualified insert with the default search_path: %v", err)
		}
		waitWake(t, wake, "insert from another search_path")
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Listen returned %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not return after its context ended")
	}
}

func drain(wake <-chan struct{}) {
	for {
		select {
		case <-wake:
		default:
			return
		}
	}
}

func waitWake(t *testing.T, wake <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatalf("no wake after %s", strings.TrimSpace(what))
	}
}
