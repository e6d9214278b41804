package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/notifyd/notifyd/core/outbox"
)

// claim claims ids for sending. A claim Postgres refuses for a row's data
// (outbox.IsRowError) would fail every retry of the same ids, so the batch is
// halved until the row at fault stands alone, and that row is finished
// FAILED with the reason (finishUnclaimable). When a later part fails for
// another reason (Postgres unreachable) after an earlier part committed, the
// ids of the failed part come back as ClaimDefer, tried again in a second.
// The error is returned only when nothing was claimed.
func (c *channel) claim(ctx context.Context, ids []int64) ([]outbox.Claimed, error) {
	e := c.e
	claimed, err := e.store.Claim(ctx, ids, e.now(), c.staleAfter())
	if err == nil || !outbox.IsRowError(err) {
		return claimed, err
	}
	if len(ids) == 1 {
		return []outbox.Claimed{c.finishUnclaimable(ctx, ids[0], err)}, nil
	}
	c.log.Warn("claim refused for a row's data; splitting the batch to find it", "ids", len(ids), "error", err)
	mid := len(ids) / 2
	first, err := c.claim(ctx, ids[:mid])
	if err != nil {
		return nil, err
	}
	rest, err := c.claim(ctx, ids[mid:])
	if err != nil {
		rest = deferAll(ids[mid:], e.now().Add(time.Second))
	}
	return append(first, rest...), nil
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

// overClaimed splits from send the rows claimed more often than the
// channel's retry.max_attempts allows. A claim beyond the budget means the
// earlier attempts' outcomes were lost (the process died while sending, or
// its settle never landed); a message that crashes its sender must not crash
// it again, and one whose settles keep failing must not be sent without end.
// They are settled FAILED with the reason instead of being sent.
func (c *channel) overClaimed(send []outbox.Claimed) (keep []outbox.Claimed, over []settleItem) {
	keep = send[:0:0]
	now := c.e.now()
	for _, cl := range send {
		if cl.Attempt <= c.policy.MaxAttempts {
			keep = append(keep, cl)
			continue
		}
		over = append(over, settleItem{ch: c, s: outbox.Settlement{
			ID: cl.ID, Attempt: cl.Attempt, Result: outbox.ResultFailed, Outcome: outbox.OutcomePermanent,
			Error: fmt.Sprintf("claimed for attempt %d, past retry.max_attempts %d, with no outcome recorded for the earlier ones "+
				"(the sending process died or its settle failed each time); not sent again", cl.Attempt, c.policy.MaxAttempts),
			StartedAt: now, FinishedAt: now,
		}})
	}
	return keep, over
}
