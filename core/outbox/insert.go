package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
)

// NewNotification is one notification to write into the outbox.
type NewNotification struct {
	Channel        string
	Recipient      string
	Payload        json.RawMessage
	IdempotencyKey string    // "" = none
	DueAt          time.Time // zero = now (the database's clock)
	JobID          int64     // 0 = none
}

// Inserted is the outcome of one NewNotification, in input order.
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
func Insert(ctx context.Context, db DBTX, ns []NewNotification) ([]Inserted, error) {
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
	)
	for i, n := range ns {
		channels[i], recipients[i], payloads[i], keys[i] = n.Channel, n.Recipient, string(n.Payload), n.IdempotencyKey
		dues[i], jobs[i] = timestamptz(n.DueAt), n.JobID
	}
	rows, err := db.Query(ctx, insertSQL, channels, recipients, payloads, keys, dues, jobs)
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

// Insert writes ns through the Store's pool; see the package-level Insert.
func (s *Store) Insert(ctx context.Context, ns []NewNotification) ([]Inserted, error) {
	return Insert(ctx, s.pool, ns)
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
           nextval('notifications_id_seq') AS new_id,
           nullif(t.idempotency_key, '') IS NULL
             OR row_number() OVER (PARTITION BY nullif(t.idempotency_key, '') ORDER BY t.ord) = 1 AS first
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::bigint[])
           WITH ORDINALITY AS t(channel, recipient, payload, idempotency_key, due_at, job_id, ord)
),
ins AS (
    INSERT INTO notifications (id, channel, recipient, payload, idempotency_key, due_at, job_id)
    OVERRIDING SYSTEM VALUE
    SELECT new_id, channel, recipient, payload, idempotency_key, coalesce(due_at, now()), job_id
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
func resolveDuplicates(ctx context.Context, db DBTX, ns []NewNotification, out []Inserted, idx []int) error {
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
func Validate(ns []NewNotification) error {
	if len(ns) > MaxInsertBatch {
		return fmt.Errorf("insert: %d notifications in one batch, at most %d", len(ns), MaxInsertBatch)
	}
	for i, n := range ns {
		if err := n.validate(); err != nil {
			return fmt.Errorf("insert: notification %d: %w", i, err)
		}
	}
	return nil
}

func (n NewNotification) validate() error {
	switch {
	case n.Channel == "":
		return fmt.Errorf("channel is empty")
	case len(n.Channel) > MaxChannelLen:
		return fmt.Errorf("channel is %d bytes long, at most %d", len(n.Channel), MaxChannelLen)
	case n.Recipient == "":
		return fmt.Errorf("recipient is empty")
	case len(n.Recipient) > MaxRecipientLen:
		return fmt.Errorf("recipient is %d bytes long, at most %d", len(n.Recipient), MaxRecipientLen)
	case len(n.Payload) > MaxPayloadBytes:
		return fmt.Errorf("payload is %d bytes, at most %d", len(n.Payload), MaxPayloadBytes)
	case len(n.IdempotencyKey) > MaxIdempotencyKeyLen:
		return fmt.Errorf("idempotency_key is %d bytes long, at most %d", len(n.IdempotencyKey), MaxIdempotencyKeyLen)
	case n.JobID < 0:
		return fmt.Errorf("job_id is %d, want a positive id or 0 for none", n.JobID)
	}
	for _, f := range []struct{ name, v string }{
		{"channel", n.Channel}, {"recipient", n.Recipient}, {"idempotency_key", n.IdempotencyKey},
	} {
		if err := checkText(f.v); err != nil {
			return fmt.Errorf("%s %w", f.name, err)
		}
	}
	if err := checkJSON(n.Payload); err != nil {
		return fmt.Errorf("payload %w", err)
	}
	return nil
}

// CheckText rejects what Postgres text cannot hold (invalid UTF-8, NUL),
// saying which ("is not valid UTF-8"): every door checks the text it takes
// with it.
func CheckText(s string) error { return checkText(s) }

// checkText rejects what Postgres text cannot hold.
func checkText(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("is not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("contains a NUL byte")
	}
	return nil
}

// checkJSON rejects what jsonb cannot hold: invalid JSON, and the \u0000
// escape that JSON allows but Postgres refuses.
func checkJSON(b json.RawMessage) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return fmt.Errorf("is empty, want a JSON value")
	}
	if !utf8.Valid(b) {
		return fmt.Errorf("is not valid UTF-8")
	}
	if !json.Valid(b) {
		return fmt.Errorf("is not valid JSON")
	}
	if p := JSONEscapeProblem(b); p != "" {
		return fmt.Errorf("%s", p)
	}
	if p := jsonNumberProblem(b); p != "" {
		return fmt.Errorf("%s", p)
	}
	return nil
}

// JSONEscapeProblem says what in valid JSON b Postgres cannot store ("" when
// nothing): a \u0000 escape (jsonb and text refuse NUL) or an unpaired
// surrogate escape (jsonb refuses it; encoding/json would silently turn it
// into U+FFFD). An escape counts only when its backslash is not itself
// escaped (an odd run of backslashes before the u).
func JSONEscapeProblem(b []byte) string {
	hex4 := func(i int) (rune, bool) {
		if i+4 > len(b) {
			return 0, false
		}
		v, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(`\u`))
		if j < 0 {
			return ""
		}
		j += i
		i = j + 2
		run := 0
		for k := j - 1; k >= 0 && b[k] == '\\'; k-- {
			run++
		}
		if run%2 == 1 {
			continue
		}
		v, ok := hex4(j + 2)
		switch {
		case !ok:
		case v == 0:
			return fmt.Sprintf(`contains \u0000 (a NUL character), which Postgres cannot store (byte %d)`, j)
		case v >= 0xD800 && v <= 0xDBFF:
			lo, ok := rune(0), j+8 <= len(b) && b[j+6] == '\\' && b[j+7] == 'u'
			if ok {
				lo, ok = hex4(j + 8)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Sprintf(`has an unpaired surrogate escape \u%04X (byte %d)`, v, j)
			}
			i = j + 12
		case v >= 0xDC00 && v <= 0xDFFF:
			return fmt.Sprintf(`has an unpaired surrogate escape \u%04X (byte %d)`, v, j)
		}
	}
}

// jsonNumberProblem says which number of valid JSON b Postgres' numeric (what
// jsonb keeps numbers as) cannot hold: an exponent or a run of digits past
// its range (1e999999 is valid JSON, and was refused only by the insert).
// "" when every number fits.
func jsonNumberProblem(b []byte) string {
	const maxDigits, maxExp = 100_000, 100_000
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '-' || (c >= '0' && c <= '9'):
			start, digits := i, 0
			for i < len(b) && (b[i] >= '0' && b[i] <= '9' || b[i] == '-' || b[i] == '+' || b[i] == '.') {
				if b[i] >= '0' && b[i] <= '9' {
					digits++
				}
				i++
			}
			if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
				j := i + 1
				if j < len(b) && (b[j] == '+' || b[j] == '-') {
					j++
				}
				exp := 0
				for ; j < len(b) && b[j] >= '0' && b[j] <= '9'; j++ {
					if exp <= maxExp {
						exp = exp*10 + int(b[j]-'0')
					}
				}
				if exp > maxExp {
					return fmt.Sprintf("has a number whose exponent is past what Postgres can store (byte %d)", start)
				}
				i = j
			}
			if digits > maxDigits {
				return fmt.Sprintf("has a number of %d digits, past what Postgres can store (byte %d)", digits, start)
			}
			i--
		}
	}
	return ""
}

// timestamptz maps the zero time to NULL.
func timestamptz(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}
