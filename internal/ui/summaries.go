package ui

import (
	"context"
	"net/http"

	"github.com/notifyd/notifyd/internal/httpguard"

	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/sdk/wire"
)

// summarizer reads what the dashboard's lists show of each row, and nothing
// more (service.Summary: no payload, result or attempt log, the error cut
// in Postgres), so a list's memory is its row count times
// httpguard.SummaryBytes whatever its rows' bodies are. Before, the
// dead-letter list and the look-up by recipient read whole rows (a 1 MiB
// payload and a 4 MiB result each, up to 16 MiB a page) to show a line of
// each.
type summarizer interface {
	DeadSummaries(ctx context.Context, q wire.DLQQuery) (service.SummaryPage, error)
	NotificationSummaries(ctx context.Context, recipient string, before int64, limit int) (service.SummaryPage, error)
	NotificationSummary(ctx context.Context, id int64) (service.Summary, error)
	NotificationSummaryByKey(ctx context.Context, key string) (service.Summary, error)
}

// summaries is Deps.Ops's summarizer: the service's (Ops is a
// *service.Service, as notifyd runs the dashboard, or forwards to one, as
// *notifyd.Daemon does). nil for an Ops that has none: the pages then read
// whole rows and show their summaries (fullSummaries), charged as such.
func (s *server) summaries() summarizer {
	switch ops := s.d.Ops.(type) {
	case summarizer:
		return ops
	case interface{ Service() *service.Service }:
		if svc := ops.Service(); svc != nil {
			return svc
		}
	}
	return nil
}

// fullSummaries is what a list shows of rows read whole.
func fullSummaries(ns []wire.NotificationInfo) []service.Summary {
	out := make([]service.Summary, len(ns))
	for i, n := range ns {
		out[i] = service.Summary{
			ID: n.ID, Channel: n.Channel, Recipient: n.Recipient, Status: n.Status, Attempts: n.Attempts,
			CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt, SentAt: n.SentAt, LastError: n.LastError,
		}
	}
	return out
}

// findNotification reads what a look-up by id (key "") or by idempotency key
// needs to know of a notification: its id, or a NotFound refusal. It holds
// the read's bound of the bound on answers in flight meanwhile: a summary's
// (httpguard.SummaryBytes), or, when Ops has no summarizer, the whole row's
// with its attempt log (httpguard.NotificationGetBytes). When the bound
// stays full it has answered (a 503 page), and ok is false.
func (s *server) findNotification(w http.ResponseWriter, r *http.Request, id int64, key string) (found int64, ok bool, err error) {
	sum := s.summaries()
	charge := int64(httpguard.SummaryBytes)
	if sum == nil {
		charge = httpguard.NotificationGetBytes
	}
	release, ok := s.hold(w, r, charge)
	if !ok {
		return 0, false, nil
	}
	defer release()
	ctx := r.Context()
	switch {
	case sum != nil && key == "":
		m, err := sum.NotificationSummary(ctx, id)
		return m.ID, true, err
	case sum != nil:
		m, err := sum.NotificationSummaryByKey(ctx, key)
		return m.ID, true, err
	case key == "":
		n, err := s.d.Ops.Notification(ctx, id)
		return n.ID, true, err
	default:
		n, err := s.d.Ops.NotificationByKey(ctx, key)
		return n.ID, true, err
	}
}
