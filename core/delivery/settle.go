package delivery

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/notifyd/notifyd/core/outbox"
	"github.com/notifyd/notifyd/core/queue"
)

// settleWorkers flush concurrently, so one batch's Redis round trip overlaps
// the next batch's Postgres commit.
const settleWorkers = 2

type settleItem struct {
	ch *channel
	s  outbox.Settlement
}

// settler group-commits verdicts: each worker takes everything waiting (up
// to delivery.settle_batch), commits it to Postgres in one transaction, then
// acks, retries or dead-letters it in Redis. Under load batches grow by
// themselves; when idle a verdict is committed at once.
type settler struct {
	e    *Engine
	in   chan settleItem
	busy atomic.Int64 // batches being flushed
	wg   sync.WaitGroup
	ctx  context.Context
	stop context.CancelFunc
}

func newSettler(e *Engine) *settler {
	return &settler{e: e, in: make(chan settleItem, 4*e.cfg.Delivery.SettleBatch)}
}

func (s *settler) start() {
	s.ctx, s.stop = context.WithCancel(context.Background())
	for range settleWorkers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.run()
		}()
	}
}

func (s *settler) add(items []settleItem) {
	for _, it := range items {
		select {
		case s.in <- it:
		case <-s.ctx.Done():
			return // killed: the rows stay PROCESSING and are reclaimed
		}
	}
}

// close flushes what is queued, bounded by ctx, and stops the workers. A
// verdict added later is dropped: its row stays PROCESSING and is reclaimed
// once stale, so nothing is lost.
func (s *settler) close(ctx context.Context) {
	for (len(s.in) > 0 || s.busy.Load() > 0) && ctx.Err() == nil {
		sleepCtx(ctx, 2*time.Millisecond)
	}
	s.stop()
	s.wg.Wait()
}

// abandon stops at once, as a crash would.
func (s *settler) abandon() {
	if s.stop != nil {
		s.stop()
	}
}

func (s *settler) run() {
	max := s.e.cfg.Delivery.SettleBatch
	batch := make([]settleItem, 0, max)
	for {
		var it settleItem
		select {
		case it = <-s.in:
		case <-s.ctx.Done():
			return
		}
		s.busy.Add(1)
		batch = append(batch[:0], it)
	drain:
		for len(batch) < max {
			select {
			case it := <-s.in:
				batch = append(batch, it)
			default:
				break drain
			}
		}
		s.flush(batch)
		s.busy.Add(-1)
	}
}

// flush commits one batch, retrying while Postgres is unreachable: the
// verdicts are only in memory, and losing them would resend messages.
func (s *settler) flush(batch []settleItem) {
	e := s.e
	ss := make([]outbox.Settlement, len(batch))
	for i, it := range batch {
		ss[i] = it.s
	}
	var applied []bool
	for failures := 1; ; failures++ {
		var err error
		applied, err = e.store.Settle(s.ctx, ss)
		if err == nil {
			break
		}
		if s.ctx.Err() != nil {
			return
		}
		e.log.Warn("settle failed; retrying", "rows", len(ss), "error", err)
		sleepCtx(s.ctx, retryPause(failures))
	}

	type redisOps struct {
		ack, dead, orphan []int64
		retry             []queue.Item
	}
	type target struct {
		ch *channel
		q  string
	}
	byQueue := map[target]*redisOps{}
	for i, it := range batch {
		if applied[i] {
			e.metrics.Settled(it.ch.name, it.s.Result.String(), it.s.Outcome)
		}
		key := target{it.ch, it.ch.queueOf(it.s.ID)}
		ops := byQueue[key]
		if ops == nil {
			ops = &redisOps{}
			byQueue[key] = ops
		}
		switch {
		case !applied[i]:
			// Not applied: a newer claim owns the row (ours was stale), or
			// an earlier try of this very settle committed and lost its
			// reply, leaving the row SENT, FAILED or QUEUED for a retry.
			// Only the row tells which, and so whether the id is done, due
			// later or dead: leave it in the backup list for the orphan
			// check, whose claim decides.
			ops.orphan = append(ops.orphan, it.s.ID)
		case it.s.Result == outbox.ResultSent:
			ops.ack = append(ops.ack, it.s.ID)
		case it.s.Result == outbox.ResultRetry:
			ops.retry = append(ops.retry, queue.Item{ID: it.s.ID, Due: it.s.NextAttemptAt})
		default:
			ops.dead = append(ops.dead, it.s.ID)
		}
	}
	ctx := s.ctx
	for t, ops := range byQueue {
		ch, q := t.ch, t.q
		all := append(append(append(append([]int64{}, ops.ack...), ops.dead...), ops.orphan...), itemIDs(ops.retry)...)
		if hookCrashed(e.hooks.AfterSettle, ch.name, all) {
			continue
		}
		// A failure here leaves ids in the backup list; the orphan check
		// re-handles them and the claim skips what is already settled.
		if len(ops.ack) > 0 {
			logErr(e, ch, "ack", e.queue.Ack(ctx, q, e.instance, ops.ack))
		}
		if len(ops.retry) > 0 {
			logErr(e, ch, "schedule retry", e.queue.Retry(ctx, q, e.instance, ops.retry))
		}
		if len(ops.dead) > 0 {
			logErr(e, ch, "dead-letter", e.queue.Dead(ctx, q, e.instance, ops.dead))
		}
		ch.untrack(all)
	}
}

func logErr(e *Engine, ch *channel, op string, err error) {
	if err != nil {
		e.log.Warn(op, "channel", ch.name, "error", err)
	}
}
