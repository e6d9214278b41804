package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Retention windows for one pass (config.Retention); a negative window keeps
// that state forever.
type Retention struct {
	Sent, Cancelled, Failed time.Duration
	Batch                   int
	// Rescan: a pass whose walk began longer ago than this starts again
	// from the oldest row.
	Rescan time.Duration
}

// RetentionPass is what one Retain call did.
type RetentionPass struct {
	Deleted  int64 // notifications removed (their attempts with them)
	Batches  int
	Cursor   int64 // where the walk stands: every older row was visited
	Restart  bool  // the pass started again from the oldest row
	Busy     bool  // another instance was running a pass: this one did nothing
	Duration time.Duration
}

// retentionLock is the advisory lock (per schema: the key is hashed with
// current_schema()) that makes one instance at a time run a pass.
const retentionLock = "notifyd retention"

// Retain removes SENT, CANCELLED and FAILED notifications older than their
// window — measured from updated_at, when they finished — with their
// attempts, in transactions of at most r.Batch rows.
//
// It walks notifications by id (the primary key; no index is added to the
// hot path for it), from a cursor kept in retention_state, and stops at the
// first row younger than the shortest window: ids grow with time, so past it
// nothing can have expired yet. A row created in the future (by an
// application's SQL: notifyd's inserts take the database's now()) does not
// stop it; whether a row goes is decided by updated_at alone. A row the walk passed while it was still in
// flight or too young to go (a notification due next month, a dead letter
// kept longer than delivered ones) is removed by a later pass after the walk
// starts again from the oldest row, which it does every r.Rescan. Only
// finished rows are touched, each locked with SKIP LOCKED and re-checked by
// the delete, so nothing the pipeline holds or waits for is ever locked.
//
// Every instance may call it: an advisory lock makes the others return at
// once (Busy). A notification's idempotency key is honoured as long as the
// notification is kept, and free again once it is removed.
func (s *Store) Retain(ctx context.Context, r Retention, now time.Time) (RetentionPass, error) {
	start := time.Now()
	var pass RetentionPass
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return pass, fmt.Errorf("retention: %w", err)
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1 || current_schema(), 0))`, retentionLock).Scan(&got); err != nil {
		return pass, fmt.Errorf("retention: %w", err)
	}
	if !got {
		pass.Busy = true
		return pass, nil
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(uctx, `SELECT pg_advisory_unlock(hashtextextended($1 || current_schema(), 0))`, retentionLock)
	}()

	cut := func(d time.Duration) time.Time {
		if d < 0 {
			return time.Time{} // keep forever: nothing is older than the zero time
		}
		return now.Add(-d)
	}
	sentCut, cancCut, failCut := cut(r.Sent), cut(r.Cancelled), cut(r.Failed)
	// The walk's frontier: rows created after the latest cut cannot have
	// expired in any state.
	frontier := sentCut
	for _, c := range []time.Time{cancCut, failCut} {
		if c.After(frontier) {
			frontier = c
		}
	}
	if frontier.IsZero() {
		pass.Duration = time.Since(start)
		return pass, nil // every state is kept forever
	}

	var startedAt pgtype.Timestamptz
	if err := conn.QueryRow(ctx, `
		INSERT INTO retention_state (name, cursor, started_at) VALUES ('notifications', 0, $1)
		ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
		RETURNING cursor, started_at`, now).Scan(&pass.Cursor, &startedAt); err != nil {
		return pass, fmt.Errorf("retention: read cursor: %w", err)
	}
	// retention_state is a table an application's SQL can write too: a
	// started_at that is not a time (±infinity, which failed the read of
	// every pass) or lies more than a rescan ahead (which never came within
	// a rescan of now, so the walk never restarted) restarts the walk.
	// Within a rescan ahead is left alone: another instance's clock.
	if startedAt.InfinityModifier != pgtype.Finite || startedAt.Time.Sub(now) > r.Rescan ||
		now.Sub(startedAt.Time) >= r.Rescan {
		pass.Cursor, pass.Restart = 0, true
		if _, err := conn.Exec(ctx, `UPDATE retention_state SET cursor = 0, started_at = $1 WHERE name = 'notifications'`, now); err != nil {
			return pass, fmt.Errorf("retention: restart: %w", err)
		}
	}
	for ctx.Err() == nil {
		var (
			deleted, last int64
			done          bool
		)
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `
				WITH page AS (
					SELECT id, status, updated_at, created_at FROM notifications
					WHERE id > $1 ORDER BY id LIMIT $2),
				walked AS (
					-- the page up to the frontier: rows created before the
					-- latest cut (the walk ends at the first younger one).
					-- A created_at past this statement's time is not one
					-- notifyd wrote (its inserts take the default, now())
					-- but an application's SQL, 'infinity' even: it says
					-- nothing of the rows after it, and ending the walk
					-- there held every pass at that row for good.
					-- No frontier on the page: the whole page (an id of
					-- 2^63-1, which an application may insert, included:
					-- it stood for "no frontier").
					SELECT page.* FROM page, (SELECT min(id) AS id FROM page
					    WHERE created_at >= $6 AND created_at <= statement_timestamp()) frontier
					WHERE frontier.id IS NULL OR page.id < frontier.id),
				victims AS (
					SELECT n.id FROM notifications n JOIN walked w ON w.id = n.id
					WHERE (w.status = 'SENT' AND w.updated_at < $3)
					   OR (w.status = 'CANCELLED' AND w.updated_at < $4)
					   OR (w.status = 'FAILED' AND w.updated_at < $5)
					FOR UPDATE OF n SKIP LOCKED),
				gone AS (
					DELETE FROM notifications n USING victims v
					WHERE n.id = v.id AND (
					      (n.status = 'SENT' AND n.updated_at < $3)
					   OR (n.status = 'CANCELLED' AND n.updated_at < $4)
					   OR (n.status = 'FAILED' AND n.updated_at < $5))
					RETURNING n.id),
				attempts AS (
					DELETE FROM notification_attempts a USING gone g WHERE a.notification_id = g.id),
				receipts AS (
					DELETE FROM notification_receipts r USING gone g WHERE r.notification_id = g.id),
				moved AS (
					UPDATE retention_state SET cursor = greatest(cursor, coalesce((SELECT max(id) FROM walked), cursor))
					WHERE name = 'notifications' RETURNING cursor)
				SELECT (SELECT count(*) FROM gone), (SELECT cursor FROM moved),
				       (SELECT count(*) FROM walked) < $2`,
				pass.Cursor, r.Batch, nullTime(sentCut), nullTime(cancCut), nullTime(failCut), frontier,
			).Scan(&deleted, &last, &done)
		})
		if err != nil {
			return pass, fmt.Errorf("retention: delete after id %d: %w", pass.Cursor, err)
		}
		pass.Deleted += deleted
		pass.Batches++
		pass.Cursor = last
		if done {
			break
		}
	}
	pass.Duration = time.Since(start)
	return pass, ctx.Err()
}

// nullTime is a cut for SQL: the zero time (keep forever) compares false
// with every timestamp as NULL does.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
