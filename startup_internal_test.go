package notifyd

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/internal/queue"
)

// redisErr is a reply error as go-redis returns one.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

var _ redis.Error = redisErr("")

// TestFinal: the refusals no wait cures, and the ones that pass — the
// server starting up or shutting down, too many connections, Redis loading
// its data — which the real servers cannot be made to give on demand.
func TestFinal(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{
		"28P01": true, "28000": true, "3D000": true, "42501": true,
		"57P03": false, "57P01": false, "53300": false, "08006": false,
		// postgres.url's session settings the server refuses at connect:
		// unknown (statment_timeout=5s), a bad value (TimeZone=Nowhere),
		// one that needs a restart (shared_buffers), one no session sets.
		"42704": true, "22023": true, "55P02": true, "25001": true,
		// What passes by itself: resources, the server's own trouble.
		"53200": false, "53100": false, "58000": false, "XX000": false, "08P01": false,
	} {
		err := fmt.Errorf("connect: %w", &pgconn.PgError{Severity: "FATAL", Code: code, Message: "m"})
		if got := finalPostgres(err); got != want {
			t.Errorf("finalPostgres(SQLSTATE %s) = %v, want %v", code, got, want)
		}
	}
	for msg, want := range map[string]bool{
		"NOAUTH Authentication required.": true, "WRONGPASS invalid username-password pair": true,
		"ERR DB index is out of range": true, "NOPERM this user has no permissions": true,
		"LOADING Redis is loading the dataset in memory": false, "BUSY Redis is busy": false,
		"MASTERDOWN Link with MASTER is down": false,
	} {
		if got := finalRedis(fmt.Errorf("ping: %w", redisErr(msg))); got != want {
			t.Errorf("finalRedis(%q) = %v, want %v", msg, got, want)
		}
	}
	// A Redis that evicts keys: no wait sets it to noeviction.
	if !finalRedis(fmt.Errorf("ping: %w", &queue.EvictionError{Addr: "r:6379", Policy: "allkeys-lru"})) {
		t.Error("finalRedis(an evicting Redis) = false, want true")
	}
}
