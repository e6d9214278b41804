package api

import (
	"fmt"
	"net/http"

	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/sdk/wire"
)

// DLQ paging defaults.
const (
	dlqLimitDefault = 100
	dlqLimitMax     = 1000
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
	rows, err := s.ops.Dead(r.Context(), r.URL.Query().Get("channel"), after, int(limit))
	if err != nil {
		return err
	}
	page := wire.DLQPage{Notifications: make([]wire.NotificationInfo, len(rows))}
	for i := range rows {
		page.Notifications[i] = notificationInfo(&rows[i], false)
	}
	if len(rows) == int(limit) {
		page.NextAfter = rows[len(rows)-1].ID
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// dlqReplay: POST /v1/dlq/replay {"ids": [...]} | {"channel": "..."}; the
// service replays (service.Replay: ids it cannot replay are skipped, with
// the reason).
func (s *Server) dlqReplay(w http.ResponseWriter, r *http.Request) error {
	sel, e := decodeSelector(r.Body, true)
	if e != nil {
		return e
	}
	if sel.IDs == nil && !s.ops.Configured(sel.Channel) {
		// Checked here too: the service reads an empty channel as "every
		// channel", which the API does not offer.
		return invalid("channel: %q is not configured on this instance; its dead letters cannot be replayed (purge them, or configure the channel)", sel.Channel)
	}
	res, err := s.ops.Replay(r.Context(), service.Selector{IDs: sel.IDs, Channel: sel.Channel})
	if err != nil {
		return err
	}
	out := wire.Replayed{Replayed: int64(len(res.IDs)), IDs: res.IDs, Skipped: skipped(res.Skipped)}
	if out.IDs == nil {
		out.IDs = []int64{}
	}
	if res.RedisErr != nil {
		out.Warning = fmt.Sprintf("replayed in Postgres, but queueing in Redis failed (%v); the sweeper queues them within delivery.sweep_after (%s)",
			res.RedisErr, res.SweepAfter)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// dlqPurge: POST /v1/dlq/purge {"ids": [...]} and/or {"channel": "..."};
// the service purges (service.Purge).
func (s *Server) dlqPurge(w http.ResponseWriter, r *http.Request) error {
	sel, e := decodeSelector(r.Body, false)
	if e != nil {
		return e
	}
	res, err := s.ops.Purge(r.Context(), service.Selector{IDs: sel.IDs, Channel: sel.Channel})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.Purged{Purged: res.N, Skipped: skipped(res.Skipped)})
	return nil
}

func skipped(in []service.Skipped) []wire.Skipped {
	var out []wire.Skipped
	for _, sk := range in {
		out = append(out, wire.Skipped{ID: sk.ID, Reason: sk.Reason})
	}
	return out
}
