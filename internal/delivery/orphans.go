// The orphan check: ids in this instance's backup list that nothing in the
// process is working on.

package delivery

import (
	"context"
	"errors"

	"github.com/notifyd/notifyd/internal/queue"
)

func (c *channel) track(ids []int64) {
	c.mu.Lock()
	for _, id := range ids {
		c.inflight[id] = struct{}{}
	}
	c.mu.Unlock()
}

func (c *channel) untrack(ids []int64) {
	c.mu.Lock()
	for _, id := range ids {
		delete(c.inflight, id)
	}
	c.mu.Unlock()
}

// checkOrphans re-handles ids that sit in this instance's backup list with
// nothing in this process working on them — left by a Redis or Postgres
// error between two steps. An id must be idle in two consecutive checks, so
// one just fetched and not yet tracked is never taken for an orphan.
func (c *channel) checkOrphans(ctx context.Context) {
	var ids []int64
	for _, q := range c.queues {
		got, err := c.e.queue.Pending(ctx, q, c.e.instance)
		if err != nil {
			// Said, not swallowed: an error wrapping queue.ErrBadMember
			// names members Pending has just dropped, reported this once.
			c.log.Warn("orphan check: read own backup list", "queue", q, "error", err)
			if !errors.Is(err, queue.ErrBadMember) {
				return
			}
		}
		ids = append(ids, got...)
	}
	c.mu.Lock()
	next := map[int64]struct{}{}
	var orphans []int64
	for _, id := range ids {
		if _, busy := c.inflight[id]; busy {
			continue
		}
		if _, seen := c.suspects[id]; seen {
			orphans = append(orphans, id)
		} else {
			next[id] = struct{}{}
		}
	}
	c.suspects = next
	c.mu.Unlock()
	if len(orphans) > 0 {
		c.log.Info("re-handling orphaned backup-list ids", "ids", len(orphans))
	}
	for len(orphans) > 0 && ctx.Err() == nil {
		n := min(len(orphans), c.cfg.BatchSize)
		c.acquire(ctx, n)
		c.handle(ctx, orphans[:n])
		orphans = orphans[n:]
	}
}
