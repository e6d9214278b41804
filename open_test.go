package notifyd_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/wire"
)

// TestMigrateAndOpen: Migrate brings an empty schema up to date and then has
// nothing to do; Open on it runs nothing but answers the operations that need
// only the database, and says so of those that need the engine.
func TestMigrateAndOpen(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	db := testenv.NewSchema(t) // empty: no migrations
	cfg := config.Default()
	cfg.Postgres.URL = db.URL
	cfg.Redis.URL = "redis://127.0.0.1:1/0" // validated, never dialled: Open needs no Redis
	cfg.Log.Level = "warn"
	cfg.Channels = map[string]config.Channel{"inbox": {Plugin: "inbox"}}

	n, err := notifyd.Migrate(ctx, &cfg)
	if err != nil || n == 0 {
		t.Fatalf("Migrate on an empty schema = %d, %v; want every migration applied", n, err)
	}
	if n, err := notifyd.Migrate(ctx, &cfg); err != nil || n != 0 {
		t.Fatalf("Migrate again = %d, %v; want 0 applied", n, err)
	}

	d, err := notifyd.Open(ctx, &cfg, notifyd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a := d.Addr(); a != nil {
		t.Errorf("Addr of an opened daemon = %v, want nil (no API)", a)
	}
	// The database alone: an enqueue is written PENDING, for a running
	// instance to deliver; its status reads back. The operations are the
	// daemon's own methods, in wire types.
	ins, err := d.Enqueue(ctx, []wire.Notification{{Channel: "inbox", Recipient: "u1", Payload: []byte(`{"n":1}`)}}, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Notification(ctx, ins[0].ID)
	if err != nil || got.Status != wire.StatusPending {
		t.Fatalf("the enqueued notification: %+v, %v; want it PENDING", got, err)
	}
	var refused *notifyd.Error
	if _, err := d.Notification(ctx, ins[0].ID+1000); !errors.As(err, &refused) || refused.Kind != notifyd.KindNotFound {
		t.Errorf("an unknown id = %v, want a notifyd.Error of kind KindNotFound", err)
	}
	// What needs the engine says so.
	if err := d.Pause(ctx, "inbox", "maintenance"); err == nil || !strings.Contains(err.Error(), "engine") {
		t.Errorf("Pause without an engine = %v, want an error naming the engine", err)
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Closed: the pool is gone.
	if _, err := d.Notification(ctx, ins[0].ID); err == nil {
		t.Error("the operations still answer after Stop; want the pool closed")
	}

	cfg.Postgres.URL = "postgres://nobody@127.0.0.1:1/none?connect_timeout=2"
	if _, err := notifyd.Open(ctx, &cfg, notifyd.Options{}); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("Open with no Postgres = %v, want an error naming where it looked", err)
	}
	var se interface{ Unwrap() error }
	if _, err := notifyd.Migrate(ctx, nil); err == nil || errors.As(err, &se) {
		t.Errorf("Migrate(nil config) = %v, want a plain error", err)
	}
}
