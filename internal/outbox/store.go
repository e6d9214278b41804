package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Notification statuses (docs/design.md §2). SENT, FAILED and CANCELLED are terminal.
const (
	StatusPending    = wire.StatusPending
	StatusQueued     = wire.StatusQueued
	StatusProcessing = wire.StatusProcessing
	StatusSent       = wire.StatusSent
	StatusFailed     = wire.StatusFailed
	StatusCancelled  = wire.StatusCancelled
)

// Attempt-log outcomes, one per settled attempt.
const (
	OutcomeSuccess   = "SUCCESS"
	OutcomeTransient = "TRANSIENT"
	OutcomePermanent = "PERMANENT"
	// OutcomeUnknown: the attempt's outcome was lost with the instance that
	// made it; Claim records it when it takes the row over.
	OutcomeUnknown = "UNKNOWN"
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
// notifyd tables. The delivery hot path — Relay, Claim and Settle — runs on
// two pools of its own, made from that pool's config on first use (see
// hotSettings); Close closes them.
type Store struct {
	pool   *pgxpool.Pool
	logger hclog.Logger

	hotOnce sync.Once
	hotErr  error
	hot     *pgxpool.Pool // Claim and Settle
	relay   *pgxpool.Pool // Relay: hotSettings plus synchronous_commit off
}

// Option configures a Store.
type Option func(*Store)

// WithLogger sets the logger Listen reports lost connections to. The default
// discards.
func WithLogger(l hclog.Logger) Option {
	return func(s *Store) { s.logger = l }
}

// hotSettings are the session settings of the hot path's connections.
//
// Relay, Claim and Settle run there as cached prepared statements on one
// generic plan each: no parse, analysis or planning per call (planning a
// claim or settle of a few hundred ids with their real parameters cost
// 0.4–0.5 ms a call, 10–30% of the statement; the planner estimates an
// `id = ANY(array)` element by element). A generic plan is only as good as
// the statistics it was made with, though, and the hot path's are the worst
// there are: made on an idle, empty outbox at 07:59 and used through the
// 08:00 burst. Left to choose, Postgres made the settle a hash join over a
// bitmap scan of every in-flight row, or a nested loop comparing every id of
// the batch with every other, and the relay a walk of every PENDING row:
// quadratic in the burst (found by notifyd-bench and
// TestStore_HotPlansAreMadeForTheBurst). Every one of these statements reads
// rows by primary key or walks one partial index in order, and joins at
// most its own batch by hash, the right plan at any table size, so the
// session rules the other shapes out rather than trusting estimates. JIT goes too:
// the disable penalty lifts a statement's cost past jit_above_cost, and
// compiling one took 180 ms.
var hotSettings = map[string]string{
	"plan_cache_mode":   "force_generic_plan",
	"enable_seqscan":    "off",
	"enable_bitmapscan": "off",
	"enable_nestloop":   "off",
	"enable_mergejoin":  "off",
	"enable_sort":       "off",
	"jit":               "off",
}

// relayConns bounds the relay's pool: an engine runs one relay at a time,
// and a second connection covers an overlapping call (a second engine on
// the same Store, a test).
const relayConns = 2

// hotPools returns the hot path's pools, making them on first use from the
// Store's pool config (same server, credentials and search_path). They
// connect lazily; the claim and settle pool may open as many connections as
// the main pool, the relay's two.
func (s *Store) hotPools() (hot, relay *pgxpool.Pool, err error) {
	s.hotOnce.Do(func() {
		mk := func(maxConns int32, extra map[string]string) (*pgxpool.Pool, error) {
			cfg := s.pool.Config()
			params := make(map[string]string, len(cfg.ConnConfig.RuntimeParams)+len(hotSettings)+len(extra))
			for k, v := range cfg.ConnConfig.RuntimeParams {
				params[k] = v
			}
			for k, v := range hotSettings {
				params[k] = v
			}
			for k, v := range extra {
				params[k] = v
			}
			cfg.ConnConfig.RuntimeParams = params
			cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
			cfg.MaxConns, cfg.MinConns = maxConns, 0
			return pgxpool.NewWithConfig(context.Background(), cfg)
		}
		if s.hot, s.hotErr = mk(s.pool.Config().MaxConns, nil); s.hotErr != nil {
			s.hotErr = fmt.Errorf("outbox hot-path pool: %w", s.hotErr)
			return
		}
		// A relay lost in a Postgres crash leaves its rows PENDING: the claim
		// skips their ids (it only sends QUEUED rows) and the next relay
		// queues them again, so its commit need not wait for the WAL flush,
		// and a single notification's wake-up path has no fsync in it.
		if s.relay, s.hotErr = mk(relayConns, map[string]string{"synchronous_commit": "off"}); s.hotErr != nil {
			s.hot.Close()
			s.hotErr = fmt.Errorf("outbox relay pool: %w", s.hotErr)
		}
	})
	return s.hot, s.relay, s.hotErr
}

// Close closes the hot path's pools, if they were made; the pool given to
// New stays open (it is the caller's). Call it when the Store is done with.
func (s *Store) Close() {
	s.hotOnce.Do(func() { s.hotErr = errors.New("outbox store is closed") })
	if s.hot != nil {
		s.hot.Close()
	}
	if s.relay != nil {
		s.relay.Close()
	}
}

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
