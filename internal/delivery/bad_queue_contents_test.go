package delivery_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/internal/testenv"
)

// A member of a channel's ready list that is no notification id (another
// program sharing the Redis, a partial restore) is fetched in one batch with
// real notifications. They must all be delivered, and the member reported
// in the log.
func TestEngine_GarbageInReadyList(t *testing.T) {
	t.Parallel()
	s := newSink(t, func(string, int, http.Header) (int, string) { return 200, "" })
	b := setup(t, s)
	ctx := context.Background()
	ids := b.sendMany(20, func(int) string { return "r" })
	// Relayed and queued before the engine starts, the bad members among
	// them, so a fetch's batch holds both.
	if _, err := b.store.Relay(ctx, time.Now(), 100); err != nil {
		t.Fatal(err)
	}
	push := func(ids []int64) {
		items := make([]queue.Item, len(ids))
		for i, id := range ids {
			items[i] = queue.Item{ID: id}
		}
		if _, err := b.queue.Push(ctx, testChannel, items); err != nil {
			t.Fatal(err)
		}
	}
	push(ids[:5])
	ready := b.prefix + ":{ch:" + testChannel + "}:ready"
	if err := b.rc.LPush(ctx, ready, "not-an-id", "1000000000000000000000000000000").Err(); err != nil {
		t.Fatal(err)
	}
	push(ids[5:])
	var logs testenv.SyncBuffer
	log := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: &logs})
	b.start(delivery.Options{Instance: "a", Logger: log})
	counts := b.waitAll(15 * time.Second)
	if counts["SENT"] != int64(len(ids)) {
		t.Errorf("counts = %v, want %d SENT", counts, len(ids))
	}
	if out := logs.String(); !strings.Contains(out, "not-an-id") {
		t.Errorf("the bad member was never logged:\n%s", out)
	}
}

// One channel's queue key of the wrong type (another program's SET on it, an
// operator's mistake) must not stop the relay for every other channel: the
// relay pushes what a failed push left first, and ended every pass there.
func TestEngine_WrongTypeKeyBlocksNoOtherChannel(t *testing.T) {
	t.Parallel()
	s := newSink(t, func(string, int, http.Header) (int, string) { return 200, "" })
	b := setup(t, s)
	ctx := context.Background()
	const other = "other"
	if err := b.rc.Set(ctx, b.prefix+":{ch:"+other+"}:members", "not a set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := b.store.Insert(ctx, []outbox.NewNotification{{
		Channel: other, Recipient: "r", Payload: json.RawMessage(`{}`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer
	log := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: &logs})
	b.start(delivery.Options{Instance: "a", Logger: log})
	// The relay has tried the other channel's row and failed.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), "relay") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	ids := b.sendMany(5, func(int) string { return "r" })
	for _, id := range ids {
		if n := b.wait(id, 20*time.Second); n.Status != outbox.StatusSent {
			t.Errorf("notification %d is %s, want SENT", id, n.Status)
		}
	}
	// The other channel's row is in its queue now (no engine runs that
	// channel here), its members key a set again.
	q := b.queue
	if st, err := q.Stats(ctx, other); err != nil || st.Ready != 1 {
		t.Errorf("other channel's queue = %+v, %v; want its row %d ready", st, err, res[0].ID)
	}
}

// A member that is no notification id, written straight into a running
// instance's backup list (another program, a partial restore), is dropped by
// the next orphan check's Pending. It must be said in the log: the orphan
// check discarded Pending's error, so the drop left no trace.
func TestEngine_BadMemberInBackupListLogged(t *testing.T) {
	t.Parallel()
	s := newSink(t, func(string, int, http.Header) (int, string) { return 200, "" })
	b := setup(t, s)
	ctx := context.Background()
	var logs testenv.SyncBuffer
	log := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: &logs})
	b.start(delivery.Options{Instance: "a", Logger: log})
	// One delivery first: the engine has resumed its backup list and is
	// fetching, so only the orphan check can meet what is written next.
	b.wait(b.send("r", "first"), 15*time.Second)
	const bad = "zz-not-an-id"
	processing := b.prefix + ":{ch:" + testChannel + "}:processing:a"
	if err := b.rc.LPush(ctx, processing, bad).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), bad) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), bad) {
		gone := true
		for _, v := range b.rc.LRange(ctx, processing, 0, -1).Val() {
			gone = gone && v != bad
		}
		t.Errorf("a bad member in the backup list was never logged (dropped from the list: %v):\n%s", gone, logs.String())
	}
}
