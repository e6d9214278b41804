package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/notifyd/notifyd/core/outbox"
	"github.com/notifyd/notifyd/core/queue"
)

// resyncPage is how many outbox rows one sweep or resync query reads.
const resyncPage = 5000

// relayLoop moves due PENDING rows to QUEUED and pushes them, woken by
// LISTEN/NOTIFY on insert and, as the fallback, by a timer that also fires at
// the next due time of a scheduled row.
func (e *Engine) relayLoop(ctx context.Context) {
	wake := make(chan struct{}, 1)
	// Listen reconnects by itself until ctx ends (logging each loss through
	// the store's logger); meanwhile the relay polls every relay_interval.
	go func() { _ = e.store.Listen(ctx, wake) }()
	timer := time.NewTimer(0)
	defer timer.Stop()
	var failures int
	var unpushed []outbox.Queued
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-timer.C:
		}
		next, err := e.relayDue(ctx, &unpushed)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			e.relayStall.failing(e.now())
			e.log.Warn("relay", "error", err)
			resetTimer(timer, retryPause(failures))
			continue
		}
		failures = 0
		e.relayStall.ok()
		wait := e.cfg.Delivery.RelayInterval
		if !next.IsZero() {
			wait = min(wait, max(time.Until(next), time.Millisecond))
		}
		resetTimer(timer, wait)
	}
}

// relayDue pushes what an earlier pass relayed but could not push, then
// relays every due row, a batch at a time, and returns when the next
// scheduled row falls due (zero when none). A failed push ends the pass: its
// rows are committed QUEUED yet in no Redis queue, so they are kept in
// *unpushed and pushed first on the next pass rather than left to the
// sweeper (sweep_after), and relaying more into a Redis that is down would
// only strand more. If the process dies meanwhile, the sweeper has them.
//
// Only the rows whose own queue's push failed are kept: on a Redis Cluster
// one shard can refuse while the others take theirs, and pushing the taken
// ones again on every pass would queue again those delivered meanwhile (the
// claim skips them, but each costs a claim, and a FAILED one came back to
// the dead list each time).
func (e *Engine) relayDue(ctx context.Context, unpushed *[]outbox.Queued) (time.Time, error) {
	if len(*unpushed) > 0 {
		failed, err := e.pushQueued(ctx, *unpushed)
		*unpushed = failed
		if err != nil {
			return time.Time{}, fmt.Errorf("push %d relayed rows: %w", len(failed), err)
		}
	}
	batch := e.cfg.Delivery.RelayBatch
	for {
		queued, err := e.relay(ctx, batch)
		if err != nil {
			// The statement may have committed with its reply lost (pgx
			// cannot always tell): rows QUEUED in no Redis queue, which
			// only a resync pass finds before the sweeper does.
			e.resyncState.Lock()
			e.relayFailedAt = e.now()
			e.resyncPending.Store(true)
			e.resyncState.Unlock()
			return time.Time{}, err
		}
		if failed, err := e.pushQueued(ctx, queued); err != nil {
			*unpushed = failed
			return time.Time{}, fmt.Errorf("push %d relayed rows: %w", len(failed), err)
		}
		if len(queued) < batch {
			break
		}
	}
	return e.store.NextDue(ctx)
}

// pushQueued pushes outbox rows into their channels' queues (idempotent),
// each with its next_attempt_at so a retry keeps its backoff. It returns the
// rows of the queues whose push failed, and the first error.
func (e *Engine) pushQueued(ctx context.Context, rows []outbox.Queued) ([]outbox.Queued, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	byQueue := map[string][]outbox.Queued{}
	for _, r := range rows {
		q := e.queueOf(r.Channel, r.ID)
		byQueue[q] = append(byQueue[q], r)
	}
	var failed []outbox.Queued
	var firstErr error
	for q, rs := range byQueue {
		items := make([]queue.Item, len(rs))
		for i, r := range rs {
			items[i] = queue.Item{ID: r.ID, Due: r.NextAttemptAt}
		}
		if _, err := e.queue.Push(ctx, q, items); err != nil {
			failed = append(failed, rs...)
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	return failed, firstErr
}

// maintenanceLoop runs the timers that keep the queues honest: lease renewal
// and reaping, retry promotion, the sweeper, the epoch check and the orphan
// check. Leases have their own goroutine so a slow sweep never lets one lapse.
func (e *Engine) maintenanceLoop(ctx context.Context) {
	d := e.cfg.Delivery
	go e.every(ctx, d.LeaseTTL/3, e.renewAndReap)
	go e.every(ctx, d.PromoteInterval, e.promote)
	go e.every(ctx, d.EpochInterval, e.checkEpoch)
	go e.every(ctx, time.Second, e.refreshPaused)
	go e.every(ctx, max(d.LeaseTTL/3, time.Second), func(ctx context.Context) {
		for _, ch := range e.channels {
			if ch.running() {
				ch.checkOrphans(ctx)
			}
		}
	})
	e.every(ctx, d.SweepInterval, e.sweep)
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
