package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/outbox"
)

// History is the history phase (Options.History): the burst again with a
// table that already holds N finished notifications and their attempts, the
// status counts timed at that size, and a retention pass removing them
// while single notifications are delivered beside it.
type History struct {
	Rows        int     `json:"rows"`
	SeedSeconds float64 `json:"seed_seconds"`
	// TableMB and IndexMB are notifications' and notification_attempts'
	// sizes with the history in them.
	TableMB float64 `json:"table_mb"`
	IndexMB float64 `json:"index_mb"`
	// Counts is CountByStatus (maintained counts) at this size; ScanCounts
	// the GROUP BY over the table it replaced, for comparison.
	Counts     Dist  `json:"counts"`
	ScanCounts Dist  `json:"scan_counts"`
	Burst      Burst `json:"burst"`
	// Retention is one pass removing the history (every row is older than
	// the default windows), timed, with single notifications delivered
	// beside it: their committed→received latency while it ran.
	RetentionDeleted int64   `json:"retention_deleted"`
	RetentionSeconds float64 `json:"retention_seconds"`
	RetentionBatches int     `json:"retention_batches"`
	DuringRetention  Dist    `json:"during_retention"`
	LeftAfter        int64   `json:"left_after"`
}

// seedChunk rows per INSERT … SELECT of the history.
const seedChunk = 500_000

// history runs the history phase.
func (e *env) history(ctx context.Context) (History, error) {
	h := History{Rows: e.o.History}
	// The rows so far (the first burst's) go first, as a week of retention
	// would have removed them: history is older than anything after it, as
	// ids grow with time in real traffic (the retention walk relies on it).
	if _, err := e.app.Exec(ctx, `DELETE FROM notification_attempts`); err != nil {
		return h, fmt.Errorf("bench: clear the first burst: %w", err)
	}
	if _, err := e.app.Exec(ctx, `DELETE FROM notifications`); err != nil {
		return h, fmt.Errorf("bench: clear the first burst: %w", err)
	}
	start := time.Now()
	// Finished 8 to 9 days ago, in id order as real traffic is: older than
	// the default windows of SENT and CANCELLED (7 days); a dead letter's
	// is 30 days, so a FAILED row of the history stays.
	age := 8 * 24 * time.Hour
	for done := 0; done < h.Rows; done += seedChunk {
		n := min(seedChunk, h.Rows-done)
		e.progress("history: seeding rows %d–%d of %d", done+1, done+n, h.Rows)
		_, err := e.app.Exec(ctx, `
			WITH ins AS (
				INSERT INTO notifications (channel, recipient, payload, idempotency_key, status, attempts,
				                           due_at, created_at, updated_at, sent_at, last_error)
				SELECT $1, 'user-' || lpad((i % 1000000)::text, 7, '0'), '{"text":"yesterday''s quiz"}',
				       'history:' || i,
				       CASE WHEN i % 100 = 0 THEN 'FAILED' WHEN i % 100 = 1 THEN 'CANCELLED' ELSE 'SENT' END,
				       1, t, t, t + interval '2 seconds',
				       CASE WHEN i % 100 > 1 THEN t + interval '2 seconds' END,
				       CASE WHEN i % 100 = 0 THEN 'webhook: HTTP 400' END
				FROM generate_series($2::bigint, $3::bigint) AS i,
				     LATERAL (SELECT $4::timestamptz + (i * interval '1 millisecond') * (86400000.0 / $5) AS t) ts
				RETURNING id, status, updated_at)
			INSERT INTO notification_attempts (notification_id, attempt, started_at, finished_at, outcome, provider_status)
			SELECT id, 1, updated_at - interval '50 milliseconds', updated_at,
			       CASE status WHEN 'FAILED' THEN 'PERMANENT' ELSE 'SUCCESS' END, 200
			FROM ins WHERE status <> 'CANCELLED'`,
			Channel, done, done+n-1, time.Now().Add(-age-24*time.Hour), float64(max(h.Rows, 1)))
		if err != nil {
			return h, fmt.Errorf("bench: seed history: %w", err)
		}
	}
	// This machine's Postgres may run without autovacuum: make the table
	// what autovacuum would (visibility map, statistics).
	if _, err := e.app.Exec(ctx, `VACUUM (ANALYZE) notifications, notification_attempts`); err != nil {
		return h, fmt.Errorf("bench: vacuum after seeding: %w", err)
	}
	if _, err := e.store.CompactCounts(ctx); err != nil {
		return h, err
	}
	h.SeedSeconds = time.Since(start).Seconds()
	if err := e.app.QueryRow(ctx, `
		SELECT (pg_table_size('notifications') + pg_table_size('notification_attempts')) / 1048576.0,
		       (pg_indexes_size('notifications') + pg_indexes_size('notification_attempts')) / 1048576.0`).Scan(&h.TableMB, &h.IndexMB); err != nil {
		return h, fmt.Errorf("bench: table sizes: %w", err)
	}
	e.progress("history: %d rows seeded in %.0fs (tables %.0f MB, indexes %.0f MB)", h.Rows, h.SeedSeconds, h.TableMB, h.IndexMB)

	var counts, scans []time.Duration
	for range 5 {
		t0 := time.Now()
		if _, err := e.store.CountByStatus(ctx); err != nil {
			return h, err
		}
		counts = append(counts, time.Since(t0))
	}
	for range 3 {
		t0 := time.Now()
		if _, err := e.app.Exec(ctx, `SELECT channel, status, count(*) FROM notifications GROUP BY channel, status`); err != nil {
			return h, fmt.Errorf("bench: scan counts: %w", err)
		}
		scans = append(scans, time.Since(t0))
	}
	slices.Sort(counts)
	slices.Sort(scans)
	h.Counts, h.ScanCounts = distOf(counts), distOf(scans)

	var err error
	if h.Burst, err = e.burst(ctx); err != nil {
		return h, err
	}

	// Retention with the default windows, beside single notifications.
	r := config.FillRetention(config.Retention{})
	type result struct {
		pass outbox.RetentionPass
		err  error
	}
	done := make(chan result, 1)
	go func() {
		p, err := e.store.Retain(ctx, outbox.Retention{Sent: r.Sent, Cancelled: r.Cancelled, Failed: r.Failed, Batch: r.Batch, Rescan: r.Rescan}, time.Now())
		done <- result{p, err}
	}()
	var lat []time.Duration
	var res result
	for waiting := true; waiting; {
		select {
		case res = <-done:
			waiting = false
		default:
			d, err := e.one(ctx, len(lat))
			if err != nil {
				return h, err
			}
			lat = append(lat, d)
		}
	}
	if res.err != nil {
		return h, res.err
	}
	h.RetentionDeleted, h.RetentionSeconds, h.RetentionBatches = res.pass.Deleted, res.pass.Duration.Seconds(), res.pass.Batches
	slices.Sort(lat)
	if len(lat) > 0 {
		h.DuringRetention = distOf(lat)
	}
	if err := e.app.QueryRow(ctx, `SELECT count(*) FROM notifications WHERE starts_with(idempotency_key, 'history:')`).Scan(&h.LeftAfter); err != nil {
		return h, fmt.Errorf("bench: count history left: %w", err)
	}
	return h, nil
}
