package service

import (
	"context"
	"fmt"
	"slices"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Selector picks dead letters: IDs, or every one of Channel. With IDs,
// Channel (when set) restricts them to that channel.
type Selector = wire.DLQSelector

// DeadLimitDefault is the page size of Dead when the query gives none.
const DeadLimitDefault = 100

// MaxReplayedIDs bounds the ids a replay's answer lists (Replayed counts
// every row): listing every row of a channel's replay held 8 bytes a dead
// letter and answered about 9 (10 million: a 90 MB answer, past what
// sdk/client reads).
const MaxReplayedIDs = 10_000

// Dead lists FAILED rows from Postgres (the truth; Redis' dead list is an
// index of it), oldest first, keyset-paged after q.After: at most q.Limit
// rows (DeadLimitDefault when 0). NextAfter is the last id of a full page.
func (s *Service) Dead(ctx context.Context, q wire.DLQQuery) (wire.DLQPage, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DeadLimitDefault
	}
	rows, cut, err := s.store.ListFailed(ctx, q.Channel, q.After, limit)
	if err != nil {
		return wire.DLQPage{}, err
	}
	page := wire.DLQPage{Notifications: notificationInfos(rows)}
	if len(rows) == limit || (cut && len(rows) > 0) {
		page.NextAfter = rows[len(rows)-1].ID
	}
	return page, nil
}

// Replay sends dead letters back to their channel's queue with a fresh
// retry budget: Postgres first (FAILED → QUEUED), then Redis (off the dead
// list, onto ready). A crash or a Redis error between the two loses
// nothing: the rows are QUEUED, and the sweeper pushes QUEUED rows it does
// not see moving.
//
// By ids, it replays those that are FAILED on a channel this instance runs
// and reports the others in Skipped (one behaviour for every door: a
// repeated request replays nothing twice and says why). By channel, the
// channel must be configured here (nobody else would deliver them); with
// neither, every configured channel. Either way it works in transactions
// of ChunkRows, pushing each chunk as soon as it commits.
//
// Replayed counts the rows moved FAILED → QUEUED (attempts reset); IDs
// lists them, ascending, up to MaxReplayedIDs (the first ones moved): a
// channel's replay may move millions. When pushing them to Redis after their
// Postgres commit fails, they are QUEUED and the sweeper pushes them within
// delivery.sweep_after: nothing is lost, and Warning says so.
func (s *Service) Replay(ctx context.Context, sel Selector) (out wire.Replayed, _ error) {
	var redisErr error
	var moved int64
	out.IDs = []int64{}
	defer func() {
		out.Replayed = moved
		if redisErr != nil {
			out.Warning = fmt.Sprintf("replayed in Postgres, but queueing in Redis failed (%v); the sweeper queues them within delivery.sweep_after (%s)",
				redisErr, s.cfg.Delivery.SweepAfter)
		}
	}()
	if err := s.needEngine(); err != nil {
		return out, err
	}
	// Past a commit, a caller that hangs up must not stop the push.
	rctx := context.WithoutCancel(ctx)
	push := func(rows []outbox.Queued) {
		moved += int64(len(rows))
		for _, q := range rows {
			if len(out.IDs) < MaxReplayedIDs {
				out.IDs = append(out.IDs, q.ID)
			}
		}
		if err := s.engine.Revive(rctx, rows); err != nil && redisErr == nil {
			redisErr = err
			s.log.Warn("replay: rows are QUEUED in Postgres but the Redis push failed; the sweeper will queue them",
				"rows", len(rows), "error", err)
		}
	}
	if sel.IDs != nil {
		for chunk := range slices.Chunk(sel.IDs, ChunkRows) {
			ok, skipped, err := s.failedAmong(ctx, chunk, sel.Channel, true)
			if err != nil {
				return out, err
			}
			out.Skipped = append(out.Skipped, skipped...)
			if len(ok) == 0 {
				continue
			}
			rows, err := s.store.Replay(ctx, ok)
			if err != nil {
				return out, err
			}
			out.Skipped = append(out.Skipped, lost(ok, queuedIDs(rows), "was no longer FAILED")...)
			push(rows)
		}
		slices.Sort(out.IDs)
		return out, nil
	}
	channels := s.ChannelNames()
	if sel.Channel != "" {
		if !s.Configured(sel.Channel) {
			return out, refuse(Invalid, "channel %q is not configured on this instance; its dead letters cannot be replayed (purge them, or configure the channel)", sel.Channel)
		}
		channels = []string{sel.Channel}
	}
	for _, ch := range channels {
		// The pass replays every dead letter of ch, so its Redis dead list
		// (statistics: the dead letters are FAILED rows) goes first, whole:
		// dropping each chunk's ids from it (Revive) read the whole list
		// again for every 1,000, O(n²/1,000) over n dead letters. A row
		// that fails again during the pass is listed again by its failure.
		if err := s.engine.DeadRemove(ctx, ch, nil); err != nil {
			s.log.Warn("replay: drop the channel's Redis dead list", "channel", ch, "error", err)
		}
		// A keyset pass: a row replayed and failed again while the pass
		// runs is behind it, so the pass visits each row once and ends.
		for after := int64(0); ; {
			rows, err := s.store.ReplayChannel(ctx, ch, after, ChunkRows)
			if err != nil {
				return out, err
			}
			push(rows)
			if len(rows) < ChunkRows {
				break
			}
			after = slices.Max(queuedIDs(rows))
		}
	}
	slices.Sort(out.IDs)
	return out, nil
}

// Purge deletes dead letters for good, with their attempt history, then
// drops them from Redis' dead lists (a Redis failure only leaves stale ids
// in a dead list, which nothing reads as the truth).
//
// By ids, it deletes those that are FAILED (on Channel, when set) and
// reports the others in Skipped. By channel — configured or not: purging is
// how an operator clears a channel that is gone — every FAILED row of it,
// in transactions of ChunkRows, then its Redis dead list whole. Purging
// every channel at once is refused.
func (s *Service) Purge(ctx context.Context, sel Selector) (wire.Purged, error) {
	var out wire.Purged
	if err := s.needEngine(); err != nil {
		return out, err
	}
	rctx := context.WithoutCancel(ctx)
	dropDead := func(channel string, ids []int64) {
		if err := s.engine.DeadRemove(rctx, channel, ids); err != nil {
			s.log.Warn("purge: drop ids from the Redis dead list", "channel", channel, "error", err)
		}
	}
	if sel.IDs != nil {
		for chunk := range slices.Chunk(sel.IDs, ChunkRows) {
			ok, skipped, err := s.failedAmong(ctx, chunk, sel.Channel, false)
			if err != nil {
				return out, err
			}
			out.Skipped = append(out.Skipped, skipped...)
			if len(ok) == 0 {
				continue
			}
			st, err := s.store.Statuses(ctx, ok)
			if err != nil {
				return out, err
			}
			n, err := s.store.PurgeFailed(ctx, "", ok)
			out.Purged += n
			if err != nil {
				return out, err
			}
			byChannel := map[string][]int64{}
			for _, id := range ok {
				byChannel[st[id].Channel] = append(byChannel[st[id].Channel], id)
			}
			for ch, ids := range byChannel {
				dropDead(ch, ids)
			}
		}
		return out, nil
	}
	if sel.Channel == "" {
		return out, refuse(Invalid, "purge needs ids or a channel: purging every channel's dead letters at once is not offered")
	}
	for after := int64(0); ; {
		ids, err := s.store.FailedIDs(ctx, sel.Channel, after, ChunkRows)
		if err != nil {
			return out, err
		}
		if len(ids) > 0 {
			n, err := s.store.PurgeFailed(ctx, sel.Channel, ids)
			out.Purged += n
			if err != nil {
				return out, err
			}
		}
		if len(ids) < ChunkRows {
			// Every dead letter of the channel is gone: its Redis dead list
			// (statistics) goes whole, once. Dropping each chunk's ids read
			// the whole list again for every 1,000, O(n²/1,000).
			dropDead(sel.Channel, nil)
			return out, nil
		}
		after = ids[len(ids)-1]
	}
}

// failedAmong splits ids into the FAILED ones (on channel when set, and on
// a configured channel when runnable) and the skipped others, with the
// reason for each.
func (s *Service) failedAmong(ctx context.Context, ids []int64, channel string, runnable bool) ([]int64, []wire.Skipped, error) {
	st, err := s.store.Statuses(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	var ok []int64
	var skipped []wire.Skipped
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		cur, found := st[id]
		reason := ""
		switch {
		case !found:
			reason = "does not exist"
		case cur.Status != outbox.StatusFailed:
			reason = fmt.Sprintf("is %s, not FAILED", cur.Status)
		case channel != "" && cur.Channel != channel:
			reason = fmt.Sprintf("is on channel %q, not %q", cur.Channel, channel)
		case runnable && !s.Configured(cur.Channel):
			reason = fmt.Sprintf("is on channel %q, which this instance does not run (purge it, or configure the channel)", cur.Channel)
		default:
			ok = append(ok, id)
			continue
		}
		skipped = append(skipped, wire.Skipped{ID: id, Reason: reason})
	}
	return ok, skipped, nil
}

func queuedIDs(rows []outbox.Queued) []int64 {
	out := make([]int64, len(rows))
	for i, q := range rows {
		out[i] = q.ID
	}
	return out
}

// lost are the ids of want missing from got: rows that changed state
// between the check and the update.
func lost(want, got []int64, reason string) []wire.Skipped {
	var out []wire.Skipped
	for _, id := range want {
		if !slices.Contains(got, id) {
			out = append(out, wire.Skipped{ID: id, Reason: reason})
		}
	}
	return out
}
