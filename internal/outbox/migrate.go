package outbox

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
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
// Postgres advisory lock named after the schema: migrations of different
// schemas (parallel tests, two deployments in one database) do not wait for
// each other, and a waiter retries every second rather than goose's default
// five.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var schema *string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	if schema == nil {
		// No schema of the search_path exists: create the first one it
		// names (search_path=daily_quiz in postgres.url gives an example,
		// or a deployment, a schema of its own without a setup step).
		var first string
		if err := pool.QueryRow(ctx, `SELECT coalesce((current_schemas(false) || string_to_array(current_setting('search_path'), ','))[1], '')`).Scan(&first); err != nil {
			return 0, fmt.Errorf("migrate: %w", err)
		}
		first = strings.Trim(strings.TrimSpace(first), `"`)
		if first == "" || first == "$user" {
			return 0, fmt.Errorf("migrate: no schema of the search_path exists; create it first")
		}
		if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{first}.Sanitize()); err != nil {
			return 0, fmt.Errorf("migrate: create schema %q (the search_path's first): %w", first, err)
		}
		if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil || schema == nil {
			return 0, fmt.Errorf("migrate: schema %q created but not in use (%v)", first, err)
		}
	}
	h := fnv.New64a()
	h.Write([]byte("notifyd migrate " + *schema))
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(int64(h.Sum64())), lock.WithLockTimeout(1, 300))
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
