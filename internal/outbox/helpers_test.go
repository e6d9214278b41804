package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

// bundle is what most tests need: a Store on a fresh migrated schema.
type bundle struct {
	ctx   context.Context
	db    *testenv.DB
	store *outbox.Store
}

func setup(t testing.TB) *bundle {
	t.Helper()
	db := testenv.NewDB(t)
	return &bundle{ctx: testenv.Context(t), db: db, store: testenv.Store(t, db.Pool)}
}

// notif builds a NewNotification due in the past, so a relay takes it.
func notif(i int) outbox.NewNotification {
	return outbox.NewNotification{
		Channel:   "ch",
		Recipient: fmt.Sprintf("user-%d", i),
		Payload:   json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
		DueAt:     time.Now().Add(-time.Minute),
	}
}

// insert writes n notifications and returns their ids.
func (b *bundle) insert(t testing.TB, ns ...outbox.NewNotification) []int64 {
	t.Helper()
	got, err := b.store.Insert(b.ctx, ns)
	if err != nil {
		t.Fatalf("Insert: %v", err)
	}
	ids := make([]int64, len(got))
	for i, in := range got {
		ids[i] = in.ID
	}
	return ids
}

// insertN writes n due notifications on channel ch.
func (b *bundle) insertN(t testing.TB, n int) []int64 {
	t.Helper()
	ns := make([]outbox.NewNotification, n)
	for i := range ns {
		ns[i] = notif(i)
	}
	return b.insert(t, ns...)
}

// force puts rows into a state directly, for guard tests that start from a
// state the transitions would not produce on their own.
func (b *bundle) force(t testing.TB, status string, attempts int, updatedAt time.Time, ids ...int64) {
	t.Helper()
	_, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET status = $2, attempts = $3, updated_at = $4 WHERE id = ANY($1)`,
		ids, status, attempts, updatedAt)
	if err != nil {
		t.Fatalf("force %v to %s: %v", ids, status, err)
	}
}

// row is the part of a notification the transition tests compare.
type row struct {
	Status   string
	Attempts int
}

func (b *bundle) row(t testing.TB, id int64) row {
	t.Helper()
	var r row
	err := b.db.Pool.QueryRow(b.ctx, `SELECT status, attempts FROM notifications WHERE id = $1`, id).Scan(&r.Status, &r.Attempts)
	if err != nil {
		t.Fatalf("read row %d: %v", id, err)
	}
	return r
}

func (b *bundle) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// queue inserts n rows and relays them: QUEUED and due. Other due PENDING
// rows a subtest left behind may be relayed along with them.
func (b *bundle) queue(t testing.TB, n int) []int64 {
	t.Helper()
	ids := b.insertN(t, n)
	want := make(map[int64]bool, n)
	for _, id := range ids {
		want[id] = true
	}
	for len(want) > 0 {
		q, err := b.store.Relay(b.ctx, time.Now(), n)
		if err != nil {
			t.Fatalf("Relay: %v", err)
		}
		if len(q) == 0 {
			t.Fatalf("Relay: %d of the new rows not relayed", len(want))
		}
		for _, r := range q {
			delete(want, r.ID)
		}
	}
	return ids
}

// claim queues n rows and claims them: PROCESSING with attempts = 1.
func (b *bundle) claim(t testing.TB, n int) []outbox.Claimed {
	t.Helper()
	ids := b.queue(t, n)
	cs, err := b.store.Claim(b.ctx, ids, time.Now(), time.Minute)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	for _, c := range cs {
		if c.Kind != outbox.ClaimSend {
			t.Fatalf("Claim %d: kind %v, want send", c.ID, c.Kind)
		}
	}
	return cs
}

func ids(qs []outbox.Queued) []int64 {
	out := make([]int64, len(qs))
	for i, q := range qs {
		out[i] = q.ID
	}
	return out
}
