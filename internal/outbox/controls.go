package outbox

import (
	"context"
	"fmt"
)

// SetPaused pauses or resumes a channel for every instance: a paused channel
// fetches nothing, and its messages wait in the queue.
func (s *Store) SetPaused(ctx context.Context, channel string, paused bool, reason string) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO channel_controls (channel, paused, reason, updated_at) VALUES ($1, $2, NULLIF($3, ''), now())
		ON CONFLICT (channel) DO UPDATE SET paused = $2, reason = NULLIF($3, ''), updated_at = now()`,
		channel, paused, reason)
	if err != nil {
		return fmt.Errorf("set channel %s paused=%v: %w", channel, paused, err)
	}
	return nil
}

// PausedChannels returns which of channels are paused, with the reason
// given: the rows of channels an instance does not run (configured once,
// or elsewhere) are not read, every second, by every instance.
func (s *Store) PausedChannels(ctx context.Context, channels []string) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT channel, coalesce(reason, '') FROM channel_controls
		WHERE paused AND channel = ANY($1)`, channels)
	if err != nil {
		return nil, fmt.Errorf("read paused channels: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var ch, reason string
		if err := rows.Scan(&ch, &reason); err != nil {
			return nil, fmt.Errorf("read paused channels: %w", err)
		}
		out[ch] = reason
	}
	return out, rows.Err()
}
