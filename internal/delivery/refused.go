package delivery

import (
	"errors"

	"github.com/notifyd/notifyd/internal/outbox"
)

// A batched statement Postgres refuses for one row's data class
// (outbox.IsRowError: 22, 23, 54) is split until that row stands alone
// (claim.go, settle.go). Postgres refuses a row in other ways nobody lists:
// an operator's trigger that raises an exception (RAISE EXCEPTION is
// SQLSTATE P0001), a row-level security policy (42501). Such a refusal
// failed the whole batch on every try: one row held a settle worker for
// good, and with both held every channel's verdicts went uncommitted, or
// its batch-mates were never claimed. But the same classes also come from a
// statement no row can pass (a column a migration has not added yet: 42703),
// where splitting would end every row FAILED. So the class alone does not
// decide: a row of the batch that commits alone says the statement is
// fine, and the error is then the other rows' own.

// refusal is what the refused statement's rows may be at fault for.
type refusal int

const (
	// notRefused: Postgres could not run the statement now (unreachable,
	// out of resources, a rollback, a shutdown, a read-only standby): the
	// batch is tried again whole.
	notRefused refusal = iota
	// rowRefused: one row's data (outbox.IsRowError), or any refusal once a
	// row of the batch committed alone: the batch is split to find it.
	rowRefused
	// maybeRowRefused: refused for a reason of no data class; whether a row
	// is at fault is for a row committing alone to tell.
	maybeRowRefused
)

// refusedFor classifies err; isolating says a row of the batch it came from
// committed alone where the whole failed.
func refusedFor(err error, isolating bool) refusal {
	if outbox.IsRowError(err) {
		return rowRefused
	}
	var pg interface{ SQLState() string }
	if !errors.As(err, &pg) || len(pg.SQLState()) < 2 {
		return notRefused // not Postgres' answer: the connection, a context
	}
	switch pg.SQLState()[:2] {
	// Postgres unable to run it now: connection (08), a read-only or
	// aborted transaction (25: a standby after a failover), a rollback
	// (40: serialization, deadlock), resources (53), a lock or an object
	// in use (55), operator intervention (57: cancel, shutdown), system
	// (58), internal (XX). These pass; a row committing alone meanwhile
	// proves nothing.
	case "08", "25", "40", "53", "55", "57", "58", "XX":
		return notRefused
	}
	if isolating {
		return rowRefused
	}
	return maybeRowRefused
}
