package outbox

import (
	"context"
	"errors"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Notification statuses (DESIGN §2). SENT, FAILED and CANCELLED are terminal.
const (
	StatusPending    = "PENDING"
	StatusQueued     = "QUEUED"
	StatusProcessing = "PROCESSING"
	StatusSent       = "SENT"
	StatusFailed     = "FAILED"
	StatusCancelled  = "CANCELLED"
)

// Attempt-log outcomes, one per settled attempt.
const (
	OutcomeSuccess   = "SUCCESS"
	OutcomeTransient = "TRANSIENT"
	OutcomePermanent = "PERMANENT"
)

// ErrNotFound is returned by Get and GetByIdempotencyKey when no row matches.
var ErrNotFound = errors.New("notification not found")

// DBTX is what Insert needs from a connection: *pgxpool.Pool, pgx.Tx and
// *pgx.Conn all satisfy it, so an application can write notifications inside
// its own business transaction (the transactional outbox).
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store runs the outbox queries on a pool whose search_path holds the
// notifyd tables.
type Store struct {
	pool   *pgxpool.Pool
	logger hclog.Logger
}

// Option configures a Store.
type Option func(*Store)

// WithLogger sets the logger Listen reports lost connections to. The default
// discards.
func WithLogger(l hclog.Logger) Option {
	return func(s *Store) { s.logger = l }
}

// planEachTime runs a hot batch statement (relay, claim, settle) as the
// unnamed prepared statement, which Postgres plans at every call with the
// real parameters, still in one round trip. A named (cached) statement
// switches to a generic plan after five runs, and a generic plan made while
// the table was empty — an idle outbox at 07:59 — kept the relay on a nested
// loop over every PENDING row during the 08:00 burst: 5–10× slower.
const planEachTime = pgx.QueryExecModeExec

// New returns a Store on pool.
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{pool: pool, logger: hclog.NewNullLogger()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Pool is the pool the Store runs on.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
