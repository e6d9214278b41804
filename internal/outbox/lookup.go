package outbox

import (
	"context"
	"fmt"
	"math"
)

// listByRecipient is three branches, each matching one partial index (each
// repeats the index's phase predicate, migration 00014), merged newest first:
// settled rows through notifications_recipient_bounded; PENDING rows through
// notifications_pending_due and QUEUED or PROCESSING rows through
// notifications_inflight_id, filtered by recipient.
// The last two cost a visit per in-flight row: cheap unless a backlog of
// millions is waiting, which is the price of not indexing every transition.
func listByRecipient(cols string) string {
	return `
(SELECT ` + cols + ` FROM notifications
  WHERE phase >= 2 AND octet_length(recipient) <= 1024
    AND recipient COLLATE "C" = $1 AND id < $2
  ORDER BY id DESC LIMIT $3)
UNION ALL
(SELECT ` + cols + ` FROM notifications
  WHERE phase = 0 AND recipient = $1 AND id < $2
  ORDER BY id DESC LIMIT $3)
UNION ALL
(SELECT ` + cols + ` FROM notifications
  WHERE phase = 1 AND recipient = $1 AND id < $2
  ORDER BY id DESC LIMIT $3)
ORDER BY id DESC LIMIT $3`
}

// ListByRecipient pages through recipient's notifications on every channel,
// newest first: rows with id < before (0 = from the newest), at most limit
// and, past the first, at most MaxPageBytes (cut then says the page stopped
// short of limit for its size: there may be more). Pass the last id of a
// page as before to get the next one. The attempt logs are not read (Get
// has them).
func (s *Store) ListByRecipient(ctx context.Context, recipient string, before int64, limit int) (ns []Notification, cut bool, _ error) {
	if recipient == "" {
		return nil, false, fmt.Errorf("list by recipient: recipient is empty")
	}
	if len(recipient) > MaxRecipientLen {
		return nil, false, fmt.Errorf("list by recipient: recipient is %d bytes long, at most %d", len(recipient), MaxRecipientLen)
	}
	if limit <= 0 {
		return nil, false, fmt.Errorf("list by recipient %q: limit %d, want > 0", recipient, limit)
	}
	if before <= 0 {
		before = math.MaxInt64
	}
	ns, cut, err := s.readRows(ctx, listByRecipient, recipient, before, limit)
	if err != nil {
		return nil, false, fmt.Errorf("list by recipient %q before id %d: %w", recipient, before, err)
	}
	return ns, cut, nil
}
