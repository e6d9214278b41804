package outbox

import (
	"context"
	"encoding/json"

	"github.com/notifyd/notifyd/sdk/txoutbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// The outbox insert has one implementation, sdk/txoutbox's: the daemon's
// writers (the API, schedules, campaigns) and an application's own
// transaction (txoutbox.EnqueueTx) run the same statement and the same
// checks. The names below keep the outbox's vocabulary for core's callers.

// NewNotification is one notification to write into the outbox.
type NewNotification = txoutbox.Row

// Inserted is the outcome of one NewNotification, in input order.
type Inserted = txoutbox.Inserted

// Insert writes ns as PENDING notifications in one statement through db, so
// an application can call it inside its own transaction (the transactional
// outbox): a rollback leaves nothing behind. A repeated idempotency key
// returns the original id with Duplicate set.
func Insert(ctx context.Context, db DBTX, ns []NewNotification) ([]Inserted, error) {
	return txoutbox.Insert(ctx, db, ns)
}

// Insert writes ns through the Store's pool; see the package-level Insert.
func (s *Store) Insert(ctx context.Context, ns []NewNotification) ([]Inserted, error) {
	return txoutbox.Insert(ctx, s.pool, ns)
}

// Validate checks a batch for Insert and names the first bad field and its
// index.
func Validate(ns []NewNotification) error { return txoutbox.Validate(ns) }

// CheckText rejects what Postgres text cannot hold (invalid UTF-8, NUL),
// saying which ("is not valid UTF-8"): every door checks the text it takes
// with it.
func CheckText(s string) error { return wire.CheckText(s) }

// checkText is CheckText for this package's own fields.
func checkText(s string) error { return wire.CheckText(s) }

// JSONEscapeProblem says what in valid JSON b Postgres cannot store; see
// wire.JSONEscapeProblem.
func JSONEscapeProblem(b []byte) string { return wire.JSONEscapeProblem(b) }

// checkJSON rejects what jsonb cannot hold.
func checkJSON(b json.RawMessage) error { return wire.CheckJSON(b) }
