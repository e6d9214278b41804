package outbox_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

// TestMigrate_jobAudience: migration 7 (one RUNNING job per audience, re-runs,
// content keys) on a database an older notifyd filled: every job and
// notification is kept, and of two jobs RUNNING over one audience the younger
// goes back to PENDING with its cursor, so the unique index can hold.
func TestMigrate_jobAudience(t *testing.T) {
	t.Parallel()
	db := testenv.NewSchema(t)
	ctx := t.Context()
	if err := outbox.MigrateUpTo(ctx, db.Pool, 6); err != nil {
		t.Fatal(err)
	}
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO jobs (kind, schedule, fire_time, channel, audience, payload, state, cursor, owner, heartbeat_at) VALUES
		  ('schedule', 'daily', '2026-11-25T08:00:00+09:00', 'quiz', '{"topic":"t","query":"","key":""}', '{}', 'RUNNING', '40', 'a', now()),
		  ('campaign', NULL, NULL, 'quiz', '{"topic":"t","query":"","key":""}', '{}', 'RUNNING', '7', 'b', now()),
		  ('campaign', NULL, NULL, 'sms',  '{"topic":"t","query":"","key":""}', '{}', 'RUNNING', '9', 'c', now()),
		  ('campaign', NULL, NULL, 'quiz', '{"topic":"","query":"SELECT 1","key":"k"}', '{}', 'DONE', NULL, NULL, NULL);
		INSERT INTO notifications (channel, recipient, payload, status, job_id)
		SELECT 'quiz', 'r' || i, '{}', (ARRAY['PENDING','QUEUED','PROCESSING','SENT','FAILED','CANCELLED'])[1 + i % 6], 1
		FROM generate_series(1, 60) AS i`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Migrate(ctx, db.Pool); err != nil {
		t.Fatalf("migrate a database with jobs and notifications in every state: %v", err)
	}
	rows, err := db.Pool.Query(ctx, `SELECT id, state, coalesce(cursor, ''), coalesce(owner, ''), audience_key, rerun FROM jobs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type job struct {
		id                         int64
		state, cursor, owner, akey string
		rerun                      int
	}
	var got []job
	for rows.Next() {
		var j job
		if err := rows.Scan(&j.id, &j.state, &j.cursor, &j.owner, &j.akey, &j.rerun); err != nil {
			t.Fatal(err)
		}
		got = append(got, j)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []job{
		{1, "RUNNING", "40", "a", "quiz:topic:t", 0},
		{2, "PENDING", "7", "", "quiz:topic:t", 0}, // the younger over one audience waits
		{3, "RUNNING", "9", "c", "sms:topic:t", 0}, // another channel is another audience
		{4, "DONE", "", "", "quiz:query:" + md5hex("SELECT 1"), 0},
	}
	if len(got) != len(want) {
		t.Fatalf("jobs after the migration = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("job %d after the migration = %+v, want %+v", want[i].id, got[i], want[i])
		}
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM notifications`).Scan(&n); err != nil || n != 60 {
		t.Errorf("%d notifications after the migration (%v), want 60", n, err)
	}
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestMigrate_counts: migration 10 (maintained counts, retention state) on a
// database holding notifications in every state starts the counts at the
// table's figures, changes no row, and leaves PENDING rows relayable.
func TestMigrate_counts(t *testing.T) {
	t.Parallel()
	db := testenv.NewSchema(t)
	ctx := t.Context()
	if err := outbox.MigrateUpTo(ctx, db.Pool, 9); err != nil {
		t.Fatal(err)
	}
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO notifications (channel, recipient, payload, status, attempts, due_at)
		SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END, 'r' || i, '{}',
		       (ARRAY['PENDING','QUEUED','PROCESSING','SENT','FAILED','CANCELLED'])[1 + i % 6], i % 3, now() - interval '1 minute'
		FROM generate_series(1, 600) AS i`)
	if err != nil {
		t.Fatal(err)
	}
	var before string
	snapshot := `SELECT string_agg(id || ':' || status || ':' || attempts, ',' ORDER BY id) FROM notifications`
	if err := db.Pool.QueryRow(ctx, snapshot).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Migrate(ctx, db.Pool); err != nil {
		t.Fatalf("migrate a database with notifications in every state: %v", err)
	}
	var after string
	if err := db.Pool.QueryRow(ctx, snapshot).Scan(&after); err != nil || after != before {
		t.Fatalf("rows changed by the migration (%v)", err)
	}
	store := outbox.New(db.Pool)
	got, err := store.CountByStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{"a", "b"} {
		for _, st := range []string{"PENDING", "QUEUED", "PROCESSING", "SENT", "FAILED", "CANCELLED"} {
			var want int64
			if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM notifications WHERE channel = $1 AND status = $2`, ch, st).Scan(&want); err != nil {
				t.Fatal(err)
			}
			if got[ch][st] != want {
				t.Errorf("count %s/%s = %d after the migration, want %d", ch, st, got[ch][st], want)
			}
		}
	}
	queued, err := store.Relay(ctx, time.Now(), 1000)
	if err != nil || len(queued) != 100 {
		t.Errorf("Relay after the migration = %d rows, %v; want the 100 PENDING ones", len(queued), err)
	}
}

// TestMigrate_createsSchema: a search_path naming a schema that does not
// exist yet (an example's own) gets it created and migrated.
func TestMigrate_createsSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := "t_created_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))[:12] + fmt.Sprint(time.Now().UnixNano()%1_000_000)
	u, err := url.Parse(testenv.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
		pool.Close()
	})
	n, err := outbox.Migrate(ctx, pool)
	if err != nil || n == 0 {
		t.Fatalf("Migrate with search_path=%s (no such schema yet) = %d, %v; want it created and migrated", schema, n, err)
	}
	var got string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&got); err != nil || got != schema {
		t.Errorf("current_schema() = %q, %v; want %q", got, err, schema)
	}
}
