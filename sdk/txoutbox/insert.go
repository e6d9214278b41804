package txoutbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/notifyd/notifyd/sdk/traceparent"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Querier is what Insert needs from a connection: pgx.Tx, *pgx.Conn and
// *pgxpool.Pool all satisfy it.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Row is one notification to write into the outbox.
type Row struct {
	Channel        string
	Recipient      string
	Payload        json.RawMessage
	IdempotencyKey string    // "" = none
	DueAt          time.Time // zero = now (the database's clock)
	JobID          int64     // 0 = none
	// TraceParent is the W3C traceparent of the span that enqueued it,
	// continued by every delivery attempt (docs/design.md §11); "" = none.
	// A value that is not a valid traceparent is dropped, never an error.
	TraceParent string
}

// Inserted is the outcome of one Row, in input order.
type Inserted struct {
	ID int64
	// Duplicate says the idempotency key was already taken (in the table, or
	// by an earlier row of the same batch); ID is then the original's.
	Duplicate bool
	Status    string // the row's status: PENDING when new, the original's when Duplicate
}

// Insert writes ns as PENDING notifications in one statement through db, so
// an application can call it inside its own transaction (the transactional
// outbox): a rollback leaves nothing behind. A repeated idempotency key
// returns the original id with Duplicate set.
func Insert(ctx context.Context, db Querier, ns []Row) ([]Inserted, error) {
	if len(ns) == 0 {
		return nil, nil
	}
	if err := Validate(ns); err != nil {
		return nil, err
	}
	var (
		channels   = make([]string, len(ns))
		recipients = make([]string, len(ns))
		payloads   = make([]string, len(ns))
		keys       = make([]string, len(ns))
		dues       = make([]pgtype.Timestamptz, len(ns))
		jobs       = make([]int64, len(ns))
		// nil (a NULL array, which unnest reads as NULLs) unless a row is
		// traced: an untraced batch sends nothing more.
		traces []string
	)
	for i, n := range ns {
		channels[i], recipients[i], payloads[i], keys[i] = n.Channel, n.Recipient, string(n.Payload), n.IdempotencyKey
		dues[i], jobs[i] = timestamptz(n.DueAt), n.JobID
		if n.TraceParent != "" && traceparent.Valid(n.TraceParent) {
			if traces == nil {
				traces = make([]string, len(ns))
			}
			traces[i] = n.TraceParent
		}
	}
	rows, err := db.Query(ctx, insertSQL, channels, recipients, payloads, keys, dues, jobs, traces)
	if err != nil {
		return nil, fmt.Errorf("insert %d notifications: %w", len(ns), err)
	}
	out := make([]Inserted, len(ns))
	var unresolved []int // duplicates of rows committed after this statement's snapshot
	for rows.Next() {
		var (
			ord    int
			id     pgtype.Int8
			dup    bool
			status pgtype.Text
		)
		if err := rows.Scan(&ord, &id, &dup, &status); err != nil {
			rows.Close()
			return nil, fmt.Errorf("insert %d notifications: %w", len(ns), err)
		}
		out[ord-1] = Inserted{ID: id.Int64, Duplicate: dup, Status: status.String}
		if !id.Valid {
			unresolved = append(unresolved, ord-1)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insert %d notifications: %w", len(ns), err)
	}
	if len(unresolved) > 0 {
		if err := resolveDuplicates(ctx, db, ns, out, unresolved); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// insertSQL pre-allocates an id per input row, inserts the first row of
// each idempotency key (and every row without one), and answers per input
// row: its own new id, or the id of the row that holds its key (inserted by
// this statement, or already in the table). COALESCE evaluates lazily, so the
// table lookups run only for duplicates: the statement cannot see its own
// inserts, which is why same_batch comes first.
//
// A key committed by a concurrent transaction after this statement's
// snapshot was taken makes ON CONFLICT skip the row while the table lookup
// cannot see the original: such rows come back with a NULL id and
// resolveDuplicates looks them up with a fresh snapshot.
const insertSQL = `
WITH input AS (
    SELECT t.ord, t.channel, t.recipient, t.payload::jsonb AS payload,
           nullif(t.idempotency_key, '') AS idempotency_key, t.due_at, nullif(t.job_id, 0) AS job_id,
           nullif(t.trace_parent, '') AS trace_parent,
           nextval('notifications_id_seq') AS new_id,
           nullif(t.idempotency_key, '') IS NULL
             OR row_number() OVER (PARTITION BY nullif(t.idempotency_key, '') ORDER BY t.ord) = 1 AS first
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::bigint[], $7::text[])
           WITH ORDINALITY AS t(channel, recipient, payload, idempotency_key, due_at, job_id, trace_parent, ord)
),
ins AS (
    INSERT INTO notifications (id, channel, recipient, payload, idempotency_key, due_at, job_id, trace_parent)
    OVERRIDING SYSTEM VALUE
    SELECT new_id, channel, recipient, payload, idempotency_key, coalesce(due_at, now()), job_id, trace_parent
      FROM input WHERE first
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, idempotency_key, status
)
SELECT i.ord,
       coalesce(own.id, same_batch.id,
                (SELECT e.id FROM notifications e WHERE e.idempotency_key = i.idempotency_key)),
       own.id IS NULL,
       coalesce(own.status, same_batch.status,
                (SELECT e.status FROM notifications e WHERE e.idempotency_key = i.idempotency_key))
  FROM input i
  LEFT JOIN ins own ON own.id = i.new_id
  LEFT JOIN ins same_batch ON same_batch.idempotency_key = i.idempotency_key`

// resolveDuplicates fills in rows whose key was taken by a transaction that
// committed while the insert statement ran. Under READ COMMITTED the new
// statement sees it; under REPEATABLE READ Postgres already failed the insert
// with a serialization error.
func resolveDuplicates(ctx context.Context, db Querier, ns []Row, out []Inserted, idx []int) error {
	keys := make([]string, len(idx))
	for j, i := range idx {
		keys[j] = ns[i].IdempotencyKey
	}
	rows, err := db.Query(ctx, `SELECT idempotency_key, id, status FROM notifications WHERE idempotency_key = ANY($1)`, keys)
	if err != nil {
		return fmt.Errorf("insert: look up %d concurrently inserted idempotency keys: %w", len(keys), err)
	}
	found := make(map[string]Inserted, len(keys))
	for rows.Next() {
		var key string
		var in Inserted
		if err := rows.Scan(&key, &in.ID, &in.Status); err != nil {
			rows.Close()
			return fmt.Errorf("insert: look up concurrently inserted idempotency keys: %w", err)
		}
		in.Duplicate = true
		found[key] = in
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("insert: look up concurrently inserted idempotency keys: %w", err)
	}
	for _, i := range idx {
		in, ok := found[ns[i].IdempotencyKey]
		if !ok {
			// The conflicting row was deleted (purged) between the two statements.
			return fmt.Errorf("insert: notification %d: idempotency key %q conflicted with a row that is gone; retry", i, ns[i].IdempotencyKey)
		}
		out[i] = in
	}
	return nil
}

// Validate checks a batch for Insert and names the first bad field and its
// index.
func Validate(ns []Row) error {
	if len(ns) > wire.MaxInsertBatch {
		return fmt.Errorf("insert: %d notifications in one batch, at most %d", len(ns), wire.MaxInsertBatch)
	}
	for i, n := range ns {
		if err := n.Check(); err != nil {
			return fmt.Errorf("insert: notification %d: %w", i, err)
		}
	}
	return nil
}

// Check validates one notification as Insert would and names the bad field
// ("recipient contains a NUL byte"), without the batch position Validate
// puts in front, for callers that name the position their own way.
func (n Row) Check() error {
	switch {
	case n.Channel == "":
		return fmt.Errorf("channel is empty")
	case len(n.Channel) > wire.MaxChannelLen:
		return fmt.Errorf("channel is %d bytes long, at most %d", len(n.Channel), wire.MaxChannelLen)
	case n.Recipient == "":
		return fmt.Errorf("recipient is empty")
	case len(n.Recipient) > wire.MaxRecipientLen:
		return fmt.Errorf("recipient is %d bytes long, at most %d", len(n.Recipient), wire.MaxRecipientLen)
	case len(n.IdempotencyKey) > wire.MaxIdempotencyKeyLen:
		return fmt.Errorf("idempotency_key is %d bytes long, at most %d", len(n.IdempotencyKey), wire.MaxIdempotencyKeyLen)
	case n.JobID < 0:
		return fmt.Errorf("job_id is %d, want a positive id or 0 for none", n.JobID)
	}
	for _, f := range []struct{ name, v string }{
		{"channel", n.Channel}, {"recipient", n.Recipient}, {"idempotency_key", n.IdempotencyKey},
	} {
		if err := wire.CheckText(f.v); err != nil {
			return fmt.Errorf("%s %w", f.name, err)
		}
	}
	if err := wire.CheckPayload(n.Payload, wire.MaxPayloadBytes); err != nil {
		return fmt.Errorf("payload %w", err)
	}
	// Refused here, not only at the API, so EnqueueTx and the CLI's --config
	// store no payload the API would refuse: jsonb keeps the last of a
	// repeated key where a reader of the first sees another message.
	if k := wire.RepeatedKey(n.Payload, nil, "payload"); k != nil {
		return k
	}
	return checkDueAt(n.DueAt)
}

// The range of a notification's send time (Row.DueAt, the API's and
// wire.Notification's send_at). Past year 9999 a row is stored but can never
// be shown: time.Time's JSON refuses it, so every read of it through the API
// answers 500 (`notifyd status`, the DLQ page it sits on); outside Postgres'
// range the insert fails with SQLSTATE 22008, naming no field and aborting
// the application's transaction. The last day before year 10000 is left out
// as well, so that no time zone a server reads the row back in carries it
// past 9999.
var (
	minDueAt = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxDueAt = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC) // exclusive
)

// checkDueAt refuses a send time outside [minDueAt, maxDueAt), naming
// send_at (the field every door takes it as); the zero time is now.
func checkDueAt(t time.Time) error {
	if t.IsZero() || (!t.Before(minDueAt) && t.Before(maxDueAt)) {
		return nil
	}
	return fmt.Errorf("send_at %s is out of range: want from %s to before %s (UTC)",
		t.UTC().Format(time.RFC3339Nano), minDueAt.Format(time.DateOnly), maxDueAt.Format(time.DateOnly))
}

// timestamptz maps the zero time to NULL.
func timestamptz(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}
