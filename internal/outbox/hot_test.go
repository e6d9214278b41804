package outbox_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
)

// The columns a claim, a retry and the sweeper change (migration 00014):
// while no index names one of them — as a key, in an expression or in its
// predicate — those transitions are HOT updates, which add no index entry.
var hotColumns = []string{"status", "attempts", "updated_at", "next_attempt_at", "crashes", "last_error"}

// TestStore_InFlightTransitionsAreHOT: no index of notifications names a
// column that moves within phase 1, and the claim and a retry are in fact
// HOT updates (pg_stat_user_tables counts them). It fails when an index on
// status (or a partial index whose predicate names it) comes back.
func TestStore_InFlightTransitionsAreHOT(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// Every column an index depends on, key, expression or predicate alike
	// (index_create records each in pg_depend).
	rows, err := b.db.Pool.Query(b.ctx, `
SELECT i.relname, a.attname
  FROM pg_index x
  JOIN pg_class i ON i.oid = x.indexrelid
  JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = x.indexrelid
                  AND d.refobjid = x.indrelid AND d.refobjsubid > 0
  JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = d.refobjsubid
 WHERE x.indrelid = 'notifications'::regclass AND a.attname = ANY($1)
 ORDER BY 1, 2`, hotColumns)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var index, column string
		if err := rows.Scan(&index, &column); err != nil {
			t.Fatal(err)
		}
		t.Errorf("index %s names %s, which the claim, a retry or the sweeper changes: those updates cannot be HOT",
			index, column)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	// Eight small rows share a page with room for all their versions, so
	// every update below can stay on it without waiting for the page to be
	// pruned (which other tests' open transactions could hold off).
	const n = 8
	ids := b.queue(t, n) // the relay: n updates, not HOT (phase 0 -> 1)
	cs, err := b.store.Claim(b.ctx, ids, time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ss []outbox.Settlement
	for _, c := range cs {
		if c.Kind != outbox.ClaimSend {
			t.Fatalf("claim %d: %v, want send", c.ID, c.Kind)
		}
		ss = append(ss, outbox.Settlement{ID: c.ID, Attempt: c.Attempt, Result: outbox.ResultRetry, Error: "503"})
	}
	if _, err := b.store.Settle(b.ctx, ss); err != nil {
		t.Fatal(err)
	}
	// A backend reports its counts when it goes idle, within about ten
	// seconds: wait for all 3n updates to be counted.
	var upd, hot int64
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := b.db.Pool.QueryRow(b.ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
			WHERE relid = 'notifications'::regclass`).Scan(&upd, &hot)
		if err != nil {
			t.Fatal(err)
		}
		if upd >= 3*n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s the statistics count %d updates of notifications (%d HOT), want %d", upd, hot, 3*n)
		}
	}
	if upd != 3*n || hot != 2*n {
		t.Errorf("updates %d, HOT %d: want %d, of them %d HOT (the claim's and the retry's)", upd, hot, 3*n, 2*n)
	}
}

// TestStore_StateQueriesReadTheirPartialIndexes: every query that finds rows
// by state repeats its partial index's phase predicate (the planner cannot
// infer phase from status), so it reads that index rather than the table.
// Counted by pg_stat_user_indexes after each is called once on 4,000 rows.
func TestStore_StateQueriesReadTheirPartialIndexes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.insertN(t, 4000)
	b.force(t, "QUEUED", 1, time.Now().Add(-time.Hour), ids[1000:2000]...)
	b.force(t, "FAILED", 1, time.Now(), ids[2000:2100]...)
	b.force(t, "SENT", 1, time.Now(), ids[2100:]...)
	// A channel of few rows, so that listing its dead letters reads the
	// channel's index.
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET channel = 'rare' WHERE id = ANY($1)`,
		ids[2000:2010]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(b.ctx, `ANALYZE notifications`); err != nil {
		t.Fatal(err)
	}
	before := indexScans(t, b)

	if _, err := b.store.NextDue(b.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.FirstDue(b.ctx, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Sweep(b.ctx, time.Now().Add(-time.Minute), 0, 100); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.store.ListFailed(b.ctx, "rare", 0, 10); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.store.ListFailed(b.ctx, "", 0, 10); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{ // at least this many more scans
		"notifications_pending_due":    2,
		"notifications_inflight_id":    1,
		"notifications_failed_channel": 1,
		"notifications_failed_id":      1,
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		after := indexScans(t, b)
		short := ""
		for index, n := range want {
			if after[index]-before[index] < n {
				short += fmt.Sprintf(" %s %d (want %d more than %d)", index, after[index], n, before[index])
			}
		}
		if short == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s, index scans counted:%s", short)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func indexScans(t *testing.T, b *bundle) map[string]int64 {
	t.Helper()
	rows, err := b.db.Pool.Query(b.ctx, `SELECT indexrelname, idx_scan FROM pg_stat_user_indexes
		WHERE relid = 'notifications'::regclass`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
