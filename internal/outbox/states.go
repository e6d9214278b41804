package outbox

import (
	"context"
	"fmt"
)

// State is where one notification is, as Statuses reports it.
type State struct {
	Channel string
	Status  string
}

// Statuses returns the channel and status of each of ids that exists; an id
// missing from the map does not exist. It only reads: the admin API checks a
// whole request (replay, purge) with it before changing anything, so a
// request naming one wrong id changes nothing.
func (s *Store) Statuses(ctx context.Context, ids []int64) (map[int64]State, error) {
	out := make(map[int64]State, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, channel, status FROM notifications WHERE id = ANY($1::bigint[])`, ids)
	if err != nil {
		return nil, fmt.Errorf("read status of %d notifications: %w", len(ids), err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var st State
		if err := rows.Scan(&id, &st.Channel, &st.Status); err != nil {
			return nil, fmt.Errorf("read status of %d notifications: %w", len(ids), err)
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read status of %d notifications: %w", len(ids), err)
	}
	return out, nil
}
