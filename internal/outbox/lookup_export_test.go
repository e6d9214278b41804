package outbox

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// ListByRecipientSQL lets the tests EXPLAIN the query ListByRecipient runs.
var ListByRecipientSQL = listByRecipient(notificationColumns)

// The claim's statements and the columns every read selects, for the tests
// that EXPLAIN them (printonce_test.go).
const (
	ClaimBatchSQL = claimBatchSQL
	ClaimAloneSQL = claimAloneSQL
)

var NotificationColumns = notificationColumns // a var: its times are readTime's

// HotPools lets the tests look at the sessions Relay, Claim and Settle run in.
func HotPools(s *Store) (hot, relay *pgxpool.Pool, err error) { return s.hotPools() }

// MigrateUpTo applies the migrations up to version only, as a database
// created by an older notifyd would have them.
func MigrateUpTo(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	fsys, err := subFS()
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithTableName("notifyd_schema_version"))
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}
