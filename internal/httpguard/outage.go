package httpguard

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
)

// Outage reports whether err says a dependency (Postgres or Redis) cannot be
// reached or is going away, rather than that the request or notifyd is
// wrong: the doors answer it 503 with Retry-After, never 500 (docs/design.md
// §10). One classifier, typed checks only, for the API and the dashboard.
//
// ctx is the request's: a deadline that passed inside notifyd (a pool's
// acquire timeout) is an outage, one of a client that went away is not.
func Outage(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false // the client went away or ran out of time: its own doing
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case pg.Code == "57P01", pg.Code == "57P02", pg.Code == "57P03": // admin or crash shutdown, cannot connect now
			return true
		case strings.HasPrefix(pg.Code, "08"): // connection exception
			return true
		case pg.Code == "53300": // too many connections
			return true
		}
		return false // Postgres answered: the statement failed, not the link
	}
	var (
		connect *pgconn.ConnectError
		netErr  net.Error
	)
	switch {
	case errors.As(err, &connect), errors.As(err, &netErr):
		return true // dial refused, reset, a timeout on the socket (context.DeadlineExceeded is a net.Error too)
	case errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted), errors.Is(err, redis.ErrClosed):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true // the server closed the connection mid-answer
	case pgconn.Timeout(err), errors.Is(err, context.DeadlineExceeded):
		return true // a pool acquire or a dial timed out (the client's ctx is alive)
	}
	return false
}
