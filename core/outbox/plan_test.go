package outbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/notifyd/notifyd/core/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

// Regression: relay, claim and settle must never run as cached named
// statements. Postgres switches a named statement to a generic plan after
// five runs; one made while the outbox was idle kept the relay on a nested
// loop over every PENDING row during the next burst (found by notifyd
// bench: 5–10× slower after 12 s of polling an empty outbox). On one
// connection, after many calls, none of them may be in the session's
// prepared statements.
func TestStore_HotStatementsArePlannedEachCall(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := testenv.Context(t)
	pc, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := outbox.New(pool)

	for i := range 8 { // idle polling: more than the five runs a generic plan waits for
		if _, err := store.Relay(ctx, time.Now(), 1000); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Claim(ctx, []int64{int64(i + 1)}, time.Now(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Settle(ctx, []outbox.Settlement{{ID: int64(i + 1), Attempt: 1, Result: outbox.ResultSent}}); err != nil {
			t.Fatal(err)
		}
	}
	var named int
	err = pool.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements
		WHERE statement NOT LIKE '%pg_prepared_statements%'
		  AND (statement LIKE '%FOR UPDATE SKIP LOCKED%'
		   OR statement LIKE '%attempts = n.attempts + 1%'
		   OR statement LIKE '%notification_attempts%')`).Scan(&named)
	if err != nil {
		t.Fatal(err)
	}
	if named != 0 {
		t.Errorf("%d hot outbox statements are cached as named prepared statements; want 0 (each must be planned with its real parameters)", named)
	}
}

// Regression: the 08:00 burst, 20,000 rows inserted into an outbox whose
// statistics predate them (no ANALYZE since), must be relayed by walking
// notifications_pending_due in order, stopping after the limit. Planned
// freely, the relay expected a few hundred due rows and chose a bitmap scan
// of every due row plus a sort, on every call: 70 µs per row relayed in
// notifyd bench instead of under 10, quadratic in the burst. With
// RelayPlan the plan has neither, nor JIT (whose compile time the
// disable penalty would otherwise trigger).
func TestStore_RelayPlanWalksThePendingIndex(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := testenv.Context(t)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO notifications (channel, recipient, payload, due_at)
		SELECT 'quiz', 'user-' || g, '{"n":1}', now() - interval '1 second' FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "BEGIN; "+outbox.RelayPlan); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, FORMAT TEXT) "+outbox.RelaySQL, time.Now(), 800)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "Index Scan using notifications_pending_due") {
		t.Errorf("relay plan does not walk notifications_pending_due:\n%s", plan)
	}
	for _, bad := range []string{"Bitmap", "JIT"} {
		if strings.Contains(plan, bad) {
			t.Errorf("relay plan has %s:\n%s", bad, plan)
		}
	}
	// Below the LIMIT only one index scan runs: no sort of the due rows.
	lock, update := strings.Index(plan, "LockRows"), strings.Index(plan, "Update on")
	if lock < 0 || update < lock || strings.Contains(plan[lock:update], "Sort") {
		t.Errorf("relay plan sorts the due rows (or lacks LockRows before the UPDATE):\n%s", plan)
	}
}
