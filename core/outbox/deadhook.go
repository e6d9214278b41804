package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Dead-letter hooks (migration 9): triggers write a dead_letter_events row
// for each notification that becomes FAILED on a channel listed in
// dead_letter_hooks; TellDeadLetters turns them into notifications on the
// hook channel.

// SyncDeadLetterHooks makes hooked the channels whose dead letters are told
// (every instance calls it at start with its config's list). Events of a
// channel no longer hooked are dropped: nobody is to be told of them.
func (s *Store) SyncDeadLetterHooks(ctx context.Context, hooked []string) error {
	if hooked == nil {
		hooked = []string{}
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO dead_letter_hooks (channel) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`, hooked); err != nil {
			return fmt.Errorf("sync dead-letter hooks: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM dead_letter_hooks WHERE channel <> ALL($1::text[])`, hooked); err != nil {
			return fmt.Errorf("sync dead-letter hooks: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM dead_letter_events WHERE channel <> ALL($1::text[])`, hooked); err != nil {
			return fmt.Errorf("sync dead-letter hooks: %w", err)
		}
		return nil
	})
}

// DeadLetterHook is where one channel's dead letters are told.
type DeadLetterHook struct {
	Channel   string // the dead letters' channel
	Hook      string // the channel told
	Recipient string // who on Hook
	Batch     int    // dead letters per notification, at most
}

// DeadLetter is one dead letter as a hook's payload lists it. Long text is
// cut (hookErrorLen, hookRecipientLen) so a full batch stays far below the
// payload bound.
type DeadLetter struct {
	ID             int64     `json:"id"`
	Recipient      string    `json:"recipient"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	Attempts       int       `json:"attempts"`
	Error          string    `json:"error"`
	FailedAt       time.Time `json:"failed_at"`
}

// DeadLetterBatch is the payload of a hook's notification.
type DeadLetterBatch struct {
	Type        string       `json:"type"` // "notifyd.dead_letters"
	Channel     string       `json:"channel"`
	Count       int          `json:"count"`
	DeadLetters []DeadLetter `json:"dead_letters"`
}

const (
	hookErrorLen     = 512
	hookRecipientLen = 256
)

// TellDeadLetters takes up to h.Batch of the channel's dead-letter events,
// oldest first, and in the same transaction inserts one PENDING notification
// listing them on the hook channel and deletes them: each dead letter is
// told once, and from there delivered like any notification (at least
// once, retried, dead-lettered in turn on the hook channel, which has no
// hook). Several instances may call it at once: SKIP LOCKED gives each its
// own events. The notification's idempotency key names the batch's first
// event, so it is unique. It returns how many dead letters it told (0: none
// waiting) and the notification's id.
func (s *Store) TellDeadLetters(ctx context.Context, h DeadLetterHook) (told int, id int64, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			WITH taken AS (
				DELETE FROM dead_letter_events WHERE id IN (
					SELECT id FROM dead_letter_events WHERE channel = $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
				RETURNING id, notification_id, created_at)
			SELECT t.id, t.notification_id, coalesce(n.recipient, ''), coalesce(n.idempotency_key, ''),
			       coalesce(n.attempts, 0), coalesce(n.last_error, ''), coalesce(n.updated_at, t.created_at), n.id IS NOT NULL
			FROM taken t LEFT JOIN notifications n ON n.id = t.notification_id
			ORDER BY t.id`, h.Channel, h.Batch)
		if err != nil {
			return err
		}
		var (
			batch = DeadLetterBatch{Type: "notifyd.dead_letters", Channel: h.Channel}
			first int64
		)
		for rows.Next() {
			var (
				ev     int64
				d      DeadLetter
				exists bool
			)
			if err := rows.Scan(&ev, &d.ID, &d.Recipient, &d.IdempotencyKey, &d.Attempts, &d.Error, &d.FailedAt, &exists); err != nil {
				rows.Close()
				return err
			}
			if first == 0 {
				first = ev
			}
			if !exists { // purged before it was told: nothing to tell
				continue
			}
			d.Recipient, d.Error = Truncate(d.Recipient, hookRecipientLen), Truncate(d.Error, hookErrorLen)
			batch.DeadLetters = append(batch.DeadLetters, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(batch.DeadLetters) == 0 {
			return nil // nothing, or only purged ones: the events are gone either way
		}
		batch.Count = len(batch.DeadLetters)
		payload, err := json.Marshal(batch)
		if err != nil {
			return err
		}
		ins, err := Insert(ctx, tx, []NewNotification{{
			Channel: h.Hook, Recipient: h.Recipient, Payload: payload,
			IdempotencyKey: fmt.Sprintf("dead-letters:%s:%d", h.Channel, first),
		}})
		if err != nil {
			return err
		}
		told, id = batch.Count, ins[0].ID
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("tell dead letters of %s to %s: %w", h.Channel, h.Hook, err)
	}
	return told, id, nil
}
