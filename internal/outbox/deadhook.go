package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/sdk/wire"
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
	// EndRefused is a dead_letter_events row the caller has seen refused
	// alone (RefusedAloneError) as often as it allows: refused alone
	// again, its dead letter is recorded as told without a notification
	// (DeadLettersTold.Untold) instead of failing the call.
	EndRefused int64
}

// RefusedAloneError is TellDeadLetters failing because the hook
// notification listing one dead letter, with no other dead letter taken to
// compare it with, was refused for a reason of no data class (IsRefusal: an
// operator's trigger's RAISE EXCEPTION, a row-level security policy). Alone,
// nothing tells a refusal of this dead letter from one of every hook
// notification; the transaction is rolled back, and the caller counts the
// refusals of Event in a row and names it in DeadLetterHook.EndRefused once
// they are too many, so one dead letter cannot fail its channel's hook on
// every call for good.
type RefusedAloneError struct {
	Event int64 // its dead_letter_events row
	ID    int64 // the dead notification
	Err   error // Postgres' refusal
}

func (e *RefusedAloneError) Error() string {
	return fmt.Sprintf("the hook notification listing dead letter %d alone was refused: %v", e.ID, e.Err)
}

func (e *RefusedAloneError) Unwrap() error { return e.Err }

// DeadLetter is one dead letter as a hook's payload lists it. Long text is
// cut (hookRecipientLen, hookErrorLen, hookKeyLen), so one dead letter
// encodes to a few KB at most, however its text escapes.
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
	hookKeyLen       = MaxIdempotencyKeyLen
)

// A hook notification's payload is held under MaxPayloadBytes by its size
// as encoded, not by its count: encoding/json writes '<' as \u003c (6
// bytes), and Postgres renders the stored jsonb again, with a space after
// every ':' and ',' (while it writes '<' back as 1 byte). hookPayloadSlack
// and hookItemSlack cover those spaces (at most 11 per dead letter, 7 for
// the envelope), so payload::text stays under the bound as well.
const (
	hookPayloadSlack = 64
	hookItemSlack    = 16
)

// DeadLettersTold is what one TellDeadLetters call did.
type DeadLettersTold struct {
	Told          int     // dead letters listed in hook notifications
	Notifications []int64 // the hook notifications written, oldest dead letters first
	// Untold are dead letters a hook notification could not be written for
	// even listing them alone (outbox.IsRowError), or that could not be
	// encoded: they are recorded as told all the same, so they never hold
	// back the channel's later dead letters. The caller logs them.
	Untold []UntoldDeadLetter
	// More says dead letters may still be waiting: call again.
	More bool
}

// UntoldDeadLetter is a dead letter no hook notification could carry.
type UntoldDeadLetter struct {
	ID     int64  // the dead notification
	Reason string // why the hook notification listing it could not be written
}

// hookItem is one dead letter taken, with its encoding.
type hookItem struct {
	event int64 // its dead_letter_events row
	d     DeadLetter
	enc   []byte
}

// TellDeadLetters takes up to h.Batch of the channel's dead-letter events,
// oldest first, and in the same transaction inserts PENDING notifications
// listing them on the hook channel and deletes them: each dead letter is
// told once, and from there delivered like any notification (at least
// once, retried, dead-lettered in turn on the hook channel, which has no
// hook). Several instances may call it at once: SKIP LOCKED gives each its
// own events.
//
// One notification lists as many of the oldest events as fit under
// MaxPayloadBytes encoded (the rest stay for the next call, DeadLettersTold.More).
// A notification Postgres refuses for its data (IsRowError) is split in
// halves, each its own notification, until the dead letter at fault stands
// alone; that one is recorded as told without a notification (Untold), so
// nothing is retried forever (docs/design.md §5). Each notification's
// idempotency key names its first event, so it is unique.
func (s *Store) TellDeadLetters(ctx context.Context, h DeadLetterHook) (DeadLettersTold, error) {
	var res DeadLettersTold
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = DeadLettersTold{}
		rows, err := tx.Query(ctx, `
			WITH taken AS (
				SELECT id, notification_id, created_at FROM dead_letter_events
				 WHERE channel = $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
			SELECT t.id, t.notification_id, coalesce(n.recipient, ''), coalesce(n.idempotency_key, ''),
			       coalesce(n.attempts, 0), coalesce(n.last_error, ''), `+readTime("coalesce(n.updated_at, t.created_at)")+`, coalesce(n.status = 'FAILED', false)
			FROM taken t LEFT JOIN notifications n ON n.id = t.notification_id
			ORDER BY t.id`, h.Channel, h.Batch)
		if err != nil {
			return err
		}
		var (
			items []hookItem
			done  []int64 // events to delete: told, untold, or no dead letter any more
			taken int
			seen  = map[int64]bool{}
		)
		for rows.Next() {
			var (
				it   hookItem
				dead bool
			)
			if err := rows.Scan(&it.event, &it.d.ID, &it.d.Recipient, &it.d.IdempotencyKey, &it.d.Attempts, &it.d.Error, &it.d.FailedAt, &dead); err != nil {
				rows.Close()
				return err
			}
			taken++
			// Purged, or replayed (and maybe SENT) before it was told: nothing
			// to tell; if it fails again, that failure's own event tells it.
			// Replayed and FAILED again: its events are one dead letter, told
			// once with its latest failure.
			if !dead || seen[it.d.ID] {
				done = append(done, it.event)
				continue
			}
			seen[it.d.ID] = true
			it.d.Recipient = wire.Truncate(it.d.Recipient, hookRecipientLen)
			it.d.IdempotencyKey = wire.Truncate(it.d.IdempotencyKey, hookKeyLen)
			it.d.Error = wire.Truncate(it.d.Error, hookErrorLen)
			if it.enc, err = json.Marshal(it.d); err != nil {
				// Cannot happen for text and a clamped time; were it to,
				// failing would fail every call on this dead letter, the
				// channel's oldest, and no later one would ever be told.
				res.Untold = append(res.Untold, UntoldDeadLetter{ID: it.d.ID, Reason: wire.Truncate("cannot be encoded: "+err.Error(), MaxErrorLen)})
				done = append(done, it.event)
				continue
			}
			items = append(items, it)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		fit := fitDeadLetters(h.Channel, items)
		res.More = taken == h.Batch || fit < len(items)
		if err := s.tellSplit(ctx, tx, h, items[:fit], &res); err != nil {
			return err
		}
		for _, it := range items[:fit] {
			done = append(done, it.event)
		}
		if len(done) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `DELETE FROM dead_letter_events WHERE id = ANY($1)`, done)
		return err
	})
	if err != nil {
		return DeadLettersTold{}, fmt.Errorf("tell dead letters of %s to %s: %w", h.Channel, h.Hook, err)
	}
	return res, nil
}

// fitDeadLetters is how many of items, from the first, one payload holds
// under MaxPayloadBytes (with room for Postgres's rendering); at least one.
func fitDeadLetters(channel string, items []hookItem) int {
	size := len(hookPayload(channel, len(items), nil)) + hookPayloadSlack
	for i, it := range items {
		size += len(it.enc) + 1 + hookItemSlack // the ',' before it
		if size > MaxPayloadBytes && i > 0 {
			return i
		}
	}
	return len(items)
}

// hookPayload encodes the batch of items with count, exactly as
// json.Marshal encodes a DeadLetterBatch, from the dead letters' own
// encodings (with no items: the envelope alone, to measure it).
func hookPayload(channel string, count int, items []hookItem) []byte {
	head, _ := json.Marshal(DeadLetterBatch{Type: "notifyd.dead_letters", Channel: channel, Count: count, DeadLetters: []DeadLetter{}})
	head = head[:len(head)-2] // `]}`
	for i, it := range items {
		if i > 0 {
			head = append(head, ',')
		}
		head = append(head, it.enc...)
	}
	return append(head, "]}"...)
}

// tellSplit inserts one hook notification listing items, in a savepoint. If
// Postgres refuses it for its data, each half is told on its own, down to a
// single dead letter, which is then recorded in res.Untold. A refusal of no
// data class (IsRefusal: an operator's trigger's RAISE EXCEPTION) is a dead
// letter's too once an item is told alone (isolating; ProbeOrder picks which
// are tried); when none is, it is the statement's and is returned (the transaction rolls
// back, and every event is taken again by a later call). One dead letter
// refused so with no other to compare is a RefusedAloneError, unless it is
// h.EndRefused: that one is recorded in res.Untold.
func (s *Store) tellSplit(ctx context.Context, tx pgx.Tx, h DeadLetterHook, items []hookItem, res *DeadLettersTold) error {
	return s.tellRows(ctx, tx, h, items, res, false)
}

func (s *Store) tellRows(ctx context.Context, tx pgx.Tx, h DeadLetterHook, items []hookItem, res *DeadLettersTold, isolating bool) error {
	if len(items) == 0 {
		return nil
	}
	err := s.tellOnce(ctx, tx, h, items, res)
	switch {
	case err == nil:
		return nil
	case IsRowError(err), isolating && IsRefusal(err):
	case IsRefusal(err) && len(items) > 1:
		for _, k := range ProbeOrder(len(items)) {
			if s.tellOnce(ctx, tx, h, items[k:k+1], res) != nil {
				continue
			}
			if err := s.tellRows(ctx, tx, h, items[:k], res, true); err != nil {
				return err
			}
			return s.tellRows(ctx, tx, h, items[k+1:], res, true)
		}
		return err
	case IsRefusal(err) && len(items) == 1:
		if items[0].event != h.EndRefused {
			return &RefusedAloneError{Event: items[0].event, ID: items[0].d.ID, Err: err}
		}
	default:
		return err
	}
	if len(items) == 1 {
		res.Untold = append(res.Untold, UntoldDeadLetter{ID: items[0].d.ID, Reason: wire.Truncate(err.Error(), MaxErrorLen)})
		return nil
	}
	half := len(items) / 2
	if err := s.tellRows(ctx, tx, h, items[:half], res, isolating); err != nil {
		return err
	}
	return s.tellRows(ctx, tx, h, items[half:], res, isolating)
}

// tellOnce inserts one hook notification listing items, in a savepoint, and
// counts them told.
func (s *Store) tellOnce(ctx context.Context, tx pgx.Tx, h DeadLetterHook, items []hookItem, res *DeadLettersTold) error {
	row := NewNotification{
		Channel: h.Hook, Recipient: h.Recipient, Payload: hookPayload(h.Channel, len(items), items),
		IdempotencyKey: fmt.Sprintf("dead-letters:%s:%d", h.Channel, items[0].event),
	}
	if err := Validate([]NewNotification{row}); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err) // no retry makes it valid
	}
	err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
		ins, err := Insert(ctx, sp, []NewNotification{row})
		if err == nil {
			res.Notifications = append(res.Notifications, ins[0].ID)
		}
		return err
	})
	if err == nil {
		res.Told += len(items)
	}
	return err
}
