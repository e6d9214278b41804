package ui

import (
	"context"

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
