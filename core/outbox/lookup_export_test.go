package outbox

import "github.com/jackc/pgx/v5/pgxpool"

// ListByRecipientSQL lets the tests EXPLAIN the query ListByRecipient runs.
const ListByRecipientSQL = listByRecipient

// HotPools lets the tests look at the sessions Relay, Claim and Settle run in.
func HotPools(s *Store) (hot, relay *pgxpool.Pool, err error) { return s.hotPools() }
