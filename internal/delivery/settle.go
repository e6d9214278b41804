package delivery

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/queue"
)

// settleWorkers flush concurrently, so one batch's Redis round trip overlaps
// the next batch's Postgres commit.
const settleWorkers = 2

type settleItem struct {
	ch *channel
	s  outbox.Settlement
	// dropped: Postgres refused even the minimal write of this row.
	dropped bool
	// span is the attempt's span (trace.go), nil when untraced; the
	// flush that commits the verdict ends it.
	span trace.Span
	// done, when set, is told once the flush has committed the verdict (or
	// given up, killed): what the lane's send of suspects waits for.
	done *sync.WaitGroup
	// slots are the channel's send slots this verdict holds until it is
	// committed (sendPart): a message the provider took stays in its slot
	// until SENT is committed, so what a crash can send twice — the
	// verdicts not yet committed — is bounded by the channel's slots
	// (concurrency + Prefetch), not by how far the settles lag.
	slots int
}

// releaseSlots frees the send slots items hold (the channel's fetcher may
// claim again): after their commit, or when they will never be committed.
func releaseSlots(items []settleItem) {
	for _, it := range items {
		if it.slots > 0 {
			if !it.ch.batching {
				it.ch.settling.Add(-int64(it.slots))
			}
			it.ch.release(it.slots)
		}
	}
}

// settler group-commits verdicts: each worker takes everything waiting (up
// to delivery.settle_batch), commits it to Postgres in one transaction, then
// acks, retries or dead-letters it in Redis. Under load batches grow by
// themselves; when idle a verdict is committed at once. The verdicts of one
// plugin call arrive together (add takes them as one slice), so a worker
// woken by a call's first verdict never commits it without the others.
type settler struct {
	e    *Engine
	in   chan []settleItem
	busy atomic.Int64 // batches being flushed
	// started[w] is when worker w's batch began (unix ns; 0 when idle): the
	// oldest is how long a verdict has waited to be committed.
	started [settleWorkers]atomic.Int64
	wg      sync.WaitGroup
	ctx     context.Context
	stop    context.CancelFunc

	// held are the verdicts, by channel, of batches Postgres refused whole
	// with no row committing alone (a statement none of their rows can
	// pass: an operator's trigger refusing one channel's settles). Each
	// channel's are retried by a goroutine of its own (holdChannel), not
	// by a settle worker: held there they stopped every other channel's
	// verdicts. What one channel can hold is bounded by its send slots,
	// which its verdicts keep until committed.
	heldMu sync.Mutex
	held   map[*channel]*heldVerdicts
}

// heldVerdicts are one channel's held verdicts and when the first was held
// (unix ns: oldest reports it, so /readyz says the settle is stalled).
type heldVerdicts struct {
	items []settleItem
	since int64
}

// settleQueue is how many calls' verdicts may wait for a settle worker
// before the senders wait for it instead (at least 16, 4 × settle_batch / 64
// for the default 1,000).
func settleQueue(e *Engine) int { return max(16, 4*e.cfg.Delivery.SettleBatch/64) }

func newSettler(e *Engine) *settler {
	return &settler{e: e, in: make(chan []settleItem, settleQueue(e)), held: map[*channel]*heldVerdicts{}}
}

func (s *settler) start() {
	s.ctx, s.stop = context.WithCancel(context.Background())
	for w := range settleWorkers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.run(&s.started[w])
		}()
	}
}

// add queues items, the caller's to give up: the settler keeps the slice.
func (s *settler) add(items []settleItem) {
	if len(items) == 0 {
		return
	}
	select {
	case s.in <- items:
	case <-s.ctx.Done():
		// killed: the rows stay PROCESSING and are reclaimed
		releaseSlots(items)
	}
}

// close flushes what is queued, bounded by ctx, and stops the workers. A
// verdict added later is dropped: its row stays PROCESSING and is reclaimed
// once stale, so nothing is lost.
func (s *settler) close(ctx context.Context) {
	if s.stop == nil {
		return // never started
	}
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

// oldest is how long the oldest batch being committed has taken so far.
func (s *settler) oldest(now time.Time) time.Duration {
	var d time.Duration
	for i := range s.started {
		if t := s.started[i].Load(); t != 0 {
			d = max(d, now.Sub(time.Unix(0, t)))
		}
	}
	s.heldMu.Lock()
	for _, h := range s.held {
		d = max(d, now.Sub(time.Unix(0, h.since)))
	}
	s.heldMu.Unlock()
	return d
}

// run is one settle worker. carry is what it took from the queue past a
// full batch: committed next, before the worker waits again (and counted
// busy until then, so close waits for it).
func (s *settler) run(started *atomic.Int64) {
	max := s.e.cfg.Delivery.SettleBatch
	batch := make([]settleItem, 0, max)
	var carry []settleItem
	for {
		if len(carry) == 0 {
			select {
			case carry = <-s.in:
			case <-s.ctx.Done():
				return
			}
			s.busy.Add(1)
		}
		started.Store(s.e.now().UnixNano())
		n := min(len(carry), max)
		batch = append(batch[:0], carry[:n]...)
		carry = carry[n:]
	drain:
		for len(carry) == 0 && len(batch) < max {
			select {
			case more := <-s.in:
				n := min(len(more), max-len(batch))
				batch = append(batch, more[:n]...)
				carry = more[n:]
			default:
				break drain
			}
		}
		s.flush(batch)
		started.Store(0)
		if len(carry) == 0 {
			s.busy.Add(-1)
		}
	}
}

// flush commits one batch, retrying while Postgres is unreachable: the
// verdicts are only in memory, and losing them would resend messages. The
// verdicts of a channel whose verdicts are held already join them, and a
// batch refused whole with no row committing alone is held (hold): the
// worker goes on with the other channels' verdicts.
func (s *settler) flush(batch []settleItem) {
	if batch = s.joinHeld(batch); len(batch) == 0 {
		return
	}
	applied := make([]bool, len(batch))
	switch s.commitRows(batch, applied, false, true) {
	case settleHeld:
		s.hold(batch)
	case settleCommitted:
		s.settled(batch, applied, true)
	default:
		s.settled(batch, applied, false)
	}
}

// settled does what follows a batch's commit: its send slots freed, its
// waiters told, its spans ended and its ids acked, retried or dead-lettered
// in Redis. committed is false when the settler was killed first: the rows
// stay PROCESSING and are reclaimed.
func (s *settler) settled(batch []settleItem, applied []bool, committed bool) {
	e := s.e
	releaseSlots(batch)
	for _, it := range batch {
		if it.done != nil {
			it.done.Done()
		}
	}
	if !committed {
		for _, it := range batch {
			abandonAttempts(it.span)
		}
		return // killed: the rows stay PROCESSING and are reclaimed
	}
	// The attempt spans end with the Postgres commit: the outcome is
	// recorded. The Redis moves after it are the queue's business.
	for i := range batch {
		if batch[i].span != nil {
			endAttempt(batch[i].span, &batch[i].s, applied[i])
		}
	}

	type redisOps struct {
		ack, dead, orphan []int64
		retry             []queue.Item
		// Applied verdicts for the metrics, counted here and added once
		// per target: a label lookup per notification otherwise.
		sent, retried, permanent, exhausted int
	}
	type target struct {
		ch *channel
		q  string
	}
	byQueue := map[target]*redisOps{}
	for i, it := range batch {
		key := target{it.ch, it.ch.queueOf(it.s.ID)}
		ops := byQueue[key]
		if ops == nil {
			ops = &redisOps{}
			byQueue[key] = ops
		}
		if applied[i] {
			switch {
			case it.s.Result == outbox.ResultSent:
				ops.sent++
			case it.s.Result == outbox.ResultRetry:
				ops.retried++
			case it.s.Result != outbox.ResultFailed:
			case it.s.Outcome == outbox.OutcomePermanent:
				ops.permanent++
			default:
				ops.exhausted++
			}
		}
		switch {
		case it.dropped:
			// Postgres refuses to write this row at all (finishUnstorable
			// logged it): drop it from Redis rather than re-handle it here
			// without end; the sweeper finds it again, PROCESSING and stale.
			ops.ack = append(ops.ack, it.s.ID)
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
		e.metrics.SettledN(ch.name, outbox.ResultSent.String(), outbox.OutcomeSuccess, ops.sent)
		e.metrics.SettledN(ch.name, outbox.ResultRetry.String(), outbox.OutcomeTransient, ops.retried)
		e.metrics.SettledN(ch.name, outbox.ResultFailed.String(), outbox.OutcomePermanent, ops.permanent)
		e.metrics.SettledN(ch.name, outbox.ResultFailed.String(), outbox.OutcomeTransient, ops.exhausted)
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

// settleOutcome is what commitRows did with a batch.
type settleOutcome int

const (
	settleCommitted settleOutcome = iota
	settleKilled                  // the settler stopped first
	// settleHeld: refused whole, no row committing alone; left for hold.
	settleHeld
)

func outcomeOf(committed bool) settleOutcome {
	if committed {
		return settleCommitted
	}
	return settleKilled
}

// commitRows settles batch into applied (one flag per item), retrying the whole
// batch while the failure is Postgres being unreachable. A batch Postgres
// refuses for its data (outbox.IsRowError: one row's value or index entry)
// would fail every retry and hold every verdict behind it, so it is halved
// until the row at fault stands alone, the other halves committing as they
// go; that row is finished by finishUnstorable. A refusal of no data class
// (an operator's trigger's exception) is one row's too once a row of the
// batch commits alone (refused.go), and a batch of one row refused so
// refusedAloneLimit times in a row is that row's. It returns settleKilled only
// when the settler is killed.
//
// isolating: a row of the batch this one was split from committed alone, so
// any refusal is its rows' own. mayHold: a batch refused whole with no row
// committing alone is returned settleHeld, not retried here (a settle
// worker's own batch, before any of it committed: hold).
func (s *settler) commitRows(batch []settleItem, applied []bool, isolating, mayHold bool) settleOutcome {
	e := s.e
	ss := make([]outbox.Settlement, len(batch))
	for i, it := range batch {
		ss[i] = it.s
	}
	alone := 0 // refusals of the batch's one row alone (refusedAloneLimit)
	for failures := 1; ; failures++ {
		got, err := e.store.Settle(s.ctx, ss)
		if err == nil {
			copy(applied, got)
			return settleCommitted
		}
		if s.ctx.Err() != nil {
			return settleKilled
		}
		kind := refusedFor(err, isolating)
		if kind == maybeRowRefused && len(batch) == 1 {
			if alone++; alone >= refusedAloneLimit {
				// No batch-mate to tell the row's refusal from the
				// statement's, refusedAloneLimit times in a row: ended as
				// a row at fault, not holding this worker for good.
				e.log.Warn("settle of one row refused alone, again; ending it as a row at fault", "id", batch[0].s.ID, "times", alone, "error", err)
				kind = rowRefused
			}
		}
		switch kind {
		case rowRefused:
			if len(batch) == 1 {
				applied[0] = s.finishUnstorable(&batch[0], err)
				return outcomeOf(s.ctx.Err() == nil)
			}
			e.log.Warn("settle refused for a row's data; splitting the batch to find it", "rows", len(batch), "error", err)
			mid := len(batch) / 2
			return outcomeOf(s.commitRows(batch[:mid], applied[:mid], isolating, false) == settleCommitted &&
				s.commitRows(batch[mid:], applied[mid:], isolating, false) == settleCommitted)
		case maybeRowRefused:
			if done, ok := s.commitAlone(batch, applied, err); ok {
				return outcomeOf(done)
			}
			if mayHold {
				return settleHeld
			}
		}
		e.log.Warn("settle failed; retrying", "rows", len(ss), "error", err)
		sleepCtx(s.ctx, retryPause(failures))
	}
}

// commitAlone commits rows of batch alone in turn (outbox.ProbeOrder: the
// first, the last, then others at random) until one commits: that says the
// statement is fine, and the batch's refusal (cause) is the other rows' own,
// which are then split to find them. ok is false when none commits: no row
// is shown at fault, and the batch is retried whole (a statement no row can
// pass must not end every row).
func (s *settler) commitAlone(batch []settleItem, applied []bool, cause error) (done, ok bool) {
	for _, k := range outbox.ProbeOrder(len(batch)) {
		got, err := s.e.store.Settle(s.ctx, []outbox.Settlement{batch[k].s})
		if err != nil {
			continue
		}
		applied[k] = got[0]
		s.e.log.Warn("settle refused, but not for every row; splitting the batch to find the rows at fault", "rows", len(batch), "error", cause)
		return s.commitPart(batch[:k], applied[:k]) && s.commitPart(batch[k+1:], applied[k+1:]), true
	}
	return false, false
}

// commitPart is commitRows isolating, for a part of a batch that may be empty.
func (s *settler) commitPart(batch []settleItem, applied []bool) bool {
	return len(batch) == 0 || s.commitRows(batch, applied, true, false) == settleCommitted
}

// hold keeps the verdicts of a batch Postgres refused whole, none of its
// rows committing alone, apart by channel, each channel's retried by a
// goroutine of its own (holdChannel) until they commit or the settler
// stops; the worker that flushed it goes on.
func (s *settler) hold(batch []settleItem) {
	s.e.log.Warn("settle refused for every row tried alone; holding the verdicts apart, by channel, and retrying them there", "rows", len(batch))
	byChannel := map[*channel][]settleItem{}
	for _, it := range batch {
		byChannel[it.ch] = append(byChannel[it.ch], it)
	}
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	for ch, items := range byChannel {
		if h := s.held[ch]; h != nil {
			h.items = append(h.items, items...)
			continue
		}
		s.held[ch] = &heldVerdicts{items: items, since: s.e.now().UnixNano()}
		// Counted busy, and waited for, as a worker's batch is: close
		// waits for the held verdicts to commit (within its deadline).
		s.busy.Add(1)
		s.wg.Add(1)
		go s.holdChannel(ch)
	}
}

// joinHeld takes, out of batch, the verdicts of channels whose verdicts are
// held, adding them to those (retried together), and returns the others.
func (s *settler) joinHeld(batch []settleItem) []settleItem {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	if len(s.held) == 0 {
		return batch
	}
	rest := batch[:0:0]
	for _, it := range batch {
		if h := s.held[it.ch]; h != nil {
			h.items = append(h.items, it)
		} else {
			rest = append(rest, it)
		}
	}
	return rest
}

// holdChannel commits one channel's held verdicts, a settle batch at a time,
// retrying each as a settle worker did (commitRows: a row committing alone
// splits it, a row refused alone refusedAloneLimit times is ended), until
// none is left or the settler stops.
func (s *settler) holdChannel(ch *channel) {
	defer s.wg.Done()
	defer s.busy.Add(-1)
	max := s.e.cfg.Delivery.SettleBatch
	for {
		s.heldMu.Lock()
		h := s.held[ch]
		if len(h.items) == 0 {
			delete(s.held, ch)
			s.heldMu.Unlock()
			return
		}
		n := min(len(h.items), max)
		batch := h.items[:n:n]
		h.items = h.items[n:]
		s.heldMu.Unlock()
		applied := make([]bool, len(batch))
		s.settled(batch, applied, s.commitRows(batch, applied, false, false) == settleCommitted)
	}
}

// finishUnstorable ends one row whose verdict Postgres refused to store: SENT
// when the provider accepted it (the message went out; only the details are
// lost), else FAILED, with the reason in last_error and the attempt log, so
// the row is never claimed and sent again. The item's result is changed to
// match, so Redis acks or dead-letters it. When even that write is refused
// the row cannot be written at all: it is logged by id, counted, and dropped
// from Redis (item.dropped); it stays PROCESSING for an operator.
func (s *settler) finishUnstorable(it *settleItem, cause error) bool {
	e := s.e
	status, result, outcome := outbox.StatusFailed, outbox.ResultFailed, outbox.OutcomePermanent
	if it.s.Result == outbox.ResultSent {
		status, result, outcome = outbox.StatusSent, outbox.ResultSent, outbox.OutcomeSuccess
	}
	reason := fmt.Sprintf("the %s verdict of attempt %d could not be stored (%v); ended %s without it",
		it.s.Result, it.s.Attempt, cause, status)
	for failures := 1; ; failures++ {
		ok, err := e.store.Finish(s.ctx, it.s.ID, it.s.Attempt, status, reason)
		switch {
		case err == nil:
			e.log.Error("notification's verdict could not be stored; finished it without it",
				"channel", it.ch.name, "id", it.s.ID, "status", status, "cause", cause)
			e.metrics.Unstorable(it.ch.name, "settle")
			it.s.Result, it.s.Outcome = result, outcome
			return ok
		case s.ctx.Err() != nil:
			return false
		case refusedFor(err, true) == rowRefused:
			// Refused alone, as its batch's rows were not (refused.go).
			e.log.Error("notification cannot be written at all; dropping it from Redis, left PROCESSING",
				"channel", it.ch.name, "id", it.s.ID, "cause", cause, "error", err)
			e.metrics.Unstorable(it.ch.name, "settle")
			it.dropped = true
			return false
		}
		e.log.Warn("finish an unstorable verdict; retrying", "id", it.s.ID, "error", err)
		sleepCtx(s.ctx, retryPause(failures))
	}
}
