package outbox

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Summary is what a list of notifications shows of one without opening it
// (the dashboard's dead letters): no payload, no result, no attempt log,
// and its error cut in Postgres. A page of them holds at most its row count
// times SummaryBytes, however large the rows' bodies are.
type Summary struct {
	ID        int64
	Channel   string
	Recipient string
	Status    string
	Attempts  int
	CreatedAt time.Time
	UpdatedAt time.Time
	SentAt    time.Time // zero = not sent
	// LastError is the first SummaryErrorChars characters of last_error;
	// LastErrorCut says it was longer.
	LastError    string
	LastErrorCut bool
}

// SummaryErrorChars is how much of last_error a Summary reads: a list shows
// a line of it (the whole error is on the notification's own page).
const SummaryErrorChars = 1024

// SummaryBytes bounds one Summary as read: its channel, recipient and cut
// error as the database's CHECKs hold them (1,024 characters of an error
// of at most MaxErrorLen bytes are at most MaxErrorLen bytes), and 200
// bytes for the rest.
const SummaryBytes = MaxChannelLen + MaxRecipientLen + MaxErrorLen + 200

// MaxSummaryPage bounds the rows one ListFailedSummaries reads.
const MaxSummaryPage = 1000

// summaryColumns are a Summary's columns. Each text is cut in SQL too, in
// characters, past the CHECK that bounds its bytes (migration 00015): a
// reader of a list never depends on a table's constraint alone.
var summaryColumns = `id, left(channel, ` + strconv.Itoa(MaxChannelLen) + `), left(recipient, ` + strconv.Itoa(MaxRecipientLen) + `),
       status, attempts, ` + readTime("created_at") + `, ` + readTime("updated_at") + `, ` + readTime("sent_at") + `,
       left(coalesce(last_error, ''), ` + strconv.Itoa(SummaryErrorChars) + `),
       coalesce(char_length(last_error), 0) > ` + strconv.Itoa(SummaryErrorChars)

// ListFailedSummaries pages through the dead-letter queue as ListFailed
// does — FAILED rows of channel ("" = every channel) with id > after,
// lowest id first, at most limit (1 to MaxSummaryPage) — reading each row's
// Summary only: neither payload nor result is read, printed or sent by
// Postgres.
func (s *Store) ListFailedSummaries(ctx context.Context, channel string, after int64, limit int) ([]Summary, error) {
	if limit <= 0 || limit > MaxSummaryPage {
		return nil, fmt.Errorf("list failed summaries of channel %q: limit %d, want 1 to %d", channel, limit, MaxSummaryPage)
	}
	// As ListFailed: two statements, each with its own index.
	sql := `SELECT ` + summaryColumns + ` FROM notifications
 WHERE phase = 3 AND channel = $1 AND id > $2 ORDER BY channel, id LIMIT $3`
	args := []any{channel, after, limit}
	if channel == "" {
		sql = `SELECT ` + summaryColumns + ` FROM notifications
 WHERE phase = 3 AND id > $1 ORDER BY id LIMIT $2`
		args = []any{after, limit}
	}
	out, err := s.summaries(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list failed summaries of channel %q after id %d: %w", channel, after, err)
	}
	return out, nil
}

// ListSummariesByRecipient pages through recipient's notifications on every
// channel as ListByRecipient does — newest first, ids below before (0: from
// the newest), at most limit (1 to MaxSummaryPage) — reading each row's
// Summary only.
func (s *Store) ListSummariesByRecipient(ctx context.Context, recipient string, before int64, limit int) ([]Summary, error) {
	if recipient == "" {
		return nil, fmt.Errorf("list summaries by recipient: recipient is empty")
	}
	if len(recipient) > MaxRecipientLen {
		return nil, fmt.Errorf("list summaries by recipient: recipient is %d bytes long, at most %d", len(recipient), MaxRecipientLen)
	}
	if limit <= 0 || limit > MaxSummaryPage {
		return nil, fmt.Errorf("list summaries by recipient %q: limit %d, want 1 to %d", recipient, limit, MaxSummaryPage)
	}
	if before <= 0 {
		before = math.MaxInt64
	}
	out, err := s.summaries(ctx, listByRecipient(summaryColumns), recipient, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list summaries by recipient %q before id %d: %w", recipient, before, err)
	}
	return out, nil
}

func (s *Store) summaries(ctx context.Context, sql string, args ...any) ([]Summary, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Summary, error) {
		var (
			m    Summary
			sent *time.Time
		)
		err := r.Scan(&m.ID, &m.Channel, &m.Recipient, &m.Status, &m.Attempts, &m.CreatedAt, &m.UpdatedAt, &sent,
			&m.LastError, &m.LastErrorCut)
		if sent != nil {
			m.SentAt = *sent
		}
		return m, err
	})
}

// SummaryOf reads notification id's Summary, or ErrNotFound: what a look-up
// that only needs to know the row (and where it is) reads, instead of Get's
// whole row and attempt log.
func (s *Store) SummaryOf(ctx context.Context, id int64) (Summary, error) {
	out, err := s.summaries(ctx, `SELECT `+summaryColumns+` FROM notifications WHERE id = $1`, id)
	if err != nil {
		return Summary{}, fmt.Errorf("summary of notification %d: %w", id, err)
	}
	if len(out) == 0 {
		return Summary{}, ErrNotFound
	}
	return out[0], nil
}

// SummaryByKey reads the Summary of the notification holding idempotency
// key, or ErrNotFound.
func (s *Store) SummaryByKey(ctx context.Context, key string) (Summary, error) {
	if key == "" {
		return Summary{}, fmt.Errorf("summary by idempotency key: key is empty")
	}
	out, err := s.summaries(ctx, `SELECT `+summaryColumns+` FROM notifications WHERE idempotency_key = $1`, key)
	if err != nil {
		return Summary{}, fmt.Errorf("summary by idempotency key: %w", err)
	}
	if len(out) == 0 {
		return Summary{}, ErrNotFound
	}
	return out[0], nil
}
