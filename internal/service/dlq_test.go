package service_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/providers"
	"github.com/notifyd/notifyd/internal/queue"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
)

// listReads is how many times Redis has run a command that reads through a
// list (LRANGE, LREM, RPOP), scripts' own included: INFO commandstats.
func listReads(t *testing.T, b *bundle, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(b.ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"lrange", "lrem", "rpop"} {
			if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
				calls, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				n += calls
			}
		}
	}
	return n
}

// A replay or a purge of a whole channel works in transactions of
// ChunkRows, and after each one dropped that chunk's ids from the channel's
// Redis dead list, which holds every dead letter of the channel: each drop
// read the whole list again, O(n²/1,000) for n dead letters — for a
// million, a thousand passes over up to a million ids. A channel's replay
// or purge moves every dead letter it has, so its dead list is dropped
// once, whole (UNLINK); a chunk's drop then finds it short.
func TestDLQ_ChannelPassDropsTheDeadListOnce(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"replay", "purge"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			srv := testenv.StartRedis(t)
			c := srv.Client()
			db := testenv.NewDB(t)
			cfg := config.Default()
			cfg.Channels = map[string]config.Channel{"orders": {Plugin: "p"}}
			cfg.Redis.Prefix = "svc"
			b := &bundle{ctx: testenv.Context(t), db: db, store: testenv.Store(t, db.Pool), q: queue.New(c, "svc")}
			provs := providers.NewInProcess(map[string]sdk.Provider{}, nil)
			t.Cleanup(provs.Close)
			e, err := delivery.New(delivery.Options{Config: &cfg, Store: b.store, Queue: b.q, Providers: provs, Logger: hclog.NewNullLogger()})
			if err != nil {
				t.Fatal(err)
			}
			if b.ops, err = service.New(service.Options{Config: &cfg, Store: b.store, Engine: e}); err != nil {
				t.Fatal(err)
			}
			const n = 12 * service.ChunkRows
			if _, err := db.Pool.Exec(b.ctx, `INSERT INTO notifications (channel, recipient, payload, status, attempts, last_error)
				SELECT 'orders', 'r', '{}', 'FAILED', 5, 'boom' FROM generate_series(1, $1)`, n); err != nil {
				t.Fatal(err)
			}
			dead := "svc:{ch:orders}:dead"
			for from := 1; from <= n; from += 1000 {
				vals := make([]any, 0, 1000)
				for id := from; id < from+1000; id++ {
					vals = append(vals, strconv.Itoa(id))
				}
				if err := c.LPush(b.ctx, dead, vals...).Err(); err != nil {
					t.Fatal(err)
				}
			}
			before := listReads(t, b, c)
			var moved int64
			if op == "replay" {
				res, err := b.ops.Replay(b.ctx, service.Selector{Channel: "orders"})
				if err != nil || res.Warning != "" {
					t.Fatalf("replay: %v %s", err, res.Warning)
				}
				moved = res.Replayed
			} else {
				res, err := b.ops.Purge(b.ctx, service.Selector{Channel: "orders"})
				if err != nil {
					t.Fatal(err)
				}
				moved = res.Purged
			}
			if moved != n {
				t.Errorf("%s moved %d, want %d", op, moved, n)
			}
			if l := c.LLen(b.ctx, dead).Val(); l != 0 {
				t.Errorf("the dead list holds %d after the %s, want 0", l, op)
			}
			if reads := listReads(t, b, c) - before; reads > 2 {
				t.Errorf("the %s read through Redis lists %d times (once per chunk of %d ids, each over the dead list), want at most 2", op, reads, service.ChunkRows)
			}
		})
	}
}
