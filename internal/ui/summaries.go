package ui

import (
	"net/http"

	"github.com/notifyd/notifyd/internal/httpguard"
)

// findNotification reads what a look-up by id (key "") or by idempotency key
// needs to know of a notification: its id, or a NotFound refusal. It reads
// the row's summary (service.Operations.NotificationSummary, ...ByKey: no
// payload, result or attempt log), holding its bound of the bound on answers
// in flight (httpguard.SummaryBytes) meanwhile. When the bound stays full it
// has answered (a 503 page), and ok is false.
func (s *server) findNotification(w http.ResponseWriter, r *http.Request, id int64, key string) (found int64, ok bool, err error) {
	release, ok := s.hold(w, r, httpguard.SummaryBytes)
	if !ok {
		return 0, false, nil
	}
	defer release()
	if key == "" {
		m, err := s.d.Ops.NotificationSummary(r.Context(), id)
		return m.ID, true, err
	}
	m, err := s.d.Ops.NotificationSummaryByKey(r.Context(), key)
	return m.ID, true, err
}
