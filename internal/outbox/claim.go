package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Queued names a row that belongs in its channel's Redis queue: the answer
// of Relay, Replay, ReplayChannel and Sweep, and what the caller pushes.
type Queued struct {
	ID            int64
	Channel       string
	NextAttemptAt time.Time // zero = due now; else push it delayed until then
}

// Relay moves up to limit PENDING rows whose due_at <= now to QUEUED, oldest
// due first, in one statement. Rows locked by a concurrent relay are skipped
// (FOR UPDATE SKIP LOCKED), so parallel relays never queue a row twice.
//
// When it returns limit rows, call it again at once: the same statement
// tells the insert trigger that the relay is busy, and inserts stop sending
// the NOTIFY that Listen turns into wakes until a Relay returns fewer than
// limit rows (see 00001_outbox.sql for why). Poll as well: a wake is a hint.
func (s *Store) Relay(ctx context.Context, now time.Time, limit int) ([]Queued, error) {
	return s.relayWith(ctx, relaySQL, now, limit, int64(0))
}

// RelayOne relays the row id alone, if it is still PENDING and due (none
// back: it is not, or another relay holds it): after a relay was refused,
// it tells a row's refusal from the statement's by the row's id, not by
// its place among the due rows, which other instances' relays change.
func (s *Store) RelayOne(ctx context.Context, now time.Time, id int64) ([]Queued, error) {
	return s.relayWith(ctx, relayOneSQL, now, 1, id)
}

func (s *Store) relayWith(ctx context.Context, sql string, now time.Time, limit int, except any) ([]Queued, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("relay: limit %d, want > 0", limit)
	}
	_, relay, err := s.hotPools()
	if err != nil {
		return nil, fmt.Errorf("relay up to %d notifications: %w", limit, err)
	}
	rows, err := relay.Query(ctx, sql, now, limit, except)
	if err != nil {
		return nil, fmt.Errorf("relay up to %d notifications: %w", limit, err)
	}
	out, err := scanQueued(rows, false)
	if err != nil {
		return nil, fmt.Errorf("relay up to %d notifications: %w", limit, err)
	}
	return out, nil
}

// relaySQL: $1 now, $2 limit, $3 an id left out (0: none).
const relaySQL = `
WITH due AS (
    SELECT id FROM notifications
     WHERE phase = 0 AND due_at <= $1 AND id <> $3
     ORDER BY due_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
),
queued AS (
    UPDATE notifications n
       SET status = 'QUEUED', next_attempt_at = NULL, updated_at = $1
     WHERE n.id = ANY(ARRAY(SELECT id FROM due))
    RETURNING n.id, n.channel, n.due_at
),
wake AS (
    UPDATE outbox_relay_state SET wake_wanted = w.drained
      FROM (SELECT count(*) < $2 AS drained FROM queued) w
     WHERE wake_wanted <> w.drained
)
SELECT id, channel FROM queued ORDER BY due_at, id`

// relayOneSQL is relaySQL for the one row $3 ($2 is 1).
var relayOneSQL = strings.Replace(relaySQL, "phase = 0 AND due_at <= $1 AND id <> $3", "id = $3 AND phase = 0 AND due_at <= $1", 1)

// The UPDATE names its rows by primary key only: due locked them as PENDING
// in this statement, so they still are, and a status test here would let the
// planner walk notifications_pending_due instead (it did, on the estimates of
// an empty outbox: every PENDING row once per call).

// ClaimKind says what the caller does with a claimed id.
type ClaimKind int

const (
	// ClaimSend: the row is now PROCESSING under this claim; send it, then
	// Settle with Attempt.
	ClaimSend ClaimKind = iota
	// ClaimSkip: the row is terminal, PENDING (cancelled-and-gone, or never
	// relayed) or does not exist; drop the id from the queue, never send.
	ClaimSkip
	// ClaimDefer: the row is not claimable yet (a retry not yet due, or a
	// claim by another worker that is still fresh); try again at NotBefore.
	ClaimDefer
	// ClaimSuspect: the row was in flight when the process that claimed it
	// died (its claim is stale). Claim leaves it; take it over with
	// ClaimSuspects and send it with no other suspect in flight. Crashes
	// says how many times in a row it was taken over before.
	ClaimSuspect
)

// String names the ClaimKind as logs and errors print it.
func (k ClaimKind) String() string {
	switch k {
	case ClaimSend:
		return "send"
	case ClaimSkip:
		return "skip"
	case ClaimDefer:
		return "defer"
	case ClaimSuspect:
		return "suspect"
	}
	return fmt.Sprintf("ClaimKind(%d)", int(k))
}

// Claimed is the answer of Claim for one id.
type Claimed struct {
	ID   int64
	Kind ClaimKind

	// Set for ClaimSend.
	Channel, Recipient, IdempotencyKey string
	Payload                            json.RawMessage
	// PayloadBytes is the payload's size as read back (-1: not printed,
	// for a number that would print past 100 characters). Payload is nil
	// when it is over the claim's bound: the row is claimed all the same,
	// to be finished FAILED without sending.
	PayloadBytes int
	CreatedAt    time.Time
	Attempt      int // attempts after the claim: the settle token
	// Crashes counts the claims of this row in a row whose process died
	// while it was in flight: for ClaimSend, this one's takeover included;
	// for ClaimSuspect, the takeovers before (§10).
	Crashes int
	// TraceParent is the trace the notification was enqueued in ("" for
	// none): each attempt's span continues it.
	TraceParent string

	// Status is the row's status: PROCESSING for send; for skip and defer the
	// status that stopped the claim ("" if the row does not exist).
	Status    string
	NotBefore time.Time // for ClaimDefer: when it may be claimed
}

// MaxClockAhead is the furthest ahead of the reader's clock that a row's
// updated_at can be and still be a time some instance wrote: instances'
// clocks agree to well within a lease TTL (at most an hour,
// queue.MaxLeaseTTL), and an hour more is slack. An application's SQL may
// write any timestamptz there; a PROCESSING row changed past it counts as
// stale (its claim is no live instance's), and the sweep lists a row
// changed past it as one that may have fallen out of Redis.
const MaxClockAhead = 2 * time.Hour

// Claim takes the given ids for sending, in one statement. QUEUED rows that
// are due (next_attempt_at null or <= now) become PROCESSING with
// attempts+1 (ClaimSend). A QUEUED row not yet due, or a PROCESSING row
// claimed after now-staleAfter, is ClaimDefer; a PROCESSING row claimed
// before it — its claimer presumed dead, so it was in flight when a process
// died — is ClaimSuspect, taken over only by ClaimSuspects; terminal and PENDING
// rows and unknown ids are ClaimSkip. It returns one Claimed per distinct
// id, in the order the ids first appear.
//
// A payload is read back only within MaxPayloadBytes (its jsonb text, which
// Postgres measures before sending it): a longer one — written past the
// enqueue checks, which hold payloads to it as they read back — is claimed with a nil Payload and its size in
// PayloadBytes, for the caller to finish FAILED without it.
func (s *Store) Claim(ctx context.Context, ids []int64, now time.Time, staleAfter time.Duration) ([]Claimed, error) {
	return s.claim(ctx, ids, now, staleAfter, false)
}

// ClaimSuspects claims ids as Claim does, and also takes each over from a
// stale claim: that records the lost claim's attempt as UNKNOWN in the
// attempt history and counts a crash in Claimed.Crashes (docs/design.md §10).
// The caller sends them with no other suspect in flight, so a crash while they
// are out is theirs.
func (s *Store) ClaimSuspects(ctx context.Context, ids []int64, now time.Time, staleAfter time.Duration) ([]Claimed, error) {
	return s.claim(ctx, ids, now, staleAfter, true)
}

func (s *Store) claim(ctx context.Context, ids []int64, now time.Time, staleAfter time.Duration, takeover bool) ([]Claimed, error) {
	if staleAfter <= 0 {
		return nil, fmt.Errorf("claim: staleAfter %v, want > 0", staleAfter)
	}
	distinct, index := distinctIDs(ids)
	if len(distinct) == 0 {
		return nil, nil
	}
	staleBefore := now.Add(-staleAfter)
	// The claimed rows come from the UPDATE's RETURNING. Only the ids it did
	// not claim are read again, from the statement's snapshot (the rows as
	// they were before the UPDATE: the state to report for them); in the
	// common batch every id is claimed and that second part reads nothing,
	// which saves an index lookup per row.
	hot, _, err := s.hotPools()
	if err != nil {
		return nil, fmt.Errorf("claim %d notifications: %w", len(distinct), err)
	}
	horizon := now.Add(MaxClockAhead)
	query, args := claimBatchSQL, []any{int8Array(distinct), now, staleBefore, staleAfter.String(), MaxPayloadBytes}
	if takeover {
		query, args = claimAloneSQL, append(args, horizon)
	}
	rows, err := hot.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("claim %d notifications: %w", len(distinct), err)
	}
	defer rows.Close()
	// Every id is answered; one the statement returns no row for is skipped.
	out := make([]Claimed, len(distinct))
	for i, id := range distinct {
		out[i] = Claimed{ID: id, Kind: ClaimSkip}
	}
	// The scan targets are made once for all rows (a variable handed to
	// Scan escapes: declared in the loop, each would be allocated per row).
	// Text is scanned as the driver's bytes, valid until the next row, and
	// copied only where it is kept: a status compares as it is, the channel
	// is the same string for the whole batch as a rule, and the payloads
	// share a few large allocations (payloadArena) instead of one each.
	var (
		id                           int64
		status, channel              pgtype.DriverBytes
		recipient, key, trace        pgtype.DriverBytes
		payload                      pgtype.DriverBytes
		nextAttempt, updatedAt       pgtype.Timestamptz
		createdAt                    pgtype.Timestamptz
		claimed                      bool
		attempts, crashes, payloadLn pgtype.Int4
		channels                     internedStrings
		payloads                     = payloadArena{rows: len(distinct)}
	)
	dest := []any{&id, &status, &nextAttempt, &updatedAt,
		&claimed, &channel, &recipient, &key, &payload, &payloadLn, &createdAt, &attempts, &crashes, &trace}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("claim %d notifications: %w", len(distinct), err)
		}
		i, ok := index[id]
		if !ok {
			continue // not asked for: cannot happen (id = ANY($1))
		}
		c := Claimed{ID: id}
		st := string(status) // compared only: no allocation
		switch {
		case claimed:
			c.Kind, c.Status = ClaimSend, StatusProcessing
			c.Channel, c.Recipient = channels.get(channel), string(recipient)
			c.IdempotencyKey, c.TraceParent = string(key), string(trace)
			c.CreatedAt, c.Attempt, c.Crashes = createdAt.Time, int(attempts.Int32), int(crashes.Int32)
			// Scanned as the jsonb's text, which Postgres has validated:
			// json.RawMessage would run it through encoding/json again
			// (≈2 µs a notification in notifyd-bench).
			c.Payload, c.PayloadBytes = payloads.copy(payload), int(payloadLn.Int32)
		case st == StatusQueued && nextAttempt.InfinityModifier == pgtype.Infinity:
			// Not a time notifyd writes (an application's SQL): as late as
			// a time goes, not the zero time pgx reads it as, which sent
			// the row round Redis and the claim every staleAfter for good.
			c.Kind, c.Status, c.NotBefore = ClaimDefer, StatusQueued, latestTime
		case st == StatusQueued && nextAttempt.Valid && nextAttempt.Time.After(now):
			c.Kind, c.Status, c.NotBefore = ClaimDefer, StatusQueued, nextAttempt.Time
		case st == StatusProcessing && updatedAt.InfinityModifier == pgtype.Finite &&
			!updatedAt.Time.Before(staleBefore) && !updatedAt.Time.After(horizon):
			c.Kind, c.Status, c.NotBefore = ClaimDefer, StatusProcessing, updatedAt.Time.Add(staleAfter)
		case st == StatusProcessing && !takeover:
			c.Kind, c.Status, c.Crashes = ClaimSuspect, StatusProcessing, int(crashes.Int32)
		case st == StatusQueued || st == StatusProcessing:
			// Claimable in the snapshot, yet the UPDATE found it changed: a
			// concurrent claimer (or settle, or cancel) got there first. Look
			// again once that claim would be stale.
			c.Kind, c.Status, c.NotBefore = ClaimDefer, statusName(status), now.Add(staleAfter)
		default:
			c.Kind, c.Status = ClaimSkip, statusName(status)
		}
		out[i] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim %d notifications: %w", len(distinct), err)
	}
	return out, nil
}

// latestTime is the latest time a read gives (readTime's upper end).
var latestTime = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// statusName is a status read as bytes, as a string: the constant when it is
// one (no allocation).
func statusName(b []byte) string {
	for _, s := range [...]string{StatusPending, StatusQueued, StatusProcessing, StatusSent, StatusFailed, StatusCancelled} {
		if string(b) == s {
			return s
		}
	}
	return string(b)
}

// internedStrings turns the bytes of a value that repeats from row to row (a
// batch's channel) into a string, allocating only when it changes.
type internedStrings struct{ last string }

func (s *internedStrings) get(b []byte) string {
	if b == nil {
		return ""
	}
	if string(b) != s.last {
		s.last = string(b)
	}
	return s.last
}

// payloadArena copies payloads into shared chunks: a claim of 256 rows makes
// a few allocations for its payloads rather than 256. Each copy is capped
// (a full slice expression), so appending to one cannot write into the
// next. A chunk lives as long as any payload in it, and a batch's payloads
// are sent and dropped together.
type payloadArena struct {
	chunk []byte
	rows  int // at most the payloads still to come, this one included: sizes a chunk
}

// payloadChunk bounds a chunk; a payload over a quarter of it gets an
// allocation of its own, so a chunk is never mostly waste.
const payloadChunk = 32 << 10

// copy returns a copy of b: nil for nil (SQL NULL), and never nil else.
func (a *payloadArena) copy(b []byte) []byte {
	rows := max(a.rows, 1)
	a.rows--
	switch {
	case b == nil:
		return nil
	case len(b) == 0:
		return []byte{}
	case len(b) > payloadChunk/4:
		return append(make([]byte, 0, len(b)), b...)
	case cap(a.chunk)-len(a.chunk) < len(b):
		// Room for the rows to come if their payloads are this one's size
		// (a lone notification's chunk is its payload), within the bound.
		a.chunk = make([]byte, 0, max(len(b), min(payloadChunk, len(b)*rows)))
	}
	start := len(a.chunk)
	a.chunk = append(a.chunk, b...)
	return a.chunk[start:len(a.chunk):len(a.chunk)]
}

// claimSQL: $1 ids, $2 now, $3 stale before, $4 stale after (text), $5 the
// payload bound; claimAloneSQL also $6, now + MaxClockAhead. The payload is walked and printed once per row (the lateral
// p, kept a subquery of its own by OFFSET 0: flattened into the three places
// that read p.t, as the planner does with a plain subquery, it was walked and
// printed three times — 6 µs of a 26 µs claim a row, docs/performance.md) and
// sent only within the bound: jsonb keeps 1e100000 in a few bytes and prints
// it as 100,001 digits, so the size that matters is measured here. A payload
// with a number that would print past 100 characters (expandingNumber) is not
// printed at all — its length reads -1 — so such a row costs a walk of its
// jsonb, not its expansion (2,500 × 1e100000 once held a claim for minutes).
// A zero written with a huge scale (0e-16000) is the one expansion jsonpath
// cannot see (docs/reliability.md, Known limits).
const claimSQLHead = `
WITH claimed AS (
    UPDATE notifications n
       SET status = 'PROCESSING', attempts = greatest(n.attempts, 0) + 1, updated_at = $2,
           -- Taken over from a stale claim: the attempt that claim made was
           -- lost with its instance. While PROCESSING, next_attempt_at keeps
           -- when it began (the settle overwrites it), and lost below
           -- records it; crashes counts it (§10).
           next_attempt_at = CASE WHEN n.status = 'PROCESSING' THEN n.updated_at END,
           -- A count below zero (an application's SQL) counts from zero:
           -- carried on, it put the row out of reach of retry.max_attempts
           -- and delivery.quarantine_after for 2^31 attempts or 32,768
           -- crashes. One comparison a row.
           crashes = greatest(n.crashes, 0) + CASE WHEN n.status = 'PROCESSING' THEN 1 ELSE 0 END
     WHERE n.id = ANY($1::bigint[])
       AND `

const claimSQLTail = `
    RETURNING n.id, n.channel, n.recipient, n.idempotency_key, n.payload, n.created_at, n.attempts,
              n.crashes, n.next_attempt_at AS lost_at, n.trace_parent
),
-- The lost attempt, so attempts and the history agree: read from claimed
-- (no lookup), so the common batch, where nothing was lost, pays nothing.
lost AS (
    INSERT INTO notification_attempts (notification_id, attempt, started_at, finished_at, outcome, error)
    SELECT c.id, c.attempts - 1, c.lost_at, $2, 'UNKNOWN',
           'outcome unknown: the instance that claimed it, or its plugin, stopped (or stalled) before recording the outcome; taken over after ' || $4::text
      FROM claimed c WHERE c.lost_at < $3 OR c.lost_at > $2 -- taken over: stale, or changed past any clock
)
SELECT c.id, 'PROCESSING', NULL::timestamptz, NULL::timestamptz,
       true, c.channel, c.recipient, c.idempotency_key,
       CASE WHEN octet_length(p.t) <= $5 THEN p.t END, coalesce(octet_length(p.t), -1),
       c.created_at, c.attempts, c.crashes, c.trace_parent
  FROM claimed c
 CROSS JOIN LATERAL (SELECT CASE WHEN NOT jsonb_path_exists(c.payload, '` + expandingNumber + `')
                                 THEN c.payload::text END OFFSET 0) p(t)
UNION ALL
SELECT n.id, n.status, n.next_attempt_at, n.updated_at,
       false, NULL, NULL, NULL, NULL::text, NULL::int, NULL, NULL, greatest(n.crashes, 0), NULL
  FROM notifications n
 WHERE n.id = ANY(ARRAY(SELECT unnest($1::bigint[]) EXCEPT ALL SELECT id FROM claimed))`

// expandingNumber finds a number of magnitude 1e100 or more, or a nonzero one
// under 1e-100: either prints past wire.MaxNumberChars.
const expandingNumber = `lax $.** ? (@.type() == "number" && (@ >= 1e100 || @ <= -1e100 || (@ != 0 && @ > -1e-100 && @ < 1e-100)))`

// A batch claims QUEUED rows only; ClaimSuspects also takes over a stale
// PROCESSING row.
const (
	claimBatchSQL = claimSQLHead + `n.status = 'QUEUED' AND (n.next_attempt_at IS NULL OR n.next_attempt_at <= $2)` + claimSQLTail
	claimAloneSQL = claimSQLHead + `((n.status = 'QUEUED' AND (n.next_attempt_at IS NULL OR n.next_attempt_at <= $2))
         OR (n.status = 'PROCESSING' AND (n.updated_at < $3 OR n.updated_at > $6)))` + claimSQLTail
)

// distinctIDs keeps the first occurrence of each id, in order, and returns
// where each id stands in the result.
func distinctIDs(ids []int64) ([]int64, map[int64]int) {
	index := make(map[int64]int, len(ids))
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if _, dup := index[id]; !dup {
			index[id] = len(out)
			out = append(out, id)
		}
	}
	return out, index
}
