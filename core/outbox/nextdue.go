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
	if err := s.pool.QueryRow(ctx, `SELECT min(due_at) FROM notifications WHERE status = 'PENDING'`).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("read next due time: %w", err)
	}
	if !t.Valid {
		return time.Time{}, nil
	}
	return t.Time, nil
}
