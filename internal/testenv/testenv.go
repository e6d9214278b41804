// Package testenv gives every test real, isolated services: its own migrated
// Postgres schema and its own Redis key prefix, so packages and tests run in
// parallel. A service that does not answer fails the test run loudly with the
// command that starts it; tests never skip for a missing service.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/internal/outbox"
)

// Environment variables that point tests at services.
const (
	EnvDatabaseURL = "NOTIFYD_TEST_DATABASE_URL"
	EnvRedisURL    = "NOTIFYD_TEST_REDIS_URL"

	defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/notifyd_test?sslmode=disable"
	defaultRedisURL    = "redis://127.0.0.1:6379/0"
	howToStart         = "start the services with `make services` (scripts/services)"
)

// DatabaseURL is the base database tests create their schemas in.
func DatabaseURL() string { return envOr(EnvDatabaseURL, defaultDatabaseURL) }

// RedisURL is the Redis server tests use, each under its own key prefix.
func RedisURL() string { return envOr(EnvRedisURL, defaultRedisURL) }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// DB is one test's migrated schema.
type DB struct {
	Pool   *pgxpool.Pool
	URL    string // connection URL whose search_path is the schema
	Schema string
}

var (
	pingPG, pingRedis     sync.Once
	errPG, errRedis       error
	nonIdent              = regexp.MustCompile(`[^a-z0-9_]+`)
	schemaNameMaxTestPart = 30
)

// NewDB creates a fresh schema, migrates it with every notifyd migration and
// drops it when the test ends.
func NewDB(t testing.TB) *DB {
	t.Helper()
	db := NewSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := outbox.Migrate(ctx, db.Pool); err != nil {
		t.Fatalf("testenv: migrate schema %s: %v", db.Schema, err)
	}
	return db
}

// NewSchema creates a fresh, empty schema (no migrations) and drops it when
// the test ends.
func NewSchema(t testing.TB) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := DatabaseURL()
	pingPG.Do(func() { errPG = ping(ctx, base) })
	if errPG != nil {
		t.Fatalf("testenv: Postgres at %s does not answer (%v); %s", redact(base), errPG, howToStart)
	}
	name := strings.ToLower(t.Name())
	name = nonIdent.ReplaceAllString(name, "_")
	if len(name) > schemaNameMaxTestPart {
		name = name[:schemaNameMaxTestPart]
	}
	schema := "t_" + name + "_" + randHex(4)

	admin, err := pgxpool.New(ctx, base)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("testenv: create schema %s: %v", schema, err)
	}
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatalf("testenv: connect to schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgxpool.New(ctx, base)
		if err != nil {
			t.Errorf("testenv: drop schema %s: %v", schema, err)
			return
		}
		defer admin.Close()
		if _, err := admin.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("testenv: drop schema %s: %v", schema, err)
		}
	})
	return &DB{Pool: pool, URL: u.String(), Schema: schema}
}

// Redis is one test's Redis client and key prefix.
type Redis struct {
	Client *redis.Client
	URL    string
	Prefix string
}

// NewRedis returns a client on the test Redis with a prefix of the test's own;
// every key under the prefix is deleted when the test ends. Tests that need to
// wipe the whole server (FLUSHALL) must start their own with StartRedis.
func NewRedis(t testing.TB) *Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := RedisURL()
	opts, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("testenv: %s=%q: %v", EnvRedisURL, u, err)
	}
	c := redis.NewClient(opts)
	pingRedis.Do(func() { errRedis = c.Ping(ctx).Err() })
	if errRedis != nil {
		t.Fatalf("testenv: Redis at %s does not answer (%v); %s", redact(u), errRedis, howToStart)
	}
	prefix := "t" + randHex(6)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		DeletePrefix(ctx, t, c, prefix)
		_ = c.Close()
	})
	return &Redis{Client: c, URL: u, Prefix: prefix}
}

// DeletePrefix removes every key starting with prefix (and any hash-tagged
// key whose tag starts with it), as a Redis that lost one tenant's data.
func DeletePrefix(ctx context.Context, t testing.TB, c *redis.Client, prefix string) {
	t.Helper()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			c.Del(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		c.Del(ctx, keys...)
	}
	if err := iter.Err(); err != nil {
		t.Errorf("testenv: delete keys %s*: %v", prefix, err)
	}
}

func ping(ctx context.Context, dsn string) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	return pool.Ping(ctx)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

// Context is a context for a test's calls, cancelled when the test ends and
// bounded as a guard against a hang: 10 minutes, not a timing. It was 2,
// which a test of a 100,000-id list overran (145 s) beside the whole suite
// and two CPU burners on a slow host (rehearsal 62).
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Store returns an outbox.Store on pool whose hot-path pools are closed when
// the test ends.
func Store(t testing.TB, pool *pgxpool.Pool) *outbox.Store {
	t.Helper()
	s := outbox.New(pool)
	t.Cleanup(s.Close)
	return s
}

// Statuses counts notifications by status: SENT, FAILED and every other
// (unfinished) one, among those the condition selects ("channel = $1").
func Statuses(ctx context.Context, t testing.TB, pool *pgxpool.Pool, where string, args ...any) (sent, failed, other int) {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT status, count(*) FROM notifications WHERE `+where+` GROUP BY status`, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		switch st {
		case "SENT":
			sent = n
		case "FAILED":
			failed = n
		default:
			other += n
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sent, failed, other
}
