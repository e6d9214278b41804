package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/notifyd/notifyd/sdk/wire"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Result is where a settled attempt leaves its notification.
type Result int

const (
	ResultSent   Result = iota // → SENT (terminal)
	ResultRetry                // → QUEUED with NextAttemptAt
	ResultFailed               // → FAILED (terminal, dead-lettered)
)

// String names the Result as logs and errors print it.
func (r Result) String() string {
	switch r {
	case ResultSent:
		return "sent"
	case ResultRetry:
		return "retry"
	case ResultFailed:
		return "failed"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

func (r Result) status() (string, bool) {
	switch r {
	case ResultSent:
		return StatusSent, true
	case ResultRetry:
		return StatusQueued, true
	case ResultFailed:
		return StatusFailed, true
	}
	return "", false
}

// defaultOutcome is the attempt-log outcome when a Settlement leaves it
// empty. A FAILED row whose retries ran out passes OutcomeTransient itself.
func (r Result) defaultOutcome() string {
	switch r {
	case ResultSent:
		return OutcomeSuccess
	case ResultRetry:
		return OutcomeTransient
	}
	return OutcomePermanent
}

// Settlement is the verdict on one claimed attempt.
type Settlement struct {
	// The guard: it applies only while the row is PROCESSING with
	// attempts = Attempt (the token Claim returned), so a worker that lost
	// its claim and settles late changes nothing.
	ID      int64
	Attempt int

	Result        Result
	NextAttemptAt time.Time // ResultRetry: when it may be claimed again (zero = at once)
	Error         string    // last_error for retry and failed; "" keeps the previous one

	// Error, ProviderCode and Output come from providers: text that Postgres
	// cannot store (invalid UTF-8, NUL) is replaced with U+FFFD, text over
	// MaxErrorLen or MaxProviderCodeLen is cut, an Output that is not valid
	// JSON is stored as a JSON string and one over MaxResultBytes as a note
	// saying so, rather than failing the batch.

	ProviderStatus int    // 0 = none
	ProviderCode   string // "" = none
	// Output is what the provider returned (message id, embeddings, …),
	// stored in result on SENT and on FAILED; ignored on retry.
	Output json.RawMessage

	Outcome               string    // SUCCESS | TRANSIENT | PERMANENT; "" = from Result
	StartedAt, FinishedAt time.Time // zero = now (the database's clock)
}

// Settle applies a batch of settlements in one statement (one transaction):
// a set-based UPDATE guarded on (id, attempts, PROCESSING) and an INSERT of
// attempt-log rows for the rows that applied. It returns, per input, whether
// it applied. When an id appears more than once, only its first settlement
// can apply.
func (s *Store) Settle(ctx context.Context, ss []Settlement) ([]bool, error) {
	if len(ss) == 0 {
		return nil, nil
	}
	var (
		n          = len(ss)
		ids        = make(int8Array, 0, n)
		attempts   = make(int4Array, 0, n)
		statuses   = make(textArray, 0, n)
		nexts      = make(timestamptzArray, 0, n)
		errs       = make(textArray, 0, n)
		pstatuses  = make(int4Array, 0, n)
		pcodes     = make(textArray, 0, n)
		outputs    = make(textArray, 0, n)
		outcomes   = make(textArray, 0, n)
		starts     = make(timestamptzArray, 0, n)
		finishes   = make(timestamptzArray, 0, n)
		firstIndex = make(map[int64]int, n) // id → index of its first settlement
	)
	for i, st := range ss {
		status, err := st.validate()
		if err != nil {
			return nil, fmt.Errorf("settle: settlement %d (id %d): %w (%w)", i, st.ID, err, ErrInvalid)
		}
		if _, dup := firstIndex[st.ID]; dup {
			continue
		}
		firstIndex[st.ID] = i
		outcome := st.Outcome
		if outcome == "" {
			outcome = st.Result.defaultOutcome()
		}
		var next pgtype.Timestamptz
		if st.Result == ResultRetry {
			next = timestamptz(st.NextAttemptAt)
		}
		var output string
		if st.Result != ResultRetry {
			output = cleanOutput(st.Output)
		}
		ids = append(ids, st.ID)
		attempts = append(attempts, int32(st.Attempt))
		statuses = append(statuses, status)
		nexts = append(nexts, next)
		errs = append(errs, wire.Truncate(StorableText(st.Error), MaxErrorLen))
		pstatuses = append(pstatuses, int32(st.ProviderStatus))
		pcodes = append(pcodes, wire.Truncate(StorableText(st.ProviderCode), MaxProviderCodeLen))
		outputs = append(outputs, output)
		outcomes = append(outcomes, outcome)
		starts = append(starts, timestamptz(st.StartedAt))
		finishes = append(finishes, timestamptz(st.FinishedAt))
	}
	hot, _, err := s.hotPools()
	if err != nil {
		return nil, fmt.Errorf("settle %d notifications: %w", len(ids), err)
	}
	rows, err := hot.Query(ctx, settleSQL,
		ids, attempts, statuses, nexts, errs, pstatuses, pcodes, outputs, outcomes, starts, finishes)
	if err != nil {
		return nil, fmt.Errorf("settle %d notifications: %w", len(ids), err)
	}
	defer rows.Close()
	applied := make([]bool, n)
	var id int64
	dest := []any{&id} // once: a Scan target escapes
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("settle %d notifications: %w", len(ids), err)
		}
		applied[firstIndex[id]] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("settle %d notifications: %w", len(ids), err)
	}
	return applied, nil
}

// settleSQL: the UPDATE joins the input arrays to notifications on the
// guard and returns, for the rows it changed, what the attempt log needs; the
// INSERT logs exactly those rows. One statement, so the log never holds an
// attempt whose settle did not commit.
const settleSQL = `
WITH settled AS (
    UPDATE notifications n
       SET status = i.status,
           next_attempt_at = i.next_attempt_at,
           last_error = CASE WHEN i.status = 'SENT' THEN n.last_error
                             ELSE coalesce(nullif(i.error, ''), n.last_error) END,
           result = coalesce(nullif(i.output, '')::jsonb, n.result),
           sent_at = CASE WHEN i.status = 'SENT' THEN coalesce(i.finished_at, now()) END,
           crashes = 0,
           updated_at = now()
      FROM unnest($1::bigint[], $2::int[], $3::text[], $4::timestamptz[], $5::text[],
                  $6::int[], $7::text[], $8::text[], $9::text[], $10::timestamptz[], $11::timestamptz[])
           AS i(id, attempt, status, next_attempt_at, error, provider_status, provider_code, output,
                outcome, started_at, finished_at)
     WHERE n.id = ANY($1::bigint[]) AND n.id = i.id AND n.attempts = i.attempt AND n.status = 'PROCESSING'
    RETURNING n.id, i.attempt, i.started_at, i.finished_at, i.outcome, i.provider_status, i.provider_code, i.error
),
logged AS (
    INSERT INTO notification_attempts
           (notification_id, attempt, started_at, finished_at, outcome, provider_status, provider_code, error)
    SELECT id, attempt, coalesce(started_at, now()), coalesce(finished_at, now()), outcome,
           nullif(provider_status, 0), nullif(provider_code, ''), nullif(error, '')
      FROM settled
)
SELECT id FROM settled`

func (st Settlement) validate() (string, error) {
	status, ok := st.Result.status()
	switch {
	case !ok:
		return "", fmt.Errorf("result %v is not sent, retry or failed", st.Result)
	case st.ID <= 0:
		return "", fmt.Errorf("id %d, want > 0", st.ID)
	case st.Attempt <= 0:
		return "", fmt.Errorf("attempt %d, want the attempt number Claim returned (>= 1)", st.Attempt)
	case st.ProviderStatus < 0 || st.ProviderStatus > math.MaxInt32:
		return "", fmt.Errorf("provider_status %d, want 0 to %d", st.ProviderStatus, math.MaxInt32)
	}
	switch st.Outcome {
	case "", OutcomeSuccess, OutcomeTransient, OutcomePermanent:
	default:
		return "", fmt.Errorf("outcome %q, want SUCCESS, TRANSIENT or PERMANENT", st.Outcome)
	}
	return status, nil
}

// StorableText is s as a text column holds it: invalid UTF-8 and NUL, which
// Postgres refuses in text, replaced by U+FFFD; s itself when it has
// neither. Cut it to its column's bound after (wire.Truncate). One
// provider's odd error message (or a render error quoting what a template
// made) must not fail a whole settle batch or job chunk, whose rows would
// then be tried again.
func StorableText(s string) string {
	if checkText(s) == nil {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// cleanOutput stores provider output that jsonb cannot hold as a JSON string
// of its (cleaned) text, for the same reason as StorableText, and output over
// MaxResultBytes as a note of its size.
func cleanOutput(b json.RawMessage) string {
	if len(b) > MaxResultBytes {
		return fmt.Sprintf(`{"notifyd_error":"the provider's result was %d bytes, over the %d-byte bound; not stored"}`,
			len(b), MaxResultBytes)
	}
	if len(b) == 0 {
		return ""
	}
	if checkJSON(b) == nil {
		if n, _ := wire.JSONReadBack(b); n > MaxResultBytes {
			return fmt.Sprintf(`{"notifyd_error":"the provider's result reads back as %d bytes, over the %d-byte bound; not stored"}`,
				n, MaxResultBytes)
		}
		return string(b)
	}
	quoted, _ := json.Marshal(StorableText(string(b))) // a clean string always marshals
	return string(quoted)
}

// timestamptz maps the zero time to NULL.
func timestamptz(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}
