package outbox_test

import (
	"testing"
	"time"

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
