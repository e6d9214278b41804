package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"

	"github.com/notifyd/notifyd/core/outbox"
	"github.com/notifyd/notifyd/sdk/client"
)

// DLQ paging defaults.
const (
	dlqLimitDefault = 100
	dlqLimitMax     = 1000
	// replayChunk is how many rows one ReplayChannel transaction moves.
	replayChunk = 1000
)

// dlqList: GET /v1/dlq?channel=&limit=&after=. The dead-letter queue is read
// from Postgres, the truth; Redis' dead list is only an index of it.
func (s *Server) dlqList(w http.ResponseWriter, r *http.Request) error {
	limit, e := queryInt(r, "limit", dlqLimitDefault, 1, dlqLimitMax)
	if e != nil {
		return e
	}
	after, e := queryInt(r, "after", 0, 0, 1<<62)
	if e != nil {
		return e
	}
	channel := r.URL.Query().Get("channel")
	rows, err := s.store.ListFailed(r.Context(), channel, after, int(limit))
	if err != nil {
		return err
	}
	page := client.DLQPage{Notifications: make([]client.NotificationInfo, len(rows))}
	for i := range rows {
		page.Notifications[i] = notificationInfo(&rows[i], false)
	}
	if len(rows) == int(limit) {
		page.NextAfter = rows[len(rows)-1].ID
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// dlqReplay: POST /v1/dlq/replay {"ids": [...]} | {"channel": "..."}.
// Postgres first (FAILED → QUEUED, attempts reset), then Redis through
// Engine.Revive (off the dead list, onto ready). A crash or Redis error between the two
// loses nothing: the rows are QUEUED, and the sweeper pushes QUEUED rows it
// does not see moving.
func (s *Server) dlqReplay(w http.ResponseWriter, r *http.Request) error {
	sel, e := decodeSelector(r.Body, true)
	if e != nil {
		return e
	}
	ctx := r.Context()
	if _, ok := s.cfg.Channels[sel.Channel]; sel.IDs == nil && !ok {
		// As the dashboard: nobody here would deliver them.
		return invalid("channel: %q is not configured on this instance; its dead letters cannot be replayed (purge them, or configure the channel)", sel.Channel)
	}
	var replayed []outbox.Queued
	if sel.IDs != nil {
		if _, err := s.checkFailed(ctx, sel); err != nil {
			return err
		}
		rows, err := s.store.Replay(ctx, sel.IDs)
		if err != nil {
			return err
		}
		replayed = rows
	}
	// Past a commit, a client that hangs up must not stop the push.
	rctx := context.WithoutCancel(ctx)
	var reviveErr error
	if sel.IDs == nil {
		// A whole channel, a chunk at a time: each chunk is pushed as soon
		// as it is committed, so a large dead-letter queue is never held in
		// memory whole before its first notification goes back.
		for {
			rows, err := s.store.ReplayChannel(ctx, sel.Channel, replayChunk)
			if err != nil {
				return err
			}
			replayed = append(replayed, rows...)
			if err := s.engine.Revive(rctx, rows); err != nil && reviveErr == nil {
				reviveErr = err
			}
			if len(rows) < replayChunk {
				break
			}
		}
	} else {
		reviveErr = s.engine.Revive(rctx, replayed)
	}
	out := client.Replayed{Replayed: int64(len(replayed)), IDs: make([]int64, len(replayed))}
	for i, q := range replayed {
		out.IDs[i] = q.ID
	}
	if err := reviveErr; err != nil {
		s.log.Warn("DLQ replay: rows are QUEUED but the Redis push failed; the sweeper will queue them", "rows", len(replayed), "error", err)
		out.Warning = fmt.Sprintf("replayed in Postgres, but queueing in Redis failed (%v); the sweeper queues them within delivery.sweep_after (%s)",
			err, s.cfg.Delivery.SweepAfter)
	}
	sort.Slice(out.IDs, func(i, j int) bool { return out.IDs[i] < out.IDs[j] })
	writeJSON(w, http.StatusOK, out)
	return nil
}

// dlqPurge: POST /v1/dlq/purge {"ids": [...]} and/or {"channel": "..."}.
// Deletes FAILED rows and their history; then drops them from Redis' dead
// lists.
func (s *Server) dlqPurge(w http.ResponseWriter, r *http.Request) error {
	sel, e := decodeSelector(r.Body, false)
	if e != nil {
		return e
	}
	ctx := r.Context()
	channels := []string{sel.Channel}
	if sel.IDs != nil {
		st, err := s.checkFailed(ctx, sel)
		if err != nil {
			return err
		}
		channels = channels[:0]
		for _, v := range st {
			if !slices.Contains(channels, v.Channel) {
				channels = append(channels, v.Channel)
			}
		}
	}
	n, err := s.store.PurgeFailed(ctx, sel.Channel, sel.IDs)
	if err != nil {
		return err
	}
	rctx := context.WithoutCancel(ctx)
	for _, ch := range channels {
		if err := s.engine.DeadRemove(rctx, ch, sel.IDs); err != nil {
			s.log.Warn("DLQ purge: remove from the Redis dead list", "channel", ch, "error", err)
		}
	}
	writeJSON(w, http.StatusOK, client.Purged{Purged: n})
	return nil
}

// checkFailed returns the ids' states, or an *Error: 404 if an id does not
// exist, 409 if one is not FAILED (or not on sel.Channel, when given), so a
// request naming a wrong id changes nothing.
func (s *Server) checkFailed(ctx context.Context, sel client.DLQSelector) (map[int64]outbox.State, error) {
	st, err := s.store.Statuses(ctx, sel.IDs)
	if err != nil {
		return nil, err
	}
	for _, id := range sel.IDs {
		cur, ok := st[id]
		switch {
		case !ok:
			return nil, notFound("ids: notification %d does not exist", id)
		case cur.Status != outbox.StatusFailed:
			return nil, conflict("ids: notification %d is %s, not FAILED; nothing was changed", id, cur.Status)
		case sel.Channel != "" && cur.Channel != sel.Channel:
			return nil, conflict("ids: notification %d is on channel %q, not %q; nothing was changed", id, cur.Channel, sel.Channel)
		}
	}
	return st, nil
}
