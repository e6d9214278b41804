package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// NextDue is when the earliest PENDING row falls due (zero when none), so the
// relay can sleep until a scheduled send instead of polling for it.
// Uses notifications_pending_due.
func (s *Store) NextDue(ctx context.Context) (time.Time, error) {
	var t pgtype.Timestamptz
	if err := s.pool.QueryRow(ctx, `SELECT min(due_at) FROM notifications WHERE phase = 0`).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("read next due time: %w", err)
	}
	if !t.Valid {
		return time.Time{}, nil
	}
	return t.Time, nil
}

// FirstDue is the id of the row Relay takes first (the oldest due PENDING
// row) leaving out the ids except, 0 when none: when a relay of one row is
// refused for its data, this is the row at fault.
func (s *Store) FirstDue(ctx context.Context, now time.Time, except []int64) (int64, error) {
	if except == nil {
		except = []int64{} // NULL would leave every row out
	}
	var id int64
	err := s.pool.QueryRow(ctx, `
SELECT coalesce((SELECT id FROM notifications WHERE phase = 0 AND due_at <= $1 AND id <> ALL($2::bigint[])
                  ORDER BY due_at, id LIMIT 1), 0)`, now, except).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("read the first due notification: %w", err)
	}
	return id, nil
}
