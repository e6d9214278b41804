package httpguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// closedAddr is an address on 127.0.0.1 nobody listens on any more.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// The errors Postgres and Redis clients really return when the service
// is not there are outages; what a live database answers about a statement,
// and a client that went away, are not.
func TestOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := closedAddr(t)

	pool, err := pgxpool.New(ctx, fmt.Sprintf("postgres://u:p@%s/db?connect_timeout=5", addr))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, pgErr := pool.Exec(ctx, "SELECT 1")
	rds := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rds.Close()
	rdsErr := rds.Ping(ctx).Err()
	timedOut, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-timedOut.Done()
	gone, stop := context.WithCancel(ctx)
	stop()

	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"postgres refused", ctx, pgErr, true},
		{"postgres refused, wrapped", ctx, fmt.Errorf("get notification 7: %w", pgErr), true},
		{"redis refused", ctx, rdsErr, true},
		{"redis pool timeout", ctx, redis.ErrPoolTimeout, true},
		{"admin shutdown", ctx, &pgconn.PgError{Code: "57P01"}, true},
		{"crash shutdown", ctx, &pgconn.PgError{Code: "57P02"}, true},
		{"cannot connect now", ctx, &pgconn.PgError{Code: "57P03"}, true},
		{"connection failure", ctx, &pgconn.PgError{Code: "08006"}, true},
		{"too many connections", ctx, &pgconn.PgError{Code: "53300"}, true},
		{"a pool acquire timeout", ctx, fmt.Errorf("acquire: %w", context.DeadlineExceeded), true},
		{"unique violation", ctx, &pgconn.PgError{Code: "23505"}, false},
		{"syntax error", ctx, &pgconn.PgError{Code: "42601"}, false},
		{"the client's deadline", timedOut, context.DeadlineExceeded, false},
		{"the client went away", gone, context.Canceled, false},
		{"a plain error", ctx, errors.New("no such thing"), false},
		{"nil", ctx, nil, false},
	} {
		if tc.err == nil && tc.want {
			t.Fatalf("%s: the client returned no error", tc.name)
		}
		if got := Outage(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: Outage(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
