package notifyd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/sdk"
)

// serviceError is a failure to reach Postgres or Redis at start. What
// waiting cannot cure — the server refused these credentials, this
// database, this Redis DB — is final: Start (and `notifyd serve`, which
// would otherwise wait for it forever) fails at once naming the key to
// change, as a bad config does. Anything else — refused, timed out, the
// server starting up — is waited on, its short reason shown on /readyz.
// Its text is redacted; Unwrap gives the driver's error to branch on.
type serviceError struct {
	key    string // the config key to change: postgres.url, redis.url
	msg    string // redacted, one line
	reason string // short and redacted: what /readyz shows beside "waiting"
	final  bool
	cause  error
}

func (e *serviceError) Error() string {
	var ev *queue.EvictionError
	if e.final && errors.As(e.cause, &ev) {
		// Redis' own configuration is what to change, not the key.
		return fmt.Sprintf("%s: %s; waiting will not change this", e.key, ev)
	}
	if e.final {
		return fmt.Sprintf("%s: %s; waiting will not change this, fix %s", e.key, e.msg, e.key)
	}
	return e.msg
}

func (e *serviceError) Unwrap() error { return e.cause }

// final reports whether err is one no wait cures.
func final(err error) bool {
	var se *serviceError
	return errors.As(err, &se) && se.final
}

// finalPostgres: Postgres answered and refused the connection for good. At
// connect the server judges what postgres.url asks for — the role and its
// password (class 28), the database (3D000), the CONNECT privilege (42501),
// and its query parameters as session settings (one it does not know,
// 42704; a value it refuses, 22023; one it cannot set, 55P02, 25001) — and
// asking again asks for the same. What passes by itself is waited on: the
// server's state (class 57: starting up, shutting down), its resources (53:
// too many connections, out of memory or disk), its own failures (58, XX),
// the connection (08), and every network error.
func finalPostgres(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) != 5 {
		return false
	}
	switch pe.Code[:2] {
	case "08", "53", "57", "58", "XX":
		return false
	}
	return true
}

// finalRedis: Redis answered and refused the credentials or the database
// number, or its maxmemory-policy evicts keys (queue.ErrEvicting: notifyd
// will not use it until it is set to noeviction). LOADING, BUSY, MASTERDOWN
// and network errors are waited on.
func finalRedis(err error) bool {
	if errors.Is(err, queue.ErrEvicting) {
		return true
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range []string{"NOAUTH", "WRONGPASS", "NOPERM", "ERR DB index is out of range",
		"ERR invalid DB index", "ERR invalid password", "ERR AUTH", "ERR Client sent AUTH"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// maxReason bounds the reason /readyz shows.
const maxReason = 200

// shortReason is what went wrong, without the driver's preamble: the
// server's own words, or the network error and the address it was about
// ("connection refused (127.0.0.1:5432)"). Redacted and bounded.
func shortReason(err error) string {
	var (
		pe  *pgconn.PgError
		dns *net.DNSError
		op  *net.OpError
		re  redis.Error
	)
	var s string
	switch {
	case errors.As(err, &pe):
		s = fmt.Sprintf("%s (SQLSTATE %s)", pe.Message, pe.Code)
	case errors.As(err, &re):
		s = re.Error()
	case errors.As(err, &dns):
		s = fmt.Sprintf("cannot resolve %s: %s", dns.Name, dns.Err)
	case errors.As(err, &op):
		why := op.Err
		var sys *os.SyscallError
		if errors.As(why, &sys) {
			why = sys.Err
		}
		s = why.Error()
		if op.Timeout() {
			s = "timed out"
		}
		if op.Addr != nil {
			s += " (" + op.Addr.String() + ")"
		}
	case errors.Is(err, context.DeadlineExceeded):
		s = "no answer (timed out)"
	default:
		s = oneLine(err)
	}
	s = sdk.RedactURLs(s)
	if len(s) > maxReason {
		s = s[:maxReason] + "…"
	}
	return s
}
