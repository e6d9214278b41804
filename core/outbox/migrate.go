package outbox

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// migrations holds every table notifyd owns. Later features (schedules, jobs,
// subscribers) add numbered files here; goose applies them in order.
//
//go:embed migrations/*.sql
var migrations embed.FS

// Migrate applies every pending migration to the database (in the pool's
// search_path) and returns how many it applied. Running it again is a no-op.
// Concurrent callers (several instances starting at once) serialise on a
// Postgres advisory lock.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	fsys, err := subFS()
	if err != nil {
		return 0, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithSessionLocker(locker), goose.WithTableName("notifyd_schema_version"))
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	return len(res), nil
}
