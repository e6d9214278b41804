package outbox_test

import (
	"maps"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
)

// scanCounts is CountByStatus the slow way, for comparison.
func (b *bundle) scanCounts(t *testing.T) map[string]map[string]int64 {
	t.Helper()
	rows, err := b.db.Pool.Query(b.ctx, `SELECT channel, status, count(*) FROM notifications GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]map[string]int64{}
	for rows.Next() {
		var (
			ch, st string
			n      int64
		)
		if err := rows.Scan(&ch, &st, &n); err != nil {
			t.Fatal(err)
		}
		if out[ch] == nil {
			out[ch] = map[string]int64{}
		}
		out[ch][st] = n
	}
	return out
}

func sameCounts(a, b map[string]map[string]int64) bool {
	return maps.EqualFunc(a, b, func(x, y map[string]int64) bool { return maps.Equal(x, y) })
}

// TestCountByStatus: the maintained counts equal a scan after inserts (a
// duplicate key included), transitions of many rows at once, deletes and a
// transaction that rolls back, before and after the deltas are compacted.
func TestCountByStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	check := func(when string) {
		t.Helper()
		got, err := b.store.CountByStatus(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := b.scanCounts(t); !sameCounts(got, want) {
			t.Errorf("%s: counts %v, a scan says %v", when, got, want)
		}
	}
	ids := b.insertN(t, 300)
	n := notif(1)
	n.Channel, n.IdempotencyKey = "other", "k"
	b.insert(t, n, n) // the second is a duplicate: counted once
	check("after inserts")
	b.force(t, "SENT", 1, time.Now(), ids[:200]...)
	b.force(t, "FAILED", 3, time.Now(), ids[200:250]...)
	check("after transitions")
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET last_error = 'x' WHERE id = ANY($1)`, ids[:10]); err != nil {
		t.Fatal(err)
	}
	tx, err := b.db.Pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(b.ctx, `UPDATE notifications SET status = 'CANCELLED' WHERE id = ANY($1)`, ids[250:]); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(b.ctx)
	if _, err := b.db.Pool.Exec(b.ctx, `DELETE FROM notifications WHERE id = ANY($1)`, ids[:20]); err != nil {
		t.Fatal(err)
	}
	check("after an update that changes no status, a rollback and a delete")
	folded, err := b.store.CompactCounts(b.ctx)
	if err != nil || folded == 0 {
		t.Fatalf("CompactCounts = %d, %v; want some deltas folded", folded, err)
	}
	check("after compaction")
	if again, err := b.store.CompactCounts(b.ctx); err != nil || again != 0 {
		t.Errorf("second CompactCounts = %d, %v; want 0", again, err)
	}
	b.force(t, "SENT", 1, time.Now(), ids[250:]...)
	check("after more transitions on compacted counts")
}

// TestRetain: one pass removes every finished notification older than its
// state's window, with its attempts, and nothing else; a row the walk passed
// while it was in flight goes after the walk starts again (rescan); a
// second instance's pass at the same time does nothing; negative windows
// keep forever.
func TestRetain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	day := 24 * time.Hour
	old, mid, fresh := now.Add(-10*day), now.Add(-3*day), now.Add(-time.Hour)
	// Rows created and finished at a given time, in id order as real
	// traffic is (older first).
	mk := func(status string, at time.Time, n int) []int64 {
		t.Helper()
		ids := b.insertN(t, n)
		if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET status = $2, created_at = $3, updated_at = $3 WHERE id = ANY($1)`, ids, status, at); err != nil {
			t.Fatal(err)
		}
		if _, err := b.db.Pool.Exec(b.ctx, `
			INSERT INTO notification_attempts (notification_id, attempt, started_at, finished_at, outcome)
			SELECT id, 1, $2, $2, 'SUCCESS' FROM unnest($1::bigint[]) AS id`, ids, at); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	oldSent, oldCancelled, oldFailed := mk("SENT", old, 2500), mk("CANCELLED", old, 40), mk("FAILED", old, 30)
	stuck := mk("QUEUED", old, 5)
	midSent, midFailed := mk("SENT", mid, 300), mk("FAILED", mid, 20)
	freshSent, freshQueued := mk("SENT", fresh, 100), mk("PENDING", fresh, 50)
	r := outbox.Retention{Sent: 7 * day, Cancelled: 7 * day, Failed: 30 * day, Batch: 1000, Rescan: day}
	// Receipts go with their notification, and stay with a kept one.
	for _, id := range []int64{oldSent[0], midSent[0]} {
		if _, err := b.store.ApplyReceipts(b.ctx, "ch", []outbox.Receipt{{NotificationID: id, Outcome: outbox.ReceiptDelivered}}); err != nil {
			t.Fatal(err)
		}
	}
	checkReceipts := func() {
		var gone, kept int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FILTER (WHERE notification_id = $1), count(*) FILTER (WHERE notification_id = $2) FROM notification_receipts`,
			oldSent[0], midSent[0]).Scan(&gone, &kept); err != nil {
			t.Fatal(err)
		}
		if gone != 0 || kept != 1 {
			t.Errorf("receipts after retention: %d of the deleted notification's, %d of the kept one's; want 0 and 1", gone, kept)
		}
	}

	pass, err := b.store.Retain(b.ctx, r, now)
	if err != nil {
		t.Fatal(err)
	}
	checkReceipts()
	if pass.Deleted != 2540 || pass.Batches < 3 {
		t.Errorf("pass = %+v, want 2,540 deleted (old SENT and CANCELLED) in several batches", pass)
	}
	exists := func(ids []int64) int {
		t.Helper()
		var n int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM notifications WHERE id = ANY($1)`, ids).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	attempts := func(ids []int64) int {
		t.Helper()
		var n int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM notification_attempts WHERE notification_id = ANY($1)`, ids).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for name, c := range map[string]struct {
		ids  []int64
		kept bool
	}{
		"old SENT": {oldSent, false}, "old CANCELLED": {oldCancelled, false}, "old FAILED (dead letters kept 30 days)": {oldFailed, true},
		"old QUEUED (in flight)": {stuck, true}, "3-day SENT": {midSent, true}, "3-day FAILED": {midFailed, true},
		"fresh SENT": {freshSent, true}, "fresh PENDING": {freshQueued, true},
	} {
		want := 0
		if c.kept {
			want = len(c.ids)
		}
		if got := exists(c.ids); got != want {
			t.Errorf("%s: %d of %d left, want %d", name, got, len(c.ids), want)
		}
		if got := attempts(c.ids); got != want {
			t.Errorf("%s: %d attempts left, want %d (removed with their notification)", name, got, want)
		}
	}

	// The stuck rows finish; the walk has passed them, so they stay until
	// it starts again from the oldest row.
	b.force(t, "SENT", 1, old, stuck...)
	if pass, err := b.store.Retain(b.ctx, r, now.Add(time.Minute)); err != nil || pass.Deleted != 0 || pass.Restart {
		t.Errorf("pass before the rescan = %+v, %v; want nothing deleted", pass, err)
	}
	later := now.Add(day + time.Minute)
	if pass, err := b.store.Retain(b.ctx, r, later); err != nil || !pass.Restart || pass.Deleted != 5 {
		t.Errorf("pass after the rescan interval = %+v, %v; want a restart that removes the 5 stragglers", pass, err)
	}

	// Another instance's pass holds the lock: this one does nothing.
	conn, err := b.db.Pool.Acquire(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(b.ctx, `SELECT pg_advisory_lock(hashtextextended('notifyd retention' || current_schema(), 0))`); err != nil {
		t.Fatal(err)
	}
	if pass, err := b.store.Retain(b.ctx, r, later.Add(40*day)); err != nil || !pass.Busy || pass.Deleted != 0 {
		t.Errorf("pass while another runs = %+v, %v; want Busy, nothing deleted", pass, err)
	}
	if _, err := conn.Exec(b.ctx, `SELECT pg_advisory_unlock(hashtextextended('notifyd retention' || current_schema(), 0))`); err != nil {
		t.Fatal(err)
	}
	// Keep-forever windows: nothing goes, however old.
	forever := outbox.Retention{Sent: -1, Cancelled: -1, Failed: -1, Batch: 1000, Rescan: day}
	if pass, err := b.store.Retain(b.ctx, forever, later.Add(400*day)); err != nil || pass.Deleted != 0 {
		t.Errorf("keep-forever pass = %+v, %v; want nothing deleted", pass, err)
	}
	// Forty days on, everything finished is past its window.
	if pass, err := b.store.Retain(b.ctx, outbox.Retention{Sent: 7 * day, Cancelled: 7 * day, Failed: 30 * day, Batch: 1000, Rescan: time.Minute}, later.Add(40*day)); err != nil ||
		pass.Deleted != int64(len(oldFailed)+len(midSent)+len(midFailed)+len(freshSent)) {
		t.Errorf("pass 40 days later = %+v, %v; want every finished row gone", pass, err)
	}
	if got := exists(freshQueued); got != len(freshQueued) {
		t.Errorf("%d of %d PENDING rows left, want all: retention never touches unfinished rows", got, len(freshQueued))
	}
	got, err := b.store.CountByStatus(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := b.scanCounts(t); !sameCounts(got, want) {
		t.Errorf("counts after retention %v, a scan says %v", got, want)
	}
}

// TestRetain_FutureCreatedAt: a row an application's SQL wrote with
// created_at in the future (a skewed clock, 'infinity') does not stop the
// walk; the first row created since the frontier still does. Before, the walk
// stopped at that row on every pass, rescans included, judging it younger
// than every window: no finished row after it was ever deleted.
func TestRetain_FutureCreatedAt(t *testing.T) {
	t.Parallel()
	for _, created := range []string{"infinity", "2999-01-01"} {
		t.Run(created, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			now := time.Now()
			day := 24 * time.Hour
			old := now.Add(-30 * day)
			finishedLongAgo := func(n int) []int64 {
				t.Helper()
				ids := b.insertN(t, n)
				if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET status = 'SENT', created_at = $2, updated_at = $2 WHERE id = ANY($1)`, ids, old); err != nil {
					t.Fatal(err)
				}
				return ids
			}
			before := finishedLongAgo(10)
			var app int64
			if err := b.db.Pool.QueryRow(b.ctx, `
				INSERT INTO notifications (channel, recipient, payload, due_at, created_at)
				VALUES ('ch', 'app', '{}', now() + interval '1 day', $1) RETURNING id`, created).Scan(&app); err != nil {
				t.Fatal(err)
			}
			after := finishedLongAgo(10)
			young := b.insertN(t, 1)[0] // created now: the walk ends here
			beyond := finishedLongAgo(10)
			r := outbox.Retention{Sent: 7 * day, Cancelled: 7 * day, Failed: 30 * day, Batch: 1000, Rescan: time.Hour}
			pass, err := b.store.Retain(b.ctx, r, now)
			if err != nil {
				t.Fatal(err)
			}
			if left := b.count(t, `SELECT count(*) FROM notifications WHERE id = ANY($1)`, append(before, after...)); left != 0 {
				t.Errorf("%d of the 20 SENT rows finished 30 days ago before the frontier left; want 0: the row created at %s stopped the walk", left, created)
			}
			if left := b.count(t, `SELECT count(*) FROM notifications WHERE id = ANY($1)`, append([]int64{app, young}, beyond...)); left != 12 || pass.Cursor >= young {
				t.Errorf("%d of the application's row, the young row and the 10 after it left, cursor %d; want all 12 left, the walk stopped before %d (created since the frontier)",
					left, pass.Cursor, young)
			}
		})
	}
}

// A finished row an application inserted with the largest id a bigint holds
// was never deleted: the walk's "before the frontier" test compared ids with
// that same number standing for "no frontier".
func TestRetain_LargestID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	old := now.Add(-30 * 24 * time.Hour)
	const last = int64(9223372036854775807)
	if _, err := b.db.Pool.Exec(b.ctx, `
		INSERT INTO notifications (id, channel, recipient, payload, status, attempts, created_at, updated_at)
		OVERRIDING SYSTEM VALUE VALUES ($1, 'ch', 'app', '{}', 'SENT', 1, $2, $2)`, last, old); err != nil {
		t.Fatal(err)
	}
	r := outbox.Retention{Sent: 7 * 24 * time.Hour, Cancelled: 7 * 24 * time.Hour, Failed: 30 * 24 * time.Hour, Batch: 1000, Rescan: time.Hour}
	if _, err := b.store.Retain(b.ctx, r, now); err != nil {
		t.Fatal(err)
	}
	if left := b.count(t, `SELECT count(*) FROM notifications WHERE id = $1`, last); left != 0 {
		t.Errorf("the SENT row with id %d, finished 30 days ago, is still there", last)
	}
}
