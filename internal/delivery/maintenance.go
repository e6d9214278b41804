package delivery

import (
	"context"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
)

// resyncPage is how many outbox rows one sweep or resync query reads.
const resyncPage = 5000

// maintenanceLoop runs the timers that keep the queues honest: lease renewal
// and reaping, retry promotion, the sweeper, the epoch check and the orphan
// check. Leases have their own goroutine so a slow sweep never lets one lapse.
func (e *Engine) maintenanceLoop(ctx context.Context) {
	d := e.cfg.Delivery
	go e.every(ctx, d.LeaseTTL/3, e.renewAndReap)
	go e.every(ctx, d.PromoteInterval, e.promote)
	go e.every(ctx, d.EpochInterval, e.checkEpoch)
	go e.every(ctx, time.Second, e.refreshPaused)
	go e.every(ctx, time.Second, e.compactCounts)
	go e.every(ctx, e.cfg.Retention.Interval, e.retain)
	go e.every(ctx, max(d.LeaseTTL/3, time.Second), func(ctx context.Context) {
		for _, ch := range e.channels {
			if ch.running() {
				ch.checkOrphans(ctx)
			}
		}
	})
	e.every(ctx, d.SweepInterval, e.sweep)
}

// compactCounts folds the status-count deltas into the counts
// (outbox.CompactCounts), so reading them stays a few rows.
func (e *Engine) compactCounts(ctx context.Context) {
	if _, err := e.store.CompactCounts(ctx); err != nil && ctx.Err() == nil {
		e.log.Warn("compact notification counts", "error", err)
	}
}

// retain runs one retention pass (outbox.Retain); another instance's pass
// makes this one a no-op.
func (e *Engine) retain(ctx context.Context) {
	r := e.cfg.Retention
	pass, err := e.store.Retain(ctx, outbox.Retention{
		Sent: r.Sent, Cancelled: r.Cancelled, Failed: r.Failed, Batch: r.Batch, Rescan: r.Rescan,
	}, e.now())
	switch {
	case err != nil && ctx.Err() == nil:
		e.log.Warn("retention pass", "error", err, "deleted", pass.Deleted)
	case pass.Deleted > 0:
		e.log.Info("retention pass", "deleted", pass.Deleted, "batches", pass.Batches, "took", pass.Duration.Round(time.Millisecond))
	}
}

func (e *Engine) every(ctx context.Context, interval time.Duration, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}

func (e *Engine) renewAndReap(ctx context.Context) {
	now := e.now()
	for _, ch := range e.channels {
		if !ch.running() {
			continue
		}
		for _, q := range ch.queues {
			if err := e.queue.Renew(ctx, q, e.instance, e.cfg.Delivery.LeaseTTL); err != nil {
				e.log.Warn("renew lease", "queue", q, "error", err)
			}
			n, err := e.queue.Reap(ctx, q, now)
			if err != nil {
				e.log.Warn("reap expired leases", "queue", q, "error", err)
			} else if n > 0 {
				e.log.Info("reaped a dead instance's backup list", "queue", q, "ids", n)
			}
		}
	}
}

func (e *Engine) promote(ctx context.Context) {
	const max = 1000
	now := e.now()
	for _, ch := range e.channels {
		if !ch.running() {
			continue
		}
		for _, q := range ch.queues {
			for {
				n, err := e.queue.Promote(ctx, q, now, max)
				if err != nil {
					e.log.Warn("promote due retries", "queue", q, "error", err)
					break
				}
				if n < max {
					break
				}
			}
		}
	}
}

func (e *Engine) checkEpoch(ctx context.Context) {
	changed, err := e.queue.Epoch(ctx, e.allQueues()...)
	switch {
	case changed:
		e.log.Warn("Redis lost its data (epoch changed); resyncing from Postgres")
		e.resync(ctx, "epoch")
	case err != nil:
		return // Redis (or one shard) is down; the next tick asks again
	case e.resyncPending.Load():
		e.resync(ctx, "retry")
	}
}

// sweep pushes again QUEUED/PROCESSING rows untouched for sweep_after: a
// relay whose push failed, a crash between commit and push. The push is
// idempotent, so rows still queued are left as they are.
func (e *Engine) sweep(ctx context.Context) {
	e.pushNonTerminal(ctx, e.now().Add(-e.cfg.Delivery.SweepAfter), "sweep")
}

// resync pushes every non-terminal row, for a Redis that lost its data and
// at start. A pass that fails (Postgres or Redis unreachable) is tried again
// on the next epoch tick until one completes: rows queued since the sweep
// horizon are in no Redis queue, and the sweeper would leave them waiting
// for sweep_after.
//
// A relay whose reply was lost may still be running, or committing, on the
// server when its error reaches the engine, and a pass that reads the outbox
// before that commit misses its rows (TestEngine_ReplyLost found it, under
// CI's load). So after a failed relay the pass is repeated until one has
// started relayGrace after the failure.
func (e *Engine) resync(ctx context.Context, why string) {
	e.resyncMu.Lock()
	defer e.resyncMu.Unlock()
	start := e.now()
	err := e.pushNonTerminal(ctx, e.now().Add(24*time.Hour), why)
	e.resyncState.Lock()
	e.resyncPending.Store(err != nil || start.Before(e.relayFailedAt.Add(relayGrace)))
	e.resyncState.Unlock()
}

// relayGrace is how long a relay statement whose reply was lost is given to
// finish on the server before a resync pass is trusted to see its rows.
const relayGrace = 5 * time.Second

func (e *Engine) pushNonTerminal(ctx context.Context, olderThan time.Time, why string) error {
	var after int64
	total := 0
	for ctx.Err() == nil {
		rows, err := e.store.Sweep(ctx, olderThan, after, resyncPage)
		if err != nil {
			e.log.Warn("read rows to re-push", "why", why, "error", err)
			return err
		}
		if len(rows) == 0 {
			break
		}
		if _, err := e.pushQueued(ctx, rows); err != nil {
			e.log.Warn("re-push rows", "why", why, "error", err)
			return err
		}
		total += len(rows)
		after = rows[len(rows)-1].ID
	}
	if total > 0 {
		e.log.Debug("re-pushed non-terminal rows", "why", why, "rows", total)
	}
	return ctx.Err()
}

func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	select {
	case <-t.C:
	default:
	}
	t.Reset(d)
}
