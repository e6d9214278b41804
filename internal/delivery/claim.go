package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/queue"
)

// resumingOwn marks the context of a start's resumption of the instance's own
// backup list (channel.resumeBackupList).
type resumingOwn struct{}

// claim claims ids for sending (suspects: ids taken over from a stale claim
// if need be; outbox.ClaimSuspects). A claim Postgres refuses for a row's
// data (outbox.IsRowError) would fail every retry of the same ids, so the
// batch is halved until the row at fault stands alone, and that row is
// finished FAILED with the reason (finishUnclaimable); a refusal of no data
// class (an operator's trigger's exception) is one row's too once a row of
// the batch is claimed alone (refused.go). When a later part fails for
// another reason (Postgres unreachable) after an earlier part committed, the
// ids of the failed part come back as ClaimDefer, tried again in a second.
// The error is returned only when nothing was claimed. A row refused alone,
// with no batch-mate to commit alone, refusedAloneLimit times in a row with
// no other row refused meanwhile is finished as a row at fault (refused.go).
func (c *channel) claim(ctx context.Context, ids []int64, suspects bool) ([]outbox.Claimed, error) {
	return c.claimRows(ctx, ids, suspects, false)
}

// claimRows is claim; isolating: a row of the batch these ids were split
// from was claimed alone, so any refusal is their rows' own.
func (c *channel) claimRows(ctx context.Context, ids []int64, suspects, isolating bool) ([]outbox.Claimed, error) {
	e := c.e
	claimed, err := c.claimOnce(ctx, ids, suspects)
	if err == nil {
		c.refused.passed(ids)
		return claimed, nil
	}
	switch refusedFor(err, isolating) {
	case notRefused:
		return nil, err
	case maybeRowRefused:
		if len(ids) == 1 && c.refused.refused(ids[0]) {
			// Alone, with no batch-mate to tell a row's refusal from the
			// statement's, refusedAloneLimit times in a row and no other
			// row refused meanwhile (refused.go).
			c.log.Warn("claim of one row refused alone, again; ending it as a row at fault", "id", ids[0], "times", refusedAloneLimit, "error", err)
			return []outbox.Claimed{c.finishUnclaimable(ctx, ids[0], err)}, nil
		}
		return c.claimAlone(ctx, ids, suspects, err)
	}
	if len(ids) == 1 {
		return []outbox.Claimed{c.finishUnclaimable(ctx, ids[0], err)}, nil
	}
	c.log.Warn("claim refused for a row's data; splitting the batch to find it", "ids", len(ids), "error", err)
	mid := len(ids) / 2
	first, err := c.claimRows(ctx, ids[:mid], suspects, isolating)
	if err != nil {
		return nil, err
	}
	rest, err := c.claimRows(ctx, ids[mid:], suspects, isolating)
	if err != nil {
		rest = deferAll(ids[mid:], e.now().Add(time.Second))
	}
	return append(first, rest...), nil
}

// claimAlone claims ids alone in turn (outbox.ProbeOrder: the first, the
// last, then others at random) until one is claimed: a row claimed so says
// the statement is fine, and the batch's refusal (cause) is the other rows'
// own, which are then split to find them. None: no row is shown at fault,
// and cause is returned (the ids are tried again whole: a statement no row
// can pass must not end every row).
func (c *channel) claimAlone(ctx context.Context, ids []int64, suspects bool, cause error) ([]outbox.Claimed, error) {
	for _, k := range outbox.ProbeOrder(len(ids)) {
		one, err := c.claimOnce(ctx, ids[k:k+1], suspects)
		if err != nil {
			continue
		}
		c.refused.passed(ids[k : k+1])
		c.log.Warn("claim refused, but not for every row; splitting the batch to find the rows at fault", "ids", len(ids), "error", cause)
		for _, rest := range [][]int64{ids[:k], ids[k+1:]} {
			if len(rest) == 0 {
				continue
			}
			more, err := c.claimRows(ctx, rest, suspects, true)
			if err != nil {
				more = deferAll(rest, c.e.now().Add(time.Second))
			}
			one = append(one, more...)
		}
		return one, nil
	}
	if len(ids) > 1 {
		c.refused.refusedMany()
	}
	return nil, cause
}

// claimOnce is one claim statement for ids.
func (c *channel) claimOnce(ctx context.Context, ids []int64, suspects bool) ([]outbox.Claimed, error) {
	e := c.e
	stale := c.staleAfter()
	if ctx.Value(resumingOwn{}) != nil && e.ownsInstance {
		// Our own backup list at start: whatever of it is PROCESSING was
		// claimed by this instance's previous, dead process (no live one
		// can hold the id), so it is taken over now, not after staleAfter.
		stale = time.Nanosecond
	}
	if suspects {
		return e.store.ClaimSuspects(ctx, ids, e.now(), stale)
	}
	return e.store.Claim(ctx, ids, e.now(), stale)
}

// finishUnclaimable ends a row that cannot be claimed: FAILED with the
// reason, then dead-lettered like any FAILED row the claim meets. If even
// that write is refused it is logged by id and acked out of Redis (the
// sweeper finds it again after sweep_after, and logs it again).
func (c *channel) finishUnclaimable(ctx context.Context, id int64, cause error) outbox.Claimed {
	e := c.e
	e.metrics.Unstorable(c.name, "claim")
	reason := fmt.Sprintf("could not be claimed for sending (%v); ended FAILED", cause)
	ok, err := e.store.Finish(ctx, id, 0, outbox.StatusFailed, reason)
	if err != nil {
		c.log.Error("notification cannot be claimed or finished; dropping it from Redis", "id", id, "cause", cause, "error", err)
		return outbox.Claimed{ID: id, Kind: outbox.ClaimSkip}
	}
	c.log.Error("notification could not be claimed; finished it FAILED", "id", id, "cause", cause, "applied", ok)
	return outbox.Claimed{ID: id, Kind: outbox.ClaimSkip, Status: outbox.StatusFailed}
}

func deferAll(ids []int64, at time.Time) []outbox.Claimed {
	out := make([]outbox.Claimed, len(ids))
	for i, id := range ids {
		out[i] = outbox.Claimed{ID: id, Kind: outbox.ClaimDefer, NotBefore: at}
	}
	return out
}

// unsendable splits from send the claimed rows that must not be sent, each
// settled FAILED with its reason instead:
//   - claimed more often than retry.max_attempts allows: the earlier
//     attempts' outcomes were lost (the process died while sending, or its
//     settle never landed); a message that crashes its sender must not crash
//     it again, and one whose settles keep failing must not be sent without
//     end;
//   - in flight when the process died delivery.quarantine_after times in a
//     row (Crashes; the last ones alone): quarantined, whatever the cause
//     (§10);
//   - a payload that reads back past the bound the pipeline carries
//     (outbox.MaxPayloadBytes): written past the enqueue checks, it is not
//     read into memory at all.
func (c *channel) unsendable(send []outbox.Claimed) (keep []outbox.Claimed, over []settleItem) {
	keep = send[:0:0]
	now := c.e.now()
	quarantine := c.e.cfg.Delivery.QuarantineAfter
	for _, cl := range send {
		var reason string
		switch {
		case cl.Payload == nil && cl.PayloadBytes < 0:
			reason = "its payload has a number that reads back past 100 characters (Postgres prints 1e100000 as 100,001 digits), " +
				"so it was not read (it was written past the enqueue checks: by SQL of the application's own?); not sent"
		case cl.Payload == nil:
			reason = fmt.Sprintf("its payload reads back as %d bytes, over the %d bytes a notification may carry "+
				"(it was written past the enqueue checks: by SQL of the application's own?); not sent", cl.PayloadBytes, outbox.MaxPayloadBytes)
		case quarantine > 0 && cl.Crashes >= quarantine:
			reason = fmt.Sprintf("quarantined: notifyd or its plugin died %d times in a row while this notification was in flight "+
				"(alone after the second; delivery.quarantine_after %d); not sent again — replay it once the cause is fixed",
				cl.Crashes, quarantine)
		case cl.Attempt > c.policy.MaxAttempts:
			reason = fmt.Sprintf("claimed for attempt %d, past retry.max_attempts %d, with no outcome recorded for the earlier ones "+
				"(the sending process died or its settle failed each time); not sent again", cl.Attempt, c.policy.MaxAttempts)
		default:
			keep = append(keep, cl)
			continue
		}
		if cl.Crashes >= quarantine || cl.Payload == nil {
			c.log.Error("notification not sent", "id", cl.ID, "reason", reason)
		}
		over = append(over, settleItem{ch: c, s: outbox.Settlement{
			ID: cl.ID, Attempt: cl.Attempt, Result: outbox.ResultFailed, Outcome: outbox.OutcomePermanent,
			Error: reason, StartedAt: now, FinishedAt: now,
		}})
	}
	return keep, over
}

// suspectGroup is how many suspects on their first crash go out together.
// After a second crash in a row each goes alone.
const suspectGroup = 16

// sendLane handles a group of suspects — rows in flight when the process that
// had claimed them died — with no other suspect of this instance in flight,
// and waits until their verdicts are committed: should the process die
// meanwhile, the crash is theirs (§10). It owns the group's slots
// (slotsFor(len(ids)): one a message, or one for a batching plugin's call).
func (c *channel) sendLane(ctx context.Context, ids []int64) {
	e := c.e
	select {
	case e.lane <- struct{}{}:
	case <-ctx.Done():
		// Stopping: the ids stay in the backup list, for the next start.
		c.untrack(ids)
		c.release(c.slotsFor(len(ids)))
		return
	}
	defer func() { <-e.lane }()
	c.handleClaim(ctx, ids, true)
}

// laneGroups splits suspects into what goes out together: rows taken over
// for the first time in groups of suspectGroup, so a restart resumes its
// in-flight work quickly; from the second crash in a row each alone, so a
// crash then is the row's own.
func laneGroups(suspects []outbox.Claimed) [][]int64 {
	var groups [][]int64
	var first []int64
	for _, s := range suspects {
		if s.Crashes == 0 {
			first = append(first, s.ID)
			continue
		}
		groups = append(groups, []int64{s.ID})
	}
	for len(first) > 0 {
		n := min(len(first), suspectGroup)
		groups = append(groups, first[:n])
		first = first[n:]
	}
	return groups
}

// handle claims ids that sit in this instance's backup list and sends the
// claimed ones; it owns their slots (slotsFor(len(ids))).
func (c *channel) handle(ctx context.Context, ids []int64) { c.handleClaim(ctx, ids, false) }

// handleClaim is handle; suspects is sendLane's: the ids are taken over if
// stale, and sent before it returns.
func (c *channel) handleClaim(ctx context.Context, ids []int64, suspects bool) {
	e := c.e
	// The claim's time: every send deadline counts from it (send), and a
	// traced attempt's span starts with it.
	claimedAt := e.now()
	slots := batchSlots{c: c, left: len(ids)}
	c.track(ids)
	if hookCrashed(e.hooks.AfterFetch, c.name, ids) {
		slots.leave(len(ids))
		return
	}
	claimed, err := c.claim(ctx, ids, suspects)
	if err != nil {
		// Postgres is unreachable: push the ids back into the delayed set so
		// they are tried again; if Redis fails too, the orphan check does it.
		e.claimStall.failing(e.now())
		c.log.Warn("claim failed; retrying later", "ids", len(ids), "error", err)
		c.requeueAt(ids, e.now().Add(time.Second), "requeue after failed claim")
		slots.leave(len(ids))
		return
	}
	e.claimStall.ok()
	var send, suspect []outbox.Claimed
	var skip, failed []int64
	var deferred []queue.Item
	for _, cl := range claimed {
		switch {
		case cl.Kind == outbox.ClaimSend:
			send = append(send, cl)
		case cl.Kind == outbox.ClaimSuspect:
			suspect = append(suspect, cl)
		case cl.Kind == outbox.ClaimDefer:
			deferred = append(deferred, queue.Item{ID: cl.ID, Due: cl.NotBefore})
		case cl.Status == outbox.StatusFailed:
			failed = append(failed, cl.ID)
		default:
			skip = append(skip, cl.ID)
		}
	}
	rctx := context.WithoutCancel(ctx)
	// Already SENT/CANCELLED (or gone): the claim is the idempotency check,
	// so the row is only acked, never sent again. A FAILED one is
	// dead-lettered: it may be here because the dead-letter step after its
	// commit was lost (a crash, a Redis error), and acking it would keep it
	// out of the dead list for good; or because it was pushed again after
	// it failed (a relay or resync racing its settle), when it is on the
	// dead list already and must not be listed twice.
	for q, ids := range c.byQueue(skip) {
		if err := e.queue.Ack(rctx, q, e.instance, ids); err != nil {
			c.log.Warn("ack skipped", "error", err)
		}
	}
	for q, ids := range c.byQueue(failed) {
		if err := e.queue.DeadOnce(rctx, q, e.instance, ids); err != nil {
			c.log.Warn("dead-letter skipped FAILED", "error", err)
		}
	}
	skip = append(skip, failed...)
	for q, items := range c.itemsByQueue(deferred) {
		if err := e.queue.Retry(rctx, q, e.instance, items); err != nil {
			c.log.Warn("defer not-yet-claimable", "error", err)
		}
	}
	if n := len(skip) + len(deferred); n > 0 {
		c.untrack(append(skip, itemIDs(deferred)...))
		slots.leave(n)
	}
	c.sendSuspects(ctx, suspect, &slots)
	send, over := c.unsendable(send)
	if len(over) > 0 {
		slots.leave(len(over))
		e.settler.add(over)
	}
	send, over = c.capRecipients(ctx, send)
	if len(over) > 0 {
		slots.leave(len(over))
		e.settler.add(over)
	}
	if len(send) == 0 {
		return
	}
	sendIDs := claimedIDs(send)
	if hookCrashed(e.hooks.AfterClaim, c.name, sendIDs) {
		slots.leave(len(send))
		return
	}
	if suspects {
		done := make(chan struct{})
		c.send(e.runCtx, send, claimedAt, done)
		select {
		case <-done:
		case <-e.runCtx.Done():
		}
		return
	}
	e.sendWG.Add(1)
	go func() {
		defer e.sendWG.Done()
		c.send(e.runCtx, send, claimedAt, nil)
	}()
}

// sendSuspects sends suspects through the lane, in laneGroups. For a plain
// plugin each group keeps the slots its messages were fetched with (and
// their places in the backup list) while it waits for the lane. For a
// batching plugin the batch's one slot stays with the batch's other
// messages, and the groups take a slot each in turn: the lane sends them one
// at a time anyway, so they wait on one goroutine instead of holding a
// call's slot apiece.
func (c *channel) sendSuspects(ctx context.Context, suspects []outbox.Claimed, slots *batchSlots) {
	if len(suspects) == 0 {
		return
	}
	e := c.e
	groups := laneGroups(suspects)
	if !c.batching {
		slots.left -= len(suspects) // their slots go with them
		for _, g := range groups {
			e.sendWG.Add(1)
			go func() {
				defer e.sendWG.Done()
				c.sendLane(ctx, g)
			}()
		}
		return
	}
	slots.leave(len(suspects))
	e.sendWG.Add(1)
	go func() {
		defer e.sendWG.Done()
		for i, g := range groups {
			if c.acquire(ctx, 1) == 0 {
				// Stopping: the ids stay in the backup list, for the next start.
				for _, rest := range groups[i:] {
					c.untrack(rest)
				}
				return
			}
			c.sendLane(ctx, g)
		}
	}()
}
