package api

import (
	"net/http"

	"github.com/notifyd/notifyd/internal/httpguard"

	"github.com/notifyd/notifyd/sdk/wire"
)

// DLQ paging defaults.
const (
	dlqLimitDefault = 100
	dlqLimitMax     = 1000
)

// dlqList: GET /v1/dlq?channel=&limit=&after=. The dead-letter queue is read
// from Postgres, the truth; Redis' dead list is only an index of it. The
// page holds its share of the bound on answers in flight until it has
// answered (httpguard.HoldAnswer).
func (s *Server) dlqList(w http.ResponseWriter, r *http.Request) error {
	limit, e := queryInt(r, "limit", dlqLimitDefault, 1, dlqLimitMax)
	if e != nil {
		return e
	}
	after, e := queryInt(r, "after", 0, 0, 1<<62)
	if e != nil {
		return e
	}
	release, err := holdAnswer(r, httpguard.PageCharge(int(limit), httpguard.NotificationBytes))
	if err != nil {
		return err
	}
	defer release()
	page, err := s.ops.Dead(r.Context(), wire.DLQQuery{Channel: r.URL.Query().Get("channel"), After: after, Limit: int(limit)})
	if err != nil {
		return err
	}
	return writeAnswer(w, r, http.StatusOK, page)
}

// dlqReplay: POST /v1/dlq/replay {"ids": [...]} | {"channel": "..."}; the
// service replays (service.Replay: ids it cannot replay are skipped, with
// the reason).
func (s *Server) dlqReplay(w http.ResponseWriter, r *http.Request) error {
	sel, e := decodeSelector(r.Body, true)
	if e != nil {
		return e
	}
	if _, ok := s.cfg.Channels[sel.Channel]; sel.IDs == nil && !ok {
		// Checked here too: the service reads an empty channel as "every
		// channel", which the API does not offer.
		return invalid("channel: %q is not configured on this instance; its dead letters cannot be replayed (purge them, or configure the channel)", sel.Channel)
	}
	out, err := s.ops.Replay(r.Context(), sel)
	if err != nil {
		return err
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
	out, err := s.ops.Purge(r.Context(), sel)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
