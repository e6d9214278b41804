package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Notification is one outbox row, with its attempt log when read by Get.
type Notification struct {
	ID             int64
	Channel        string
	Recipient      string
	Payload        json.RawMessage
	IdempotencyKey string // "" = none
	Status         string
	AttemptCount   int       // the attempts column: claims so far (reset by replay)
	DueAt          time.Time //
	NextAttemptAt  time.Time // zero = none
	LastError      string
	Result         json.RawMessage // nil = none
	JobID          int64           // 0 = none
	CreatedAt      time.Time
	UpdatedAt      time.Time
	SentAt         time.Time // zero = not sent

	// Attempts is the attempt log, oldest first (Get and
	// GetByIdempotencyKey only; nil from ListFailed): its latest MaxHistory
	// attempts, AttemptsCut saying older ones were left out.
	Attempts    []Attempt
	AttemptsCut bool
	// Receipt is the provider's later report, nil when none (Get and
	// GetByIdempotencyKey only).
	Receipt *Receipt
}

// Attempt is one settled attempt from the attempt log.
type Attempt struct {
	Attempt        int // attempt number; numbering restarts after a replay
	StartedAt      time.Time
	FinishedAt     time.Time
	Outcome        string // SUCCESS | TRANSIENT | PERMANENT | UNKNOWN (lost with its instance)
	ProviderStatus int    // 0 = none
	ProviderCode   string
	Error          string
}

// Duration is how long the attempt took.
func (a Attempt) Duration() time.Duration { return a.FinishedAt.Sub(a.StartedAt) }

// The payload and result are read back only within their bounds, measured in
// Postgres, each walked and printed once (its subqueries kept apart by OFFSET
// 0: a plain one is flattened into every place that reads its column, which
// printed the payload three times and walked it five): jsonb keeps 1e100000 in a
// few bytes and prints 100,001 digits, so a row written past the enqueue
// checks could otherwise make one GET megabytes (docs/design.md §10). Past
// the bound the column reads as a note of its size. The times are read
// clamped (readTime).
var notificationColumns = columnsWith(boundedPayload, boundedResult)

// bodilessColumns are notificationColumns with the payload and result left
// unread (NULL): what a read falls back to when one row's data failed the
// whole statement (readRows).
var bodilessColumns = columnsWith(`NULL::text`, `NULL::text`)

func columnsWith(payload, result string) string {
	return `id, channel, recipient, ` + payload + `, idempotency_key, status, attempts, ` + readTime("due_at") + `,
       ` + readTime("next_attempt_at") + `, last_error, ` + result + `, job_id, ` + readTime("created_at") + `,
       ` + readTime("updated_at") + `, ` + readTime("sent_at")
}

// readTime reads the timestamptz expression col clamped to the years 1 to
// 9999, NULL staying NULL. An application's SQL may write any timestamptz:
// 'infinity' and '-infinity', which pgx cannot scan into a time.Time (the
// whole read failed — a DLQ page, a lookup by recipient — for the row's
// neighbours too), and years up to 294276, which encoding/json cannot print
// (time.MarshalJSON: years 0 to 9999; the API's answer failed). The upper
// end is a day short of year 10000 so that no time zone's offset carries
// it past.
func readTime(col string) string {
	return `(CASE WHEN ` + col + ` < ` + minReadTime + ` THEN ` + minReadTime +
		` WHEN ` + col + ` > ` + maxReadTime + ` THEN ` + maxReadTime + ` ELSE ` + col + ` END)`
}

const (
	minReadTime = `'0001-01-01 00:00:00+00'::timestamptz`
	maxReadTime = `'9999-12-31 00:00:00+00'::timestamptz`
)

// boundedPayload is the payload as text within MaxPayloadBytes, else a note.
var boundedPayload = BoundedJSON("payload", "the payload", MaxPayloadBytes,
	func(reason string) string { return `json_build_object('notifyd_omitted', ` + reason + `)::text` })

// BoundedJSON is SQL that reads the jsonb column col as text only within
// limit bytes, measured in Postgres: a value with a number that would print
// past wire.MaxNumberChars (expandingNumber) is not printed at all, and one
// past the bound reads as note(reason), reason an SQL text naming what (the
// payload, the payload template) and why. A scalar subquery, so that it
// works in a RETURNING list too; its inner queries are fenced with OFFSET 0
// so the value is walked and printed once. The outbox's payloads and the
// scheduler's job templates read through it.
func BoundedJSON(col, what string, limit int, note func(reason string) string) string {
	n := strconv.Itoa(limit)
	return `(SELECT CASE WHEN x.big THEN ` + note(`'`+what+` has a number that reads back past 100 characters'`) + `
	        WHEN x.t IS NULL OR octet_length(x.t) <= ` + n + ` THEN x.t
	        ELSE ` + note(`format('`+what+` reads back as %s bytes, over the `+n+`-byte bound', octet_length(x.t))`) + ` END
	   FROM (SELECT b.big, CASE WHEN NOT b.big THEN ` + col + `::text END AS t
	           FROM (SELECT coalesce(jsonb_path_exists(` + col + `, '` + expandingNumber + `'), false) AS big OFFSET 0) b
	         OFFSET 0) x)`
}

// boundedResult is the result as text within MaxResultBytes, else a note:
// read as the payload is, walked for a number that would print past 100
// characters before it is printed. A provider's result is checked as it is
// stored (cleanOutput), but the column is any jsonb an application's SQL
// (or a restore) wrote: 12,000 × 1e100000, a few KB stored, printed past
// 1 GB on every read of the row before its size could be measured.
var boundedResult = BoundedJSON("result", "the result", MaxResultBytes,
	func(reason string) string { return `json_build_object('notifyd_omitted', ` + reason + `)::text` })

// Get returns notification id with its attempt log, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (*Notification, error) {
	n, err := s.getOne(ctx, `FROM notifications WHERE id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("get notification %d: %w", id, err)
	}
	return n, nil
}

// GetByIdempotencyKey returns the notification holding key with its attempt
// log, or ErrNotFound.
func (s *Store) GetByIdempotencyKey(ctx context.Context, key string) (*Notification, error) {
	if key == "" {
		return nil, fmt.Errorf("get notification by idempotency key: key is empty")
	}
	n, err := s.getOne(ctx, `FROM notifications WHERE idempotency_key = $1`, key)
	if err != nil {
		return nil, fmt.Errorf("get notification by idempotency key %q: %w", key, err)
	}
	return n, nil
}

// getOne reads the notification `SELECT notificationColumns <from>` finds.
func (s *Store) getOne(ctx context.Context, from string, arg any) (*Notification, error) {
	ns, _, err := s.readRows(ctx, func(cols string) string { return `SELECT ` + cols + ` ` + from }, arg)
	if err != nil {
		return nil, err
	}
	if len(ns) == 0 {
		return nil, ErrNotFound
	}
	n := &ns[0]
	if n.Attempts, n.AttemptsCut, err = s.attempts(ctx, n.ID); err != nil {
		return nil, err
	}
	if n.Receipt, err = s.receipt(ctx, n.ID); err != nil {
		return nil, err
	}
	return n, nil
}

// MaxHistory bounds the attempt log a Get reads: the latest MaxHistory
// attempts. A notification's log has no bound of its own (every DLQ replay
// adds up to retry.max_attempts rows), and each GET of it reads it.
const MaxHistory = 1000

// attempts reads the latest MaxHistory attempts of id, oldest first, and
// whether older ones were left out.
func (s *Store) attempts(ctx context.Context, id int64) ([]Attempt, bool, error) {
	// The times are clamped (readTime) outside the subquery, which keeps
	// ordering by the columns themselves.
	rows, err := s.pool.Query(ctx, `
SELECT attempt, `+readTime("started_at")+`, `+readTime("finished_at")+`, outcome, provider_status, provider_code, error FROM (
    SELECT attempt, started_at, finished_at, outcome, coalesce(provider_status, 0) AS provider_status,
           coalesce(provider_code, '') AS provider_code, coalesce(error, '') AS error
      FROM notification_attempts WHERE notification_id = $1
     ORDER BY started_at DESC, finished_at DESC, attempt DESC LIMIT `+strconv.Itoa(MaxHistory+1)+`) latest
 ORDER BY latest.started_at, latest.finished_at, latest.attempt`, id)
	if err != nil {
		return nil, false, fmt.Errorf("attempt log: %w", err)
	}
	as, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Attempt, error) {
		var a Attempt
		err := r.Scan(&a.Attempt, &a.StartedAt, &a.FinishedAt, &a.Outcome, &a.ProviderStatus, &a.ProviderCode, &a.Error)
		return a, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("attempt log: %w", err)
	}
	if len(as) > MaxHistory {
		return as[len(as)-MaxHistory:], true, nil
	}
	return as, false, nil
}

// MaxPageBytes bounds what one page of ListFailed or ListByRecipient holds: its rows' payloads,
// results and text. Each row is bounded (a payload reads back within 1 MiB,
// a result within 4 MiB), but a page of 1,000 such rows would be 5 GiB; a
// page stops at the row that passes this, and says so (cut).
const MaxPageBytes = 16 << 20

// ListFailed pages through the dead-letter queue: FAILED rows of channel
// ("" = every channel) with id > after, lowest id first, at most limit rows
// and, past the first, at most MaxPageBytes (cut then says the page stopped
// short of limit for its size: there may be more). Pass the last id of a
// page as after to get the next one; there is no cap on how far it pages.
func (s *Store) ListFailed(ctx context.Context, channel string, after int64, limit int) (ns []Notification, cut bool, _ error) {
	if limit <= 0 {
		return nil, false, fmt.Errorf("list failed of channel %q: limit %d, want > 0", channel, limit)
	}
	// Two statements rather than ($1 = '' OR channel = $1), so each plan has
	// its own index: notifications_failed_channel or notifications_failed_id.
	sql := func(cols string) string {
		return `SELECT ` + cols + ` FROM notifications
 WHERE phase = 3 AND channel = $1 AND id > $2 ORDER BY channel, id LIMIT $3`
	}
	args := []any{channel, after, limit}
	if channel == "" {
		sql = func(cols string) string {
			return `SELECT ` + cols + ` FROM notifications
 WHERE phase = 3 AND id > $1 ORDER BY id LIMIT $2`
		}
		args = []any{after, limit}
	}
	ns, cut, err := s.readRows(ctx, sql, args...)
	if err != nil {
		return nil, false, fmt.Errorf("list failed of channel %q after id %d: %w", channel, after, err)
	}
	return ns, cut, nil
}

// readRows reads the notifications query(notificationColumns) selects, as
// readPage does. When Postgres refuses the statement for one row's data
// (IsRowError: a payload nested deeper than the read-back bound's jsonpath
// walk can recurse within max_stack_depth, 54001, which jsonb stores all the
// same), that row must not hide the others: the rows are read again with
// their payloads and results left out (query(bodilessColumns)), then each
// one's alone (readBodies), a body that fails alone reading as a note that
// says why. The fallback costs nothing until a statement fails.
func (s *Store) readRows(ctx context.Context, query func(cols string) string, args ...any) (ns []Notification, cut bool, err error) {
	ns, cut, err = s.readPage(ctx, query(notificationColumns), args...)
	if err == nil || !IsRowError(err) {
		return ns, cut, err
	}
	if ns, cut, err = s.readPage(ctx, query(bodilessColumns), args...); err != nil {
		return nil, false, err
	}
	size := 0
	for i := range ns {
		if size >= MaxPageBytes {
			return ns[:i], true, nil
		}
		if err := s.readBodies(ctx, &ns[i]); err != nil {
			return nil, false, err
		}
		size += ns[i].size()
	}
	return ns, cut, nil
}

// readBodies reads n's payload and result, each within its bound and in a
// statement of its own; one that Postgres refuses to read back (IsRowError)
// reads as a note naming the refusal.
func (s *Store) readBodies(ctx context.Context, n *Notification) error {
	for _, b := range []struct {
		what, col string
		into      *json.RawMessage
	}{{"the payload", boundedPayload, &n.Payload}, {"the result", boundedResult, &n.Result}} {
		var text []byte
		err := s.pool.QueryRow(ctx, `SELECT `+b.col+` FROM notifications WHERE id = $1`, n.ID).Scan(&text)
		switch {
		case errors.Is(err, pgx.ErrNoRows): // gone since (a purge, retention): the page keeps what it read
		case IsRowError(err):
			var pg *pgconn.PgError
			msg := err.Error()
			if errors.As(err, &pg) {
				msg = pg.Message + " (SQLSTATE " + pg.Code + ")"
			}
			*b.into, _ = json.Marshal(map[string]string{"notifyd_omitted": b.what + " cannot be read back: Postgres refused it: " + msg})
		case err != nil:
			return fmt.Errorf("read %s of notification %d: %w", b.what, n.ID, err)
		case text != nil:
			*b.into = text
		}
	}
	return nil
}

// readPage reads the notifications sql selects (notificationColumns), at
// most MaxPageBytes past the first row: cut says it stopped at that bound
// rather than at the end of the query's rows. A page cut short stops the
// query rather than Close draining the rest of it off the wire (up to
// limit rows of 5 MiB: 1.2 s for 300 MB measured); pgx cancels it and
// drops the connection.
func (s *Store) readPage(ctx context.Context, sql string, args ...any) (ns []Notification, cut bool, _ error) {
	qctx, stop := context.WithCancel(ctx)
	defer stop()
	rows, err := s.pool.Query(qctx, sql, args...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	size := 0
	for rows.Next() {
		if size >= MaxPageBytes {
			stop() // before rows.Close, deferred after it
			return ns, true, nil
		}
		n, err := scanNotification(rows)
		if err != nil {
			return nil, false, err
		}
		size += n.size()
		ns = append(ns, n)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	return ns, false, nil
}

// FailedIDs pages through the ids of the dead-letter queue of channel as
// ListFailed does, reading nothing else.
func (s *Store) FailedIDs(ctx context.Context, channel string, after int64, limit int) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM notifications
 WHERE phase = 3 AND channel = $1 AND id > $2 ORDER BY channel, id LIMIT $3`, channel, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list failed ids of channel %q after id %d: %w", channel, after, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list failed ids of channel %q after id %d: %w", channel, after, err)
	}
	return ids, nil
}

// size is about what n holds in memory: its variable-size fields.
func (n *Notification) size() int {
	return len(n.Channel) + len(n.Recipient) + len(n.Payload) + len(n.IdempotencyKey) + len(n.LastError) + len(n.Result) + 200
}

// CountByStatusOf is CountByStatus for the channels named and at most
// others more (the first by name; others < 0: every one): an application's
// own SQL may write rows under any number of channel names nobody
// configured, and the overview counts every few seconds. omitted is how many
// channels with rows were left out.
func (s *Store) CountByStatusOf(ctx context.Context, channels []string, others int) (_ map[string]map[string]int64, omitted int, _ error) {
	if channels == nil {
		channels = []string{} // NULL would make "channel <> ALL" NULL: no other counted
	}
	var limit *int // NULL: no LIMIT
	if others >= 0 {
		limit = &others
	}
	// The maintained counts plus the deltas not yet folded in (migration
	// 10): exact as of this statement's snapshot, and it reads a few hundred
	// rows whatever the size of notifications. The last row (channel NULL)
	// carries omitted.
	rows, err := s.pool.Query(ctx, `
		WITH c AS (
			SELECT channel, status, `+saturatedBigint("sum(n)")+` AS n FROM (
				SELECT channel, status, n FROM notification_counts
				UNION ALL
				SELECT channel, status, d FROM notification_count_deltas) u
			WHERE `+countable+`
			GROUP BY channel, status HAVING sum(n) <> 0),
		other AS (SELECT DISTINCT channel FROM c WHERE channel <> ALL($1::text[])),
		listed AS (SELECT channel FROM other ORDER BY channel LIMIT $2)
		SELECT channel, status, n FROM c WHERE channel = ANY($1::text[]) OR channel IN (SELECT channel FROM listed)
		UNION ALL
		SELECT NULL, NULL, (SELECT count(*) FROM other) - (SELECT count(*) FROM listed)`, channels, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("count notifications by status: %w", err)
	}
	defer rows.Close()
	out := make(map[string]map[string]int64)
	for rows.Next() {
		var channel, status *string
		var n int64
		if err := rows.Scan(&channel, &status, &n); err != nil {
			return nil, 0, fmt.Errorf("count notifications by status: %w", err)
		}
		if channel == nil {
			omitted = int(n)
			continue
		}
		if out[*channel] == nil {
			out[*channel] = make(map[string]int64)
		}
		out[*channel][*status] = n
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("count notifications by status: %w", err)
	}
	return out, omitted, nil
}

// CountByStatus counts rows per channel and status, exactly, without
// scanning notifications: it reads the counts the triggers maintain
// (docs/performance.md: under a millisecond at 10M rows). Every channel.
func (s *Store) CountByStatus(ctx context.Context) (map[string]map[string]int64, error) {
	counts, _, err := s.CountByStatusOf(ctx, nil, -1)
	return counts, err
}

// saturatedBigint is the numeric expression expr as a bigint, held to the
// bigint's range. Counts are sums of the deltas the triggers append, and an
// application's SQL may write a delta (or a count) of any bigint: a sum past
// the range failed every fold and every count for good, the deltas piling up
// unfolded. Saturated, an absurd count stays absurd but bounded, and the fold
// goes on.
func saturatedBigint(expr string) string {
	return `least(greatest(` + expr + `, -9223372036854775808), 9223372036854775807)::bigint`
}

// countable is the SQL predicate of a count (or count delta) a notification
// can have made: a status notifications' CHECK allows and a channel within
// MaxChannelLen (migration 00015's CHECK). The count tables hold no such
// CHECK, and an application's SQL may write them: a delta whose channel
// does not fit notification_counts' key (6,400 bytes that do not compress)
// failed every fold for good, so every later delta piled up unfolded.
var countable = `status IN ('PENDING', 'QUEUED', 'PROCESSING', 'SENT', 'FAILED', 'CANCELLED') AND octet_length(channel) <= ` + strconv.Itoa(MaxChannelLen)

// CompactCounts folds the count deltas the triggers appended into
// notification_counts, in one transaction, and returns how many it folded.
// Any instance may call it at any time: concurrent calls fold disjoint
// deltas (the delete locks what it takes), and the upsert adds, so nothing
// is counted twice. A delta no notification can have made (not countable)
// is deleted unfolded, and the log says how many.
func (s *Store) CompactCounts(ctx context.Context) (int64, error) {
	var n, dropped int64
	err := s.pool.QueryRow(ctx, `
		WITH moved AS (
			DELETE FROM notification_count_deltas WHERE id IN (
				SELECT id FROM notification_count_deltas ORDER BY id LIMIT 100000 FOR UPDATE SKIP LOCKED)
			RETURNING channel, status, d, `+countable+` AS countable),
		folded AS (
			INSERT INTO notification_counts AS c (channel, status, n)
			SELECT channel, status, `+saturatedBigint("sum(d)")+` FROM moved WHERE countable GROUP BY channel, status
			ON CONFLICT (channel, status) DO UPDATE SET n = `+saturatedBigint("c.n::numeric + EXCLUDED.n")+`
			RETURNING 1)
		SELECT count(*), count(*) FILTER (WHERE NOT countable) FROM moved`).Scan(&n, &dropped)
	if err != nil {
		return 0, fmt.Errorf("compact notification counts: %w", err)
	}
	if dropped > 0 {
		s.logger.Warn("count deltas no notification can have made were dropped unfolded (a status notifications do not take, or a channel past its bound; written by SQL of your own?)",
			"deltas", dropped, "channel_bound", MaxChannelLen)
	}
	return n - dropped, nil
}

func scanNotifications(rows pgx.Rows) ([]Notification, error) {
	return pgx.CollectRows(rows, scanNotification)
}

// scanNotification scans one row of notificationColumns.
func scanNotification(r pgx.CollectableRow) (Notification, error) {
	var (
		n               Notification
		key, lastErr    pgtype.Text
		next, sent      pgtype.Timestamptz
		jobID           pgtype.Int8
		payload, result []byte
	)
	err := r.Scan(&n.ID, &n.Channel, &n.Recipient, &payload, &key, &n.Status, &n.AttemptCount, &n.DueAt,
		&next, &lastErr, &result, &jobID, &n.CreatedAt, &n.UpdatedAt, &sent)
	if err != nil {
		return n, err
	}
	n.Payload, n.IdempotencyKey, n.LastError, n.JobID = payload, key.String, lastErr.String, jobID.Int64
	if result != nil {
		n.Result = result
	}
	n.NextAttemptAt, n.SentAt = next.Time, sent.Time
	return n, nil
}
