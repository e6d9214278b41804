package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Summary is what a list of notifications shows of one (outbox.Summary):
// no payload, result or attempt log, its error cut.
type Summary = outbox.Summary

// DeadSummaries pages through the dead letters as Dead does (q.Channel ""
// = every channel; q.Limit 1 to outbox.MaxSummaryPage, 0 the default),
// reading each row's summary only, so a page holds at most its row count
// times outbox.SummaryBytes whatever its rows' payloads and results are:
// the dashboard's dead-letter list, which shows nothing else.
func (s *Service) DeadSummaries(ctx context.Context, q wire.DLQQuery) ([]Summary, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DeadLimitDefault
	}
	if limit > outbox.MaxSummaryPage {
		return nil, refuse(Invalid, "limit %d: want 1 to %d", limit, outbox.MaxSummaryPage)
	}
	rows, err := s.store.ListFailedSummaries(ctx, q.Channel, q.After, limit)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return rows, nil
}

// NotificationSummaries lists a recipient's notifications as
// NotificationsByRecipient does (newest first, ids below before, limit 1 to
// outbox.MaxSummaryPage), reading each one's summary only: the dashboard's
// look-up by recipient. A page is never cut for its size (a summary's is
// bounded); a caller that wants to know whether more follow asks for one
// more row than it shows.
func (s *Service) NotificationSummaries(ctx context.Context, recipient string, before int64, limit int) ([]Summary, error) {
	if limit <= 0 || limit > outbox.MaxSummaryPage {
		return nil, refuse(Invalid, "limit %d: want 1 to %d", limit, outbox.MaxSummaryPage)
	}
	rows, err := s.store.ListSummariesByRecipient(ctx, recipient, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list notifications by recipient: %w", err)
	}
	return rows, nil
}

// NotificationSummary reads notification id's summary; NotFound when there
// is none. What a look-up reads to know a notification exists (the
// dashboard's by id), instead of Notification's row and attempt log.
func (s *Service) NotificationSummary(ctx context.Context, id int64) (Summary, error) {
	m, err := s.store.SummaryOf(ctx, id)
	if errors.Is(err, outbox.ErrNotFound) {
		return Summary{}, refuse(NotFound, "notification %d does not exist", id)
	}
	return m, err
}

// NotificationSummaryByKey reads the summary of the notification of an
// idempotency key; NotFound when none has it.
func (s *Service) NotificationSummaryByKey(ctx context.Context, key string) (Summary, error) {
	m, err := s.store.SummaryByKey(ctx, key)
	if errors.Is(err, outbox.ErrNotFound) {
		return Summary{}, refuse(NotFound, "no notification has the idempotency key %q", wire.Truncate(key, 100))
	}
	return m, err
}
