package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Cancel moves the given PENDING or QUEUED rows to CANCELLED and returns the
// ids it changed. Rows in any other state are left alone. A cancelled row
// that is still in a Redis queue is dropped by Claim (ClaimSkip).
func (s *Store) Cancel(ctx context.Context, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `
UPDATE notifications SET status = 'CANCELLED', next_attempt_at = NULL, updated_at = now()
 WHERE id = ANY($1::bigint[]) AND status IN ('PENDING', 'QUEUED')
RETURNING id`, ids)
	if err != nil {
		return nil, fmt.Errorf("cancel %d notifications: %w", len(ids), err)
	}
	changed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("cancel %d notifications: %w", len(ids), err)
	}
	return changed, nil
}

// Replay moves the given FAILED rows back to QUEUED with attempts reset to 0
// (a fresh retry budget) and returns them for pushing. last_error is kept
// until the next settle overwrites it: it still says why the row was
// dead-lettered, and the attempt log keeps the whole history.
func (s *Store) Replay(ctx context.Context, ids []int64) ([]Queued, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `
UPDATE notifications SET status = 'QUEUED', attempts = 0, crashes = 0, next_attempt_at = NULL, updated_at = now()
 WHERE id = ANY($1::bigint[]) AND status = 'FAILED'
RETURNING id, channel`, ids)
	if err != nil {
		return nil, fmt.Errorf("replay %d notifications: %w", len(ids), err)
	}
	out, err := scanQueued(rows, false)
	if err != nil {
		return nil, fmt.Errorf("replay %d notifications: %w", len(ids), err)
	}
	return out, nil
}

// ReplayChannel replays up to limit FAILED rows of channel with an id past
// after, lowest id first, as Replay does. Call it again, after the last id
// it returned, until it returns fewer than limit to replay a whole
// dead-letter queue in bounded transactions: each row is visited once, so a
// row that fails again during the pass is not replayed twice and the pass
// ends even when every send fails at once.
func (s *Store) ReplayChannel(ctx context.Context, channel string, after int64, limit int) ([]Queued, error) {
	if channel == "" {
		return nil, fmt.Errorf("replay channel: channel is empty")
	}
	if limit <= 0 {
		return nil, fmt.Errorf("replay channel %q: limit %d, want > 0", channel, limit)
	}
	rows, err := s.pool.Query(ctx, `
WITH failed AS (
    SELECT id FROM notifications
     WHERE phase = 3 AND channel = $1 AND id > $3
     ORDER BY channel, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
)
UPDATE notifications n SET status = 'QUEUED', attempts = 0, crashes = 0, next_attempt_at = NULL, updated_at = now()
  FROM failed
 WHERE n.id = failed.id AND n.status = 'FAILED'
RETURNING n.id, n.channel`, channel, limit, after)
	if err != nil {
		return nil, fmt.Errorf("replay channel %q: %w", channel, err)
	}
	out, err := scanQueued(rows, false)
	if err != nil {
		return nil, fmt.Errorf("replay channel %q: %w", channel, err)
	}
	return out, nil
}

// PurgeFailed deletes FAILED rows and their attempt log: the given ids (of
// channel, when channel is not ""), or, when ids is empty, every FAILED row
// of channel. It returns how many notifications it deleted. Rows in any other
// state are never deleted.
func (s *Store) PurgeFailed(ctx context.Context, channel string, ids []int64) (int64, error) {
	if channel == "" && len(ids) == 0 {
		return 0, fmt.Errorf("purge failed: neither a channel nor ids given (refusing to purge every channel)")
	}
	var n int64
	err := s.pool.QueryRow(ctx, `
WITH purged AS (
    DELETE FROM notifications
     WHERE phase = 3
       AND ($1 = '' OR channel = $1)
       AND (coalesce(cardinality($2::bigint[]), 0) = 0 OR id = ANY($2::bigint[]))
    RETURNING id
),
history AS (
    DELETE FROM notification_attempts a USING purged p WHERE a.notification_id = p.id
)
SELECT count(*) FROM purged`, channel, ids).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("purge failed notifications of channel %q (%d ids): %w", channel, len(ids), err)
	}
	return n, nil
}

// Sweep reads QUEUED and PROCESSING rows last changed before olderThan, by
// id after `after`, at most limit: rows that may have fallen out of Redis and
// are pushed again (push is idempotent). With olderThan in the far future it
// lists every non-terminal queued row, the resync after Redis lost its data.
// A row changed further ahead of the database's clock than MaxClockAhead
// (an application's SQL: 'infinity', year 3000) is listed too: no instance
// wrote that, and waiting for it would leave the row in no queue for good.
// QUEUED retries come back with their NextAttemptAt. It changes nothing.
func (s *Store) Sweep(ctx context.Context, olderThan time.Time, after int64, limit int) ([]Queued, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("sweep: limit %d, want > 0", limit)
	}
	rows, err := s.pool.Query(ctx, `
SELECT id, channel, CASE WHEN status = 'QUEUED' THEN next_attempt_at END
  FROM notifications
 WHERE phase = 1 AND (updated_at < $1 OR updated_at > statement_timestamp() + $4::interval) AND id > $2
 ORDER BY id
 LIMIT $3`, olderThan, after, limit, MaxClockAhead.String())
	if err != nil {
		return nil, fmt.Errorf("sweep rows older than %s after id %d: %w", olderThan.Format(time.RFC3339), after, err)
	}
	out, err := scanQueued(rows, true)
	if err != nil {
		return nil, fmt.Errorf("sweep rows older than %s after id %d: %w", olderThan.Format(time.RFC3339), after, err)
	}
	return out, nil
}

// scanQueued reads (id, channel[, next_attempt_at]) rows.
func scanQueued(rows pgx.Rows, withNext bool) ([]Queued, error) {
	defer rows.Close()
	var out []Queued
	// The scan targets once (each escapes to Scan), and the channel interned:
	// a relay of 1,000 rows names the same channel or few.
	var (
		id       int64
		channel  pgtype.DriverBytes
		next     pgtype.Timestamptz
		channels internedStrings
	)
	dest := []any{&id, &channel, &next}
	if !withNext {
		dest = dest[:2]
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		q := Queued{ID: id, Channel: channels.get(channel)}
		if next.Valid {
			q.NextAttemptAt = next.Time
		}
		out = append(out, q)
	}
	return out, rows.Err()
}
