package outbox_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

// Regression, twice over (both found by notifyd-bench). Relay, Claim and
// Settle run as cached statements on one generic plan each, made the first
// time a connection runs them — at 07:59, on an idle and empty outbox. Left
// to the planner, the settle's generic plan was then a hash join over a
// bitmap scan of every in-flight row and the relay's a sort of every due
// row, once per call: quadratic in the 08:00 burst. After polling an empty
// outbox, with 20,000 rows then inserted and no ANALYZE since, each cached
// plan must still read rows by key or walk its partial index in order.
func TestStore_HotPlansAreMadeForTheBurst(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := testenv.Context(t)
	pc, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = 1 // so the hot pools have one connection each, and one plan cache
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := outbox.New(pool)
	defer store.Close()

	now := time.Now()
	for i := range 8 { // idle polling, on an outbox that has never held a row
		id := int64(i + 1)
		if _, err := store.Relay(ctx, now, 1000); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Claim(ctx, []int64{id}, now, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Settle(ctx, []outbox.Settlement{{ID: id, Attempt: 1, Result: outbox.ResultSent}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO notifications (channel, recipient, payload, due_at, status)
		SELECT 'quiz', 'user-' || g, '{"n":1}', now() - interval '1 second',
		       CASE WHEN g % 2 = 0 THEN 'PENDING' ELSE 'PROCESSING' END
		  FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}

	hot, relay, err := outbox.HotPools(store)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{1, 3, 5, 7}
	n := len(ids)
	texts, ints := make([]string, n), make([]int32, n)
	stamps := make([]time.Time, n)
	checks := []struct {
		name   string
		pool   *pgxpool.Pool
		marker string // identifies the statement in pg_prepared_statements
		args   []any
		want   []string // plan nodes that must be there
	}{
		{"relay", relay, "FOR UPDATE SKIP LOCKED", []any{now, 800, 0},
			[]string{"Index Scan using notifications_pending_due", "LockRows"}},
		{"claim", hot, "attempts = greatest(n.attempts, 0) + 1", []any{ids, now, now.Add(-time.Minute), "1m0s", outbox.MaxPayloadBytes},
			[]string{"Index Scan using notifications_"}},
		{"settle", hot, "AS i(id, attempt, status, next_attempt_at",
			[]any{ids, ints, texts, stamps, texts, ints, texts, texts, texts, stamps, stamps},
			[]string{"Index Scan using notifications_"}},
	}
	for _, c := range checks {
		checkPlan(t, ctx, c.pool, c.name, c.marker, c.args, c.want)
	}
}

// checkPlan checks the cached plan of the hot statement marked by marker
// (TestStore_HotPlansAreMadeForTheBurst). Its connection goes back to the
// pool however it returns: a Fatal holding it made the test's deferred
// pool.Close wait for it until the package's timeout.
func checkPlan(t *testing.T, ctx context.Context, pool *pgxpool.Pool, name, marker string, args []any, want []string) {
	t.Helper()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var stmt string
	var generic int64
	err = conn.QueryRow(ctx, `SELECT name, generic_plans FROM pg_prepared_statements
		WHERE strpos(statement, $1) > 0 AND strpos(statement, 'pg_prepared_statements') = 0`,
		pgx.QueryExecModeSimpleProtocol, marker).Scan(&stmt, &generic)
	if err != nil {
		t.Fatalf("%s: not a cached statement on its hot-path connection: %v", name, err)
	}
	if generic == 0 {
		t.Errorf("%s: its cached statement has never run on a generic plan", name)
	}
	// EXPLAIN EXECUTE takes no bind parameters: the arguments go in as
	// literals. force_generic_plan makes it show the cached generic plan.
	params := make([]string, len(args))
	for i, a := range args {
		params[i] = literal(t, a)
	}
	rows, err := conn.Query(ctx, "EXPLAIN EXECUTE "+pgx.Identifier{stmt}.Sanitize()+"("+strings.Join(params, ", ")+")",
		pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	plan := strings.Join(lines, "\n")
	for _, w := range want {
		if !strings.Contains(plan, w) {
			t.Errorf("%s: the cached plan has no %q:\n%s", name, w, plan)
		}
	}
	t.Logf("%s:\n%s", name, plan)
	for _, bad := range []string{"Bitmap", "JIT"} {
		if strings.Contains(plan, bad) {
			t.Errorf("%s: the cached plan has a %s:\n%s", name, bad, plan)
		}
	}
	// No join compares the batch's ids pair by pair.
	for _, l := range lines {
		if strings.Contains(l, "Join Filter") && strings.Contains(l, "id = ") {
			t.Errorf("%s: the cached plan joins by nested loop (%s):\n%s", name, strings.TrimSpace(l), plan)
		}
	}
	// Every scan of notifications is bounded by an index condition: a
	// scan with a filter only reads every row (of the table, or of a
	// partial index) once per call.
	for i, l := range lines {
		if !strings.Contains(l, " on notifications") || !strings.Contains(l, "Scan") {
			continue
		}
		if i+1 == len(lines) || !strings.Contains(lines[i+1], "Index Cond:") {
			t.Errorf("%s: the cached plan reads notifications without an index condition (%s):\n%s",
				name, strings.TrimSpace(l), plan)
		}
	}
	if name == "relay" { // below the LIMIT one ordered index scan, no sort of the due rows
		lock, update := strings.Index(plan, "LockRows"), strings.Index(plan, "Update on")
		if lock < 0 || update < lock || strings.Contains(plan[lock:update], "Sort") {
			t.Errorf("relay: the cached plan sorts the due rows (or lacks LockRows before the UPDATE):\n%s", plan)
		}
	}
}

// literal writes a as a SQL literal.
func literal(t *testing.T, a any) string {
	t.Helper()
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	ts := func(v time.Time) string { return `"` + v.Format(time.RFC3339Nano) + `"` }
	list := func(xs []string) string { return quote("{" + strings.Join(xs, ",") + "}") }
	switch v := a.(type) {
	case int:
		return strconv.Itoa(v)
	case string:
		return quote(v)
	case time.Time:
		return quote(v.Format(time.RFC3339Nano))
	case []int64:
		xs := make([]string, len(v))
		for i, x := range v {
			xs[i] = strconv.FormatInt(x, 10)
		}
		return list(xs)
	case []int32:
		xs := make([]string, len(v))
		for i, x := range v {
			xs[i] = strconv.Itoa(int(x))
		}
		return list(xs)
	case []string:
		xs := make([]string, len(v))
		for i, x := range v {
			xs[i] = `"` + x + `"`
		}
		return list(xs)
	case []time.Time:
		xs := make([]string, len(v))
		for i, x := range v {
			xs[i] = ts(x)
		}
		return list(xs)
	}
	t.Fatalf("literal: %T", a)
	return ""
}
