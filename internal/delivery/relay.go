// Stage 1 of docs/design.md §4: due PENDING rows to QUEUED, pushed into their
// queues.

package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/queue"
)

// relay relays up to limit due rows. A relay Postgres refuses would fail
// every pass and hold every due row behind it, so the limit is halved while
// it is refused; refused at one row, the rows at fault are looked for by id
// (relayAtFault), finished FAILED with the reason, and what relayed meanwhile
// is returned, to be pushed. The caller calls again while rows come back.
// Only relayLoop calls relay (e.relayRefused is its own).
func (e *Engine) relay(ctx context.Context, limit int) ([]outbox.Queued, error) {
	queued, err := e.store.Relay(ctx, e.now(), limit)
	for n := limit / 2; err != nil && refusedFor(err, false) != notRefused && n >= 1; n /= 2 {
		e.log.Warn("relay refused; relaying fewer rows to find the row at fault", "limit", n, "error", err)
		queued, err = e.store.Relay(ctx, e.now(), n)
	}
	if err == nil {
		e.relayRefused.forget()
		e.relaySuspects = nil
		return queued, nil
	}
	if refusedFor(err, false) == notRefused {
		return nil, err
	}
	atFault, relayed, ferr := e.relayAtFault(ctx, err)
	if ferr != nil {
		return nil, fmt.Errorf("%w (and finding the row at fault: %v)", err, ferr)
	}
	if len(atFault) == 0 {
		if len(relayed) > 0 {
			return relayed, nil
		}
		// No row is shown at fault: the statement's, tried again whole.
		return nil, err
	}
	e.relayRefused.forget()
	e.relaySuspects = nil
	reason := fmt.Sprintf("could not be queued for sending (%v); ended FAILED", err)
	for _, id := range atFault {
		if _, ferr := e.store.Finish(ctx, id, 0, outbox.StatusFailed, reason); ferr != nil {
			e.log.Error("notification cannot be relayed or finished", "id", id, "cause", err, "error", ferr)
			if len(relayed) > 0 {
				// Relayed without it: pushed, and the next pass relays the
				// next rows without it again.
				continue
			}
			return nil, fmt.Errorf("relay: notification %d cannot be written: %w", id, ferr)
		}
		e.log.Error("notification could not be relayed; finished it FAILED", "id", id, "cause", err)
		e.metrics.Unstorable("", "relay")
	}
	// FAILED in Postgres is the dead-letter list the API and dashboard read;
	// the id was never in a Redis queue, so there is nothing to move there.
	return relayed, nil
}

// maxRelaySuspects bounds the rows one relay pass tries alone after a
// refusal (relayAtFault): two statements each, so a statement no row can
// pass costs at most 2 × 64 a pass (retried with relayLoop's backoff), and
// rows at fault at the head of the due rows are found 64 a pass, up to
// maxRefusedAlone of them remembered between passes.
const maxRelaySuspects = 64

// relayAtFault relays the oldest due rows one at a time, each by its id
// (outbox.RelayOne; one another instance relayed meanwhile comes back
// empty and is passed over), after the relay of the oldest due row alone
// was refused (cause):
//   - a row refused for its data (outbox.IsRowError) is at fault by itself,
//     and returned alone at once;
//   - a row refused otherwise (an operator's trigger's RAISE EXCEPTION,
//     refused.go) is a suspect: nothing tells its refusal from the
//     statement's until a later row relays alone (relayed), which shows the
//     statement is fine. Then every suspect is at fault, those of earlier
//     passes (e.relaySuspects) once each is refused alone again;
//   - with no row relaying, no row is shown at fault (nil): the statement's,
//     tried again whole. The pass's suspects are remembered, so the next
//     pass starts past them. One row that was the only due row, refused so
//     refusedAloneLimit passes in a row, is at fault.
//
// At most maxRelaySuspects new suspects a pass.
func (e *Engine) relayAtFault(ctx context.Context, cause error) (atFault []int64, relayed []outbox.Queued, err error) {
	tried := slices.Clone(e.relaySuspects)
	var suspects []int64
	for len(suspects) < maxRelaySuspects {
		id, err := e.store.FirstDue(ctx, e.now(), tried)
		if err != nil {
			return nil, nil, err
		}
		if id == 0 {
			break
		}
		tried = append(tried, id)
		one, rerr := e.store.RelayOne(ctx, e.now(), id)
		if rerr == nil {
			if len(one) == 0 {
				continue
			}
			earlier, more := e.relayAgainAlone(ctx)
			return append(earlier, suspects...), append(one, more...), nil
		}
		switch refusedFor(rerr, false) {
		case notRefused:
			return nil, nil, rerr
		case rowRefused:
			return []int64{id}, nil, nil
		}
		if len(suspects) == 0 {
			e.log.Warn("relay of a due row alone refused; relaying the next ones alone to tell a row's refusal from the statement's",
				"id", id, "earlier_suspects", len(e.relaySuspects), "error", rerr)
		}
		suspects = append(suspects, id)
	}
	if len(tried) == 1 && len(e.relaySuspects)+len(suspects) == 1 && e.relayRefused.refused(tried[0]) {
		// The only due row, remembered or new, with no other to tell its
		// refusal from the statement's, refusedAloneLimit passes in a row
		// (refused.go).
		e.log.Warn("relay of one row refused alone, again; ending it as a row at fault", "id", tried[0], "times", refusedAloneLimit, "error", cause)
		return tried[:1], nil, nil
	}
	if len(e.relaySuspects)+len(suspects) <= maxRefusedAlone {
		e.relaySuspects = append(e.relaySuspects, suspects...)
	} else {
		e.relaySuspects = nil // past the bound the search starts afresh
	}
	return nil, nil, nil
}

// relayAgainAlone relays each suspect of earlier passes alone again, once a
// row relayed alone: refused again, it is at fault; relayed (its refusal
// passed meanwhile), it is pushed like any row.
func (e *Engine) relayAgainAlone(ctx context.Context) (atFault []int64, relayed []outbox.Queued) {
	for _, id := range e.relaySuspects {
		one, rerr := e.store.RelayOne(ctx, e.now(), id)
		switch {
		case rerr == nil:
			relayed = append(relayed, one...)
		case refusedFor(rerr, false) == notRefused:
			// Postgres cannot run statements now: the ones not tried again
			// are found again by a later pass if still refused.
			return atFault, relayed
		default:
			atFault = append(atFault, id)
		}
	}
	return atFault, relayed
}

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
//
// Rows on a channel whose name no Redis queue can take (queue.ErrChannelName:
// an empty one, or one holding { or }, which an application's own SQL may
// write; the doors take configured channels only) are finished FAILED
// instead: kept, they failed every later push of the relay and of the sweep
// and resync pages they are on, and the relay pushes what it kept before
// relaying anything else. Push checks the name before it reaches Redis, so
// the normal path pays nothing for this.
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
		_, err := e.queue.Push(ctx, q, items)
		if errors.Is(err, queue.ErrChannelName) {
			rs, err = e.finishUnqueueable(ctx, rs, err)
		}
		if err != nil {
			failed = append(failed, rs...)
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	return failed, firstErr
}

// finishUnqueueable finishes FAILED, with the reason, rows whose channel
// Push refused by name (cause): no pass would ever push them. It returns the
// rows it could not finish (Postgres unreachable: pushed, and refused, again
// on the next pass) and the error.
func (e *Engine) finishUnqueueable(ctx context.Context, rows []outbox.Queued, cause error) ([]outbox.Queued, error) {
	for i, r := range rows {
		reason := fmt.Sprintf("channel %q cannot name a Redis queue: %v", r.Channel, cause)
		// attempt 0: any non-terminal row, QUEUED by the relay or, for the
		// sweep and resync, PROCESSING as the application's SQL wrote it
		// (no instance can have claimed it: no queue ever held its id).
		if _, err := e.store.Finish(ctx, r.ID, 0, outbox.StatusFailed, reason); err != nil {
			e.log.Error("notification on a channel no queue can be named by cannot be finished", "id", r.ID, "channel", r.Channel, "error", err)
			return rows[i:], fmt.Errorf("finish notification %d, whose channel %q cannot name a queue: %w", r.ID, r.Channel, err)
		}
		// Counted without the channel: any name an application wrote
		// would otherwise become a metric label.
		e.metrics.Unstorable("", "relay")
	}
	e.log.Error("notifications on a channel no Redis queue can be named by; finished them FAILED", "channel", rows[0].Channel, "rows", len(rows), "cause", cause)
	return nil, nil
}
