package outbox

import (
	"context"
	"fmt"
	"math"
)

// ListByRecipient pages through recipient's notifications on every channel,
// newest first: rows with id < before (0 = from the newest), at most limit.
// Pass the last id of a page as before to get the next one. It reads the
// notifications_recipient index (migration 00003); the attempt logs are not
// read (Get has them).
func (s *Store) ListByRecipient(ctx context.Context, recipient string, before int64, limit int) ([]Notification, error) {
	if recipient == "" {
		return nil, fmt.Errorf("list by recipient: recipient is empty")
	}
	if limit <= 0 {
		return nil, fmt.Errorf("list by recipient %q: limit %d, want > 0", recipient, limit)
	}
	if before <= 0 {
		before = math.MaxInt64
	}
	// COLLATE "C" matches the index's collation; equality is the same.
	rows, err := s.pool.Query(ctx, `SELECT `+notificationColumns+` FROM notifications
 WHERE recipient COLLATE "C" = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, recipient, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list by recipient %q before id %d: %w", recipient, before, err)
	}
	ns, err := scanNotifications(rows)
	if err != nil {
		return nil, fmt.Errorf("list by recipient %q before id %d: %w", recipient, before, err)
	}
	return ns, nil
}
