package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/providers"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/wire"
)

// bundle is a Service over real Postgres and Redis, with an engine that is
// built (its queues are used) but not started: nothing is delivered, so the
// rows stay where the operations put them. It tests the operations, not the
// whole daemon: a test that needs a running one starts it through the root
// package (notifyd.Start), as stopped_test.go does.
type bundle struct {
	ctx   context.Context
	db    *testenv.DB
	store *outbox.Store
	q     *queue.Queue
	rds   *testenv.Redis
	ops   *service.Service
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db := testenv.NewDB(t)
	rds := testenv.NewRedis(t)
	cfg := config.Default()
	cfg.Channels = map[string]config.Channel{"orders": {Plugin: "p"}, "quiz": {Plugin: "p"}}
	cfg.Redis.Prefix = rds.Prefix // the breaker and rate limits live under it
	b := &bundle{ctx: testenv.Context(t), db: db, store: testenv.Store(t, db.Pool), q: queue.New(rds.Client, rds.Prefix), rds: rds}
	providers := providers.NewInProcess(map[string]sdk.Provider{}, nil)
	t.Cleanup(providers.Close)
	e, err := delivery.New(delivery.Options{Config: &cfg, Store: b.store, Queue: b.q, Providers: providers, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if b.ops, err = service.New(service.Options{Config: &cfg, Store: b.store, Engine: e}); err != nil {
		t.Fatal(err)
	}
	return b
}

// rows inserts n notifications on channel in status and returns their ids.
func (b *bundle) rows(t *testing.T, channel, status string, n int) []int64 {
	t.Helper()
	ns := make([]outbox.NewNotification, n)
	for i := range ns {
		ns[i] = outbox.NewNotification{Channel: channel, Recipient: "r", Payload: json.RawMessage(`{}`)}
	}
	in, err := b.store.Insert(b.ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, n)
	for i, r := range in {
		ids[i] = r.ID
	}
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET status = $1, attempts = 5, last_error = 'boom' WHERE id = ANY($2)`, status, ids); err != nil {
		t.Fatal(err)
	}
	return ids
}

func (b *bundle) status(t *testing.T, id int64) string {
	t.Helper()
	st, err := b.store.Statuses(b.ctx, []int64{id})
	if err != nil {
		t.Fatal(err)
	}
	return st[id].Status
}

func TestReplay_IDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	failed := b.rows(t, "orders", outbox.StatusFailed, 2)
	sent := b.rows(t, "orders", outbox.StatusSent, 1)
	gone := b.rows(t, "retired", outbox.StatusFailed, 1) // a channel this instance does not run
	other := b.rows(t, "quiz", outbox.StatusFailed, 1)

	ask := []int64{failed[0], sent[0], 999_999_999, gone[0], failed[1], failed[0]}
	res, err := b.ops.Replay(b.ctx, service.Selector{IDs: ask})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.IDs, failed) || res.Warning != "" || res.Replayed != int64(len(failed)) {
		t.Errorf("replayed %v (%d, redis warning %q), want %v", res.IDs, res.Replayed, res.Warning, failed)
	}
	want := map[int64]string{sent[0]: "is SENT, not FAILED", 999_999_999: "does not exist", gone[0]: `channel "retired", which this instance does not run`}
	if len(res.Skipped) != len(want) {
		t.Errorf("skipped %+v, want %d", res.Skipped, len(want))
	}
	for _, sk := range res.Skipped {
		if !strings.Contains(sk.Reason, want[sk.ID]) || want[sk.ID] == "" {
			t.Errorf("skipped %d: %q, want it to say %q", sk.ID, sk.Reason, want[sk.ID])
		}
	}
	for _, id := range failed {
		if got := b.status(t, id); got != outbox.StatusQueued {
			t.Errorf("row %d is %s after replay, want QUEUED", id, got)
		}
	}
	if st, _ := b.q.Stats(b.ctx, "orders"); st.Ready != 2 {
		t.Errorf("orders' ready queue holds %d, want the 2 replayed", st.Ready)
	}

	// Again: nothing is replayed twice, and each id says why.
	res, err = b.ops.Replay(b.ctx, service.Selector{IDs: failed})
	if err != nil || len(res.IDs) != 0 || len(res.Skipped) != 2 || !strings.Contains(res.Skipped[0].Reason, "QUEUED") {
		t.Errorf("repeat = %+v, %v; want nothing replayed, both skipped as QUEUED", res, err)
	}
	// Restricted to a channel: the other channel's row is left alone.
	res, err = b.ops.Replay(b.ctx, service.Selector{IDs: other, Channel: "orders"})
	if err != nil || len(res.IDs) != 0 || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, `"quiz", not "orders"`) {
		t.Errorf("wrong channel = %+v, %v", res, err)
	}
}

// TestReplay_Channel: a whole channel in chunks, one keyset pass; an
// unconfigured channel is refused; no selector means every configured one.
func TestReplay_Channel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	orders := b.rows(t, "orders", outbox.StatusFailed, service.ChunkRows+5)
	quiz := b.rows(t, "quiz", outbox.StatusFailed, 3)
	b.rows(t, "retired", outbox.StatusFailed, 1)

	res, err := b.ops.Replay(b.ctx, service.Selector{Channel: "orders"})
	if err != nil || !slices.Equal(res.IDs, orders) {
		t.Fatalf("replay orders: %d ids, %v; want %d", len(res.IDs), err, len(orders))
	}
	if b.status(t, quiz[0]) != outbox.StatusFailed {
		t.Error("replaying orders touched quiz")
	}
	_, err = b.ops.Replay(b.ctx, service.Selector{Channel: "retired"})
	var se *service.Error
	if !errors.As(err, &se) || se.Kind != service.Invalid || !strings.Contains(se.Message, "not configured") {
		t.Errorf("replay of an unconfigured channel = %v, want Invalid naming it", err)
	}
	res, err = b.ops.Replay(b.ctx, service.Selector{})
	if err != nil || !slices.Equal(res.IDs, quiz) {
		t.Errorf("replay of every configured channel = %v, %v; want quiz's %v", res.IDs, err, quiz)
	}
}

func TestPurge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	failed := b.rows(t, "orders", outbox.StatusFailed, 3)
	queued := b.rows(t, "orders", outbox.StatusQueued, 1)
	retired := b.rows(t, "retired", outbox.StatusFailed, service.ChunkRows+1)

	res, err := b.ops.Purge(b.ctx, service.Selector{IDs: []int64{failed[0], queued[0]}})
	if err != nil || res.Purged != 1 || len(res.Skipped) != 1 || res.Skipped[0].ID != queued[0] {
		t.Errorf("purge by ids = %+v, %v; want 1 purged, the QUEUED one skipped", res, err)
	}
	if b.status(t, queued[0]) != outbox.StatusQueued {
		t.Error("a QUEUED row was purged")
	}
	// A channel that is not configured can be purged: that is how it is cleared.
	res, err = b.ops.Purge(b.ctx, service.Selector{Channel: "retired"})
	if err != nil || res.Purged != int64(len(retired)) {
		t.Errorf("purge retired = %+v, %v; want %d", res, err, len(retired))
	}
	if b.status(t, failed[1]) != outbox.StatusFailed {
		t.Error("purging retired touched orders")
	}
	var se *service.Error
	if _, err := b.ops.Purge(b.ctx, service.Selector{}); !errors.As(err, &se) || se.Kind != service.Invalid {
		t.Errorf("purge of everything = %v, want Invalid", err)
	}
}

func TestCancelAndPause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pending := b.rows(t, "orders", outbox.StatusPending, 1)[0]
	sent := b.rows(t, "orders", outbox.StatusSent, 1)[0]
	if changed, err := b.ops.Cancel(b.ctx, pending); err != nil || !changed {
		t.Errorf("cancel PENDING: %v, %v", changed, err)
	}
	if changed, err := b.ops.Cancel(b.ctx, pending); err != nil || changed {
		t.Errorf("cancel again: %v, %v; want success with nothing changed", changed, err)
	}
	var se *service.Error
	if _, err := b.ops.Cancel(b.ctx, sent); !errors.As(err, &se) || se.Kind != service.Conflict {
		t.Errorf("cancel SENT = %v, want Conflict", err)
	}
	if _, err := b.ops.Cancel(b.ctx, 999_999_999); !errors.As(err, &se) || se.Kind != service.NotFound {
		t.Errorf("cancel unknown = %v, want NotFound", err)
	}
	if err := b.ops.Pause(b.ctx, "nope", ""); !errors.As(err, &se) || se.Kind != service.NotFound {
		t.Errorf("pause unknown channel = %v, want NotFound", err)
	}
	if err := b.ops.Pause(b.ctx, "orders", strings.Repeat("x", outbox.MaxReasonLen+1)); !errors.As(err, &se) || se.Kind != service.Invalid {
		t.Errorf("pause with a long reason = %v, want Invalid", err)
	}
	if err := b.ops.Pause(b.ctx, "orders", "maintenance"); err != nil {
		t.Fatal(err)
	}
	paused, err := b.store.PausedChannels(b.ctx, []string{"orders"})
	if err != nil || paused["orders"] != "maintenance" {
		t.Errorf("paused channels %v, %v", paused, err)
	}
	if err := b.ops.Resume(b.ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if paused, _ := b.store.PausedChannels(b.ctx, []string{"orders"}); len(paused) != 0 {
		t.Errorf("after resume: %v", paused)
	}
}

// TestOverview: configured channels and outbox-only ones, counts by status,
// queue sizes; a fresh enough count is reused, an old one recounted.
func TestOverview(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rows(t, "orders", outbox.StatusSent, 4)
	b.rows(t, "retired", outbox.StatusFailed, 2)
	ov, err := b.ops.Overview(b.ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range ov.Channels {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"orders", "quiz", "retired"}) {
		t.Fatalf("channels %v", names)
	}
	if c := ov.Channels[0]; !c.Configured || c.Plugin != "p" || c.Counts[outbox.StatusSent] != 4 || c.Counts[outbox.StatusPending] != 0 {
		t.Errorf("orders %+v", c)
	}
	if c := ov.Channels[2]; c.Configured || c.Counts[outbox.StatusFailed] != 2 {
		t.Errorf("retired %+v", c)
	}
	b.rows(t, "orders", outbox.StatusSent, 1)
	again, _ := b.ops.Overview(b.ctx, time.Hour)
	if again.Channels[0].Counts[outbox.StatusSent] != 4 || !again.CountsAt.Equal(ov.CountsAt) {
		t.Errorf("within maxAge: %d SENT counted at %v, want the cached 4", again.Channels[0].Counts[outbox.StatusSent], again.CountsAt)
	}
	fresh, _ := b.ops.Overview(b.ctx, time.Nanosecond)
	if fresh.Channels[0].Counts[outbox.StatusSent] != 5 {
		t.Errorf("past maxAge: %d SENT, want 5 recounted", fresh.Channels[0].Counts[outbox.StatusSent])
	}
}

// TestEnqueueAndRead: the one enqueue (API and CLI alike) refuses an
// unconfigured channel and a bad row, naming it; a Service without an
// engine (the CLI's database-only mode) enqueues and reads, and says
// plainly that the queue operations need a running notifyd.
func TestEnqueueAndRead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := config.Default()
	cfg.Channels = map[string]config.Channel{"orders": {Plugin: "p"}}
	dbOnly, err := service.New(service.Options{Config: &cfg, Store: b.store})
	if err != nil {
		t.Fatal(err)
	}
	ok := wire.Notification{Channel: "orders", Recipient: "ada", Payload: json.RawMessage(`{"text":"hi"}`), IdempotencyKey: "k1"}
	for _, ops := range []*service.Service{b.ops, dbOnly} {
		var se *service.Error
		_, err := ops.Enqueue(b.ctx, []wire.Notification{ok, {Channel: "nope", Recipient: "r", Payload: json.RawMessage(`{}`)}}, "")
		if !errors.As(err, &se) || se.Kind != service.Invalid || !strings.Contains(se.Message, `notification 1: channel "nope" is not configured`) {
			t.Errorf("unconfigured channel: %v", err)
		}
		_, err = ops.Enqueue(b.ctx, []wire.Notification{{Channel: "orders", Recipient: "r", Payload: json.RawMessage(`{`)}}, "")
		if !errors.As(err, &se) || se.Kind != service.Invalid || !strings.Contains(se.Message, "payload is not valid JSON") {
			t.Errorf("bad payload: %v", err)
		}
		res, err := ops.Enqueue(b.ctx, []wire.Notification{ok}, "")
		if err != nil || len(res) != 1 {
			t.Fatalf("Enqueue = %v, %v", res, err)
		}
		n, err := ops.Notification(b.ctx, res[0].ID)
		if err != nil || n.Recipient != "ada" || n.Status != outbox.StatusPending {
			t.Errorf("Notification = %+v, %v", n, err)
		}
		if _, err := ops.Notification(b.ctx, 999_999_999); !errors.As(err, &se) || se.Kind != service.NotFound {
			t.Errorf("unknown id: %v", err)
		}
		page, err := ops.NotificationsByRecipient(b.ctx, "ada", 0, 1)
		if err != nil || len(page.Notifications) != 1 || page.NextBefore != res[0].ID {
			t.Errorf("NotificationsByRecipient(ada, limit 1) = %+v, %v; want her one row, NextBefore its id", page, err)
		}
		for _, limit := range []int{0, service.RecipientLimitMax + 1} {
			if _, err := ops.NotificationsByRecipient(b.ctx, "ada", 0, limit); !errors.As(err, &se) || se.Kind != service.Invalid ||
				!strings.Contains(se.Message, "limit") {
				t.Errorf("NotificationsByRecipient(limit %d) = %v, want Invalid naming the limit", limit, err)
			}
		}
	}
	if _, err := dbOnly.Replay(b.ctx, service.Selector{Channel: "orders"}); !errors.Is(err, service.ErrNoEngine) {
		t.Errorf("replay without an engine = %v, want ErrNoEngine", err)
	}
	if _, err := dbOnly.Overview(b.ctx, time.Second); !errors.Is(err, service.ErrNoEngine) {
		t.Errorf("overview without an engine = %v, want ErrNoEngine", err)
	}
}

// TestOverview_unconfiguredChannelsBounded: rows under 130 channel names
// nobody configured (an application's own SQL) are counted for the first
// MaxUnconfiguredChannels by name and said to be left out for the rest; a
// configured channel is listed with its counts whatever its name sorts
// after.
func TestOverview_unconfiguredChannelsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.db.Pool.Exec(b.ctx, `INSERT INTO notifications (channel, recipient, payload, status)
		SELECT 'junk-' || lpad(i::text, 3, '0'), 'r', '{}', 'PENDING' FROM generate_series(1, 130) AS i`); err != nil {
		t.Fatal(err)
	}
	b.rows(t, "quiz", outbox.StatusSent, 3) // configured; sorts after every junk-…
	ov, err := b.ops.Overview(b.ctx, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	var quiz, junk int
	for _, c := range ov.Channels {
		switch {
		case c.Name == "quiz":
			quiz = int(c.Counts[outbox.StatusSent])
		case strings.HasPrefix(c.Name, "junk-"):
			junk++
		}
	}
	if quiz != 3 || junk != service.MaxUnconfiguredChannels || ov.OmittedChannels != 130-service.MaxUnconfiguredChannels {
		t.Errorf("quiz SENT %d, %d junk channels listed, %d omitted; want 3, %d and %d",
			quiz, junk, ov.OmittedChannels, service.MaxUnconfiguredChannels, 130-service.MaxUnconfiguredChannels)
	}
}
