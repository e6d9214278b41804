package outbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/notifyd/notifyd/sdk/wire"
)

// ErrInvalid marks an input the store refused before sending it to Postgres
// (a settlement whose result or outcome is not one it knows); IsRowError
// reports it too, since retrying the same batch cannot help.
var ErrInvalid = errors.New("invalid input")

// IsRowError reports whether err is Postgres refusing the data of a
// statement rather than failing to run it: a data exception (class 22), an
// integrity violation (23) or a program limit such as an index row that is
// too large (54). Such an error fails every retry of the same batch, so the
// caller splits the batch to find the row at fault instead of retrying it
// (delivery's settle, claim and relay do). Any other error (a lost
// connection, a serialization failure, a restart) is worth retrying whole.
func IsRowError(err error) bool {
	if errors.Is(err, ErrInvalid) {
		return true
	}
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || len(pg.Code) < 2 {
		return false
	}
	switch pg.Code[:2] {
	case "22", "23", "54":
		return true
	}
	return false
}

// IsRefusal reports whether err is Postgres' answer refusing the statement,
// of any SQLSTATE class but those meaning it cannot run statements now:
// connection (08), a read-only or aborted transaction (25: a standby after a
// failover), a rollback (40: serialization, deadlock), resources (53), a lock
// or an object in use (55), operator intervention (57: cancel, shutdown),
// system (58), internal (XX). Besides IsRowError's classes, a refusal may be
// one row's (an operator's trigger's RAISE EXCEPTION is P0001) or every
// row's (a column a migration has not added yet, 42703): only a part of the
// batch written alone tells which (delivery's refused.go, tellSplit).
func IsRefusal(err error) bool {
	if errors.Is(err, ErrInvalid) {
		return true
	}
	var pg interface{ SQLState() string }
	if !errors.As(err, &pg) || len(pg.SQLState()) < 2 {
		return false // not Postgres' answer: the connection, a context
	}
	switch pg.SQLState()[:2] {
	case "08", "25", "40", "53", "55", "57", "58", "XX":
		return false
	}
	return true
}

// AloneProbes bounds how many rows of a refused batch ProbeOrder names: each
// is one statement of a single row, so a statement no row can pass costs at
// most this many on every try, however large the batch.
const AloneProbes = 32

// ProbeOrder is the positions of a batch of n rows to write alone, in turn,
// after the batch was refused for a reason of no data class (IsRefusal), until
// one commits and shows the refusal is other rows' own: the first, the last,
// then up to AloneProbes-2 of the others drawn at random, afresh on every try.
// So rows at fault placed where a fixed order looks (the two ends, as an
// earlier version tried only) cannot hide a batch-mate that commits for good;
// only a batch of which no row commits alone is the statement's. Nil for
// fewer than two rows.
func ProbeOrder(n int) []int {
	if n < 2 {
		return nil
	}
	out := []int{0, n - 1}
	if n <= AloneProbes {
		for i := 1; i < n-1; i++ {
			out = append(out, i)
		}
		return out
	}
	for _, i := range rand.Perm(n - 2)[:AloneProbes-2] {
		out = append(out, i+1)
	}
	return out
}

// Finish is the last resort for one row that a batched statement could not
// write (IsRowError): it ends the row in status (SENT or FAILED) writing
// nothing but the status, a bounded reason and, when attempt > 0, an attempt
// log row, so that the row stops being claimed and an operator sees why.
//
// It applies only to a row that is not terminal and, when attempt > 0,
// whose attempts still equal attempt (the settle guard). It reports whether
// it applied. A SENT finish keeps last_error as it was (the reason goes to
// the attempt log only).
func (s *Store) Finish(ctx context.Context, id int64, attempt int, status, reason string) (bool, error) {
	if status != StatusSent && status != StatusFailed {
		return false, fmt.Errorf("finish notification %d: status %q, want SENT or FAILED", id, status)
	}
	outcome := OutcomePermanent
	if status == StatusSent {
		outcome = OutcomeSuccess
	}
	reason = wire.Truncate(StorableText(reason), MaxErrorLen)
	var n int
	err := s.pool.QueryRow(ctx, `
WITH done AS (
    UPDATE notifications
       SET status = $3, next_attempt_at = NULL, updated_at = now(),
           last_error = CASE WHEN $3 = 'FAILED' THEN $4 ELSE last_error END,
           sent_at = CASE WHEN $3 = 'SENT' THEN now() END
     WHERE id = $1 AND status IN ('PENDING', 'QUEUED', 'PROCESSING') AND ($2 = 0 OR attempts = $2)
    RETURNING id, attempts
),
logged AS (
    INSERT INTO notification_attempts (notification_id, attempt, started_at, finished_at, outcome, error)
    SELECT id, attempts, now(), now(), $5, $4 FROM done WHERE $2 > 0
)
SELECT count(*) FROM done`, id, attempt, status, reason, outcome).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("finish notification %d as %s: %w", id, status, err)
	}
	return n == 1, nil
}
