package outbox_test

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
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

// TestMigrate_boundedText: migration 15 on a database an application's own
// SQL wrote past the bounds finishes every such row with a reason — FAILED
// if it was still to be sent, its values cut and its key hashed — keeps the
// rest as they were and the counts exact, and from then on the database
// refuses such a value, naming the bound.
func TestMigrate_boundedText(t *testing.T) {
	t.Parallel()
	db := testenv.NewSchema(t)
	ctx := t.Context()
	if err := outbox.MigrateUpTo(ctx, db.Pool, 14); err != nil {
		t.Fatal(err)
	}
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO notifications (channel, recipient, payload, idempotency_key, status, attempts, last_error, due_at) VALUES
		  ('a', repeat('r', 300000), '{}', 'k1', 'QUEUED', 0, NULL, now()),          -- 1: live, long recipient
		  (repeat('c', 5000), 'r2', '{}', 'k2', 'PENDING', 0, NULL, now()),          -- 2: live, long channel
		  ('a', 'r3', '{}', repeat('k', 3000), 'PROCESSING', 1, NULL, now()),       -- 3: live, long key
		  ('a', 'r4', '{}', 'k4', 'FAILED', 3, repeat('e', 100000), now()),         -- 4: done, long error only
		  ('a', repeat('r', 2000), '{}', 'k5', 'SENT', 1, NULL, now()),             -- 5: done, long recipient
		  ('a', 'r6', '{}', 'k6', 'PENDING', 0, repeat('e', 5000), now()),          -- 6: live, long error only
		  ('a', 'r7', '{}', 'k7', 'QUEUED', 0, NULL, now());                        -- 7: nothing long
		INSERT INTO notification_attempts (notification_id, attempt, started_at, finished_at, outcome, error, provider_code)
		VALUES (4, 1, now(), now(), 'PERMANENT', repeat('e', 9000), repeat('c', 300));
		INSERT INTO channel_controls (channel, paused, reason) VALUES ('a', true, repeat('p', 2000)), (repeat('x', 300), true, 'junk')`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Migrate(ctx, db.Pool); err != nil {
		t.Fatalf("migrate a database with values past their bounds: %v", err)
	}
	type row struct {
		status, channel, recipient, key, lastError string
	}
	rows, err := db.Pool.Query(ctx, `SELECT status, channel, recipient, coalesce(idempotency_key, ''), coalesce(last_error, '')
		FROM notifications ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.status, &r.channel, &r.recipient, &r.key, &r.lastError); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil || len(got) != 7 {
		t.Fatalf("%d rows after the migration (%v), want 7", len(got), err)
	}
	check := func(i int, ok bool, what string) {
		t.Helper()
		if !ok {
			r := got[i-1]
			t.Errorf("row %d: %s; got status %s, channel %d bytes, recipient %d, key %q…, last_error %q…", i, what,
				r.status, len(r.channel), len(r.recipient), r.key[:min(20, len(r.key))], r.lastError[:min(120, len(r.lastError))])
		}
	}
	sum := sha256Hex(strings.Repeat("k", 3000))
	check(1, got[0].status == "FAILED" && len(got[0].recipient) == 256 && strings.Contains(got[0].lastError, "recipient is 300000 bytes long, at most 1024"), "want FAILED, the recipient cut, the reason")
	check(2, got[1].status == "FAILED" && got[1].channel == strings.Repeat("c", 50)+"…[cut]" && strings.Contains(got[1].lastError, "channel is 5000 bytes long"), "want FAILED, the channel cut and marked, the reason")
	check(3, got[2].status == "FAILED" && got[2].key == "sha256:"+sum && strings.Contains(got[2].lastError, "idempotency_key is 3000 bytes long"), "want FAILED, the key hashed, the reason")
	check(4, got[3].status == "FAILED" && strings.HasSuffix(got[3].lastError, "…[truncated]") && len(got[3].lastError) < 1100, "want FAILED still, its error cut")
	check(5, got[4].status == "SENT" && len(got[4].recipient) == 256 && got[4].lastError == "", "want SENT still, the recipient cut")
	check(6, got[5].status == "PENDING" && strings.HasSuffix(got[5].lastError, "…[truncated]"), "want PENDING still (nothing it is sent with was long), its error cut")
	check(7, got[6] == row{"QUEUED", "a", "r7", "k7", ""}, "want it untouched")

	var attemptErr, code, reason int
	if err := db.Pool.QueryRow(ctx, `SELECT octet_length(error), octet_length(provider_code) FROM notification_attempts`).Scan(&attemptErr, &code); err != nil || attemptErr > 4096 || code > 256 {
		t.Errorf("attempt error %d bytes, code %d (%v); want them within 4096 and 256", attemptErr, code, err)
	}
	var controls int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*), max(octet_length(reason)) FROM channel_controls`).Scan(&controls, &reason); err != nil || controls != 1 || reason > 1024 {
		t.Errorf("channel_controls: %d rows, reason %d bytes (%v); want 'a' alone, its reason within 1024", controls, reason, err)
	}

	// The counts agree with the table, with no count for the long channel.
	store := outbox.New(db.Pool)
	counts, err := store.CountByStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int64{}
	for _, r := range got {
		if want[r.channel] == nil {
			want[r.channel] = map[string]int64{}
		}
		want[r.channel][r.status]++
	}
	for ch, byStatus := range counts {
		for st, n := range byStatus {
			if n != want[ch][st] {
				t.Errorf("count %.20q/%s = %d after the migration, want %d", ch, st, n, want[ch][st])
			}
		}
	}
	for ch, byStatus := range want {
		for st, n := range byStatus {
			if counts[ch][st] != n {
				t.Errorf("count %.20q/%s = %d after the migration, want %d", ch, st, counts[ch][st], n)
			}
		}
	}
	if _, err := store.CompactCounts(ctx); err != nil {
		t.Errorf("CompactCounts after the migration: %v", err)
	}

	// From now on the database refuses a value past its bound, whoever writes it.
	for _, c := range []struct{ sql, constraint string }{
		{`INSERT INTO notifications (channel, recipient, payload) VALUES ('a', repeat('r', 1025), '{}')`, "notifications_recipient_bound"},
		{`INSERT INTO notifications (channel, recipient, payload) VALUES (repeat('c', 201), 'r', '{}')`, "notifications_channel_bound"},
		{`INSERT INTO notifications (channel, recipient, payload, idempotency_key) VALUES ('a', 'r', '{}', repeat('k', 2049))`, "notifications_idempotency_key_bound"},
		{`UPDATE notifications SET last_error = repeat('e', 4097) WHERE id = 7`, "notifications_last_error_bound"},
		{`INSERT INTO channel_controls (channel, reason) VALUES ('b', repeat('p', 1025))`, "channel_controls_reason_bound"},
		{`INSERT INTO subscribers (external_id) VALUES (repeat('s', 257))`, "subscribers_external_id_bound"},
	} {
		_, err := db.Pool.Exec(ctx, c.sql)
		if err == nil || !strings.Contains(err.Error(), c.constraint) || !outbox.IsRowError(err) {
			t.Errorf("%.60s… = %v; want a row error naming %s", c.sql, err, c.constraint)
		}
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestMigrate_positiveIDs: migration 16 on a database an application's own
// SQL wrote ids of 0 and below into (OVERRIDING SYSTEM VALUE). Every cursor
// notifyd walks an id by starts past 0 — the sweep and the resync, the
// dead-letter pages, the replay and purge passes, retention, a topic
// audience's subscribers — so such a row was never pushed again after Redis
// lost it, never listed, never deleted. The migration gives each such row a
// new id from its sequence, its history, receipt and dead-letter event (a
// subscriber's topics, a job's notifications) following it, and from then on
// the database refuses an id of 0 or below, whoever writes it.
func TestMigrate_positiveIDs(t *testing.T) {
	t.Parallel()
	db := testenv.NewSchema(t)
	ctx := t.Context()
	if err := outbox.MigrateUpTo(ctx, db.Pool, 15); err != nil {
		t.Fatal(err)
	}
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO jobs (id, kind, channel, audience, payload, state) OVERRIDING SYSTEM VALUE
		VALUES (-3, 'campaign', 'a', '{"topic":"t"}', '{}', 'DONE');
		INSERT INTO notifications (id, channel, recipient, payload, status, attempts, updated_at, job_id) OVERRIDING SYSTEM VALUE VALUES
		  (0, 'a', 'r0', '{}', 'QUEUED', 1, now() - interval '1 hour', -3),
		  (-5, 'a', 'r-5', '{}', 'FAILED', 1, now() - interval '1 hour', NULL),
		  (-7, 'a', 'r-7', '{}', 'SENT', 1, now() - interval '1 hour', NULL);
		INSERT INTO notifications (channel, recipient, payload, status, updated_at) VALUES ('a', 'r1', '{}', 'QUEUED', now() - interval '1 hour');
		INSERT INTO notification_attempts (notification_id, attempt, started_at, finished_at, outcome, error)
		VALUES (-5, 1, now(), now(), 'PERMANENT', 'refused'), (0, 1, now(), now(), 'TRANSIENT', 'later');
		INSERT INTO notification_receipts (notification_id, outcome, attempt) VALUES (-7, 'DELIVERED', 1);
		INSERT INTO dead_letter_events (channel, notification_id) VALUES ('a', -5);
		INSERT INTO subscribers (id, external_id) OVERRIDING SYSTEM VALUE VALUES (0, 'zero'), (-2, 'minus-two');
		INSERT INTO subscribers (external_id) VALUES ('one');
		INSERT INTO topic_subscriptions (topic, subscriber_id) SELECT 't', id FROM subscribers`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Migrate(ctx, db.Pool); err != nil {
		t.Fatalf("migrate a database holding ids of 0 and below: %v", err)
	}
	for _, table := range []string{"notifications", "subscribers", "jobs"} {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE id <= 0`).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d rows with an id of 0 or below after the migration (%v)", table, n, err)
		}
	}
	idOf := func(recipient string) int64 {
		t.Helper()
		var id int64
		if err := db.Pool.QueryRow(ctx, `SELECT id FROM notifications WHERE recipient = $1`, recipient).Scan(&id); err != nil {
			t.Fatalf("notification %s: %v", recipient, err)
		}
		return id
	}
	queued, failed, sent := idOf("r0"), idOf("r-5"), idOf("r-7")

	// The cursors reach them now: the sweep (and so the resync) lists the
	// QUEUED row, the dead-letter page the FAILED one.
	store := outbox.New(db.Pool)
	swept, err := store.Sweep(ctx, time.Now(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(swept); !slices.Contains(got, queued) || len(got) != 2 {
		t.Errorf("Sweep = %v, want the row that was id 0 (now %d) and r1's", got, queued)
	}
	page, _, err := store.ListFailed(ctx, "a", 0, 100)
	if err != nil || len(page) != 1 || page[0].ID != failed {
		t.Errorf("ListFailed = %d rows (%v), want the row that was id -5 (now %d)", len(page), err, failed)
	}
	// Its history, receipt and dead-letter event came with each row.
	for _, c := range []struct {
		sql  string
		id   int64
		want int
	}{
		{`SELECT count(*) FROM notification_attempts WHERE notification_id = $1 AND error = 'refused'`, failed, 1},
		{`SELECT count(*) FROM notification_attempts WHERE notification_id = $1 AND error = 'later'`, queued, 1},
		{`SELECT count(*) FROM notification_receipts WHERE notification_id = $1`, sent, 1},
		{`SELECT count(*) FROM dead_letter_events WHERE notification_id = $1`, failed, 1},
		{`SELECT count(*) FROM notifications n JOIN jobs j ON j.id = n.job_id WHERE n.id = $1 AND j.kind = 'campaign'`, queued, 1},
	} {
		var n int
		if err := db.Pool.QueryRow(ctx, c.sql, c.id).Scan(&n); err != nil || n != c.want {
			t.Errorf("%s [%d] = %d (%v), want %d", c.sql, c.id, n, err, c.want)
		}
	}
	var subscribed int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM topic_subscriptions ts JOIN subscribers s ON s.id = ts.subscriber_id
		WHERE ts.topic = 't' AND ts.subscriber_id > 0`).Scan(&subscribed); err != nil || subscribed != 3 {
		t.Errorf("topic t: %d subscribers past id 0 (%v), want all 3", subscribed, err)
	}

	// From now on the database refuses an id of 0 or below, whoever writes it.
	for _, c := range []struct{ sql, constraint string }{
		{`INSERT INTO notifications (id, channel, recipient, payload) OVERRIDING SYSTEM VALUE VALUES (0, 'a', 'r', '{}')`, "notifications_id_positive"},
		{`INSERT INTO notifications (id, channel, recipient, payload) OVERRIDING SYSTEM VALUE VALUES (-5, 'a', 'r', '{}')`, "notifications_id_positive"},
		{`INSERT INTO subscribers (id, external_id) OVERRIDING SYSTEM VALUE VALUES (0, 's0')`, "subscribers_id_positive"},
		{`INSERT INTO jobs (id, kind, channel, audience, payload) OVERRIDING SYSTEM VALUE VALUES (-1, 'campaign', 'a', '{}', '{}')`, "jobs_id_positive"},
	} {
		_, err := db.Pool.Exec(ctx, c.sql)
		if err == nil || !strings.Contains(err.Error(), c.constraint) || !outbox.IsRowError(err) {
			t.Errorf("%.70s… = %v; want a row error naming %s", c.sql, err, c.constraint)
		}
	}
	// notifyd's own inserts are unchanged.
	b := &bundle{ctx: ctx, db: db, store: store}
	if got := b.insertN(t, 2); got[0] <= 0 {
		t.Errorf("Insert after the migration = %v", got)
	}
}

// TestMigrate_channelPartitionMark: a channel's partitions are the Redis
// queues <name>#<k>, and a configured channel's name cannot hold '#'
// (wire.NameRE), so a row an application's own SQL wrote on "hooks#1" went
// into the queue of hooks' partition 1 and was sent through hooks' plugin.
// Migration 17 finishes such a row still to be sent FAILED with the reason
// (no channel can send it), keeps the settled ones as they are, and from
// then on the database refuses a channel holding '#', whoever writes it.
func TestMigrate_channelPartitionMark(t *testing.T) {
	t.Parallel()
	db := testenv.NewSchema(t)
	ctx := t.Context()
	if err := outbox.MigrateUpTo(ctx, db.Pool, 16); err != nil {
		t.Fatal(err)
	}
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO notifications (channel, recipient, payload, status, attempts) VALUES
		  ('hooks#1', 'r1', '{}', 'PENDING', 0),
		  ('hooks#1', 'r2', '{}', 'QUEUED', 0),
		  ('#', 'r3', '{}', 'PROCESSING', 1),
		  ('hooks#0', 'r4', '{}', 'SENT', 1),
		  ('hooks', 'r5', '{}', 'QUEUED', 0)`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Migrate(ctx, db.Pool); err != nil {
		t.Fatalf("migrate a database holding channels with '#': %v", err)
	}
	rows, err := db.Pool.Query(ctx, `SELECT recipient, status, coalesce(last_error, '') FROM notifications ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]string{}
	for rows.Next() {
		var r, st, e string
		if err := rows.Scan(&r, &st, &e); err != nil {
			t.Fatal(err)
		}
		got[r] = [2]string{st, e}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"r1", "r2", "r3"} {
		if st, e := got[r][0], got[r][1]; st != "FAILED" || !strings.Contains(e, "'#'") || !strings.Contains(e, "migration 00017") {
			t.Errorf("%s: %s %q; want FAILED with the reason", r, st, e)
		}
	}
	if got["r4"] != [2]string{"SENT", ""} || got["r5"] != [2]string{"QUEUED", ""} {
		t.Errorf("r4 = %v, r5 = %v; want them untouched", got["r4"], got["r5"])
	}
	store := outbox.New(db.Pool)
	if queued, err := store.Relay(ctx, time.Now(), 100); err != nil || len(queued) != 0 {
		t.Errorf("Relay after the migration = %v, %v; want nothing", queued, err)
	}
	counts, err := store.CountByStatus(ctx)
	if err != nil || counts["hooks#1"]["FAILED"] != 2 || counts["hooks#1"]["PENDING"] != 0 || counts["#"]["FAILED"] != 1 {
		t.Errorf("counts after the migration = %v, %v", counts, err)
	}

	// From now on the database refuses a channel holding '#'.
	for _, sql := range []string{
		`INSERT INTO notifications (channel, recipient, payload) VALUES ('hooks#1', 'r', '{}')`,
		`UPDATE notifications SET channel = 'hooks#2' WHERE recipient = 'r5'`,
	} {
		_, err := db.Pool.Exec(ctx, sql)
		if err == nil || !strings.Contains(err.Error(), "notifications_channel_no_partition_mark") || !outbox.IsRowError(err) {
			t.Errorf("%.70s… = %v; want a row error naming notifications_channel_no_partition_mark", sql, err)
		}
	}
	ins, err := store.Insert(ctx, []outbox.NewNotification{{Channel: "hooks#1", Recipient: "r", Payload: []byte(`{}`)}})
	if err == nil || !strings.Contains(err.Error(), "notifications_channel_no_partition_mark") {
		t.Errorf("Insert on hooks#1 = %v, %v; want refused naming the constraint", ins, err)
	}
}
