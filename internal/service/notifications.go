package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Enqueue writes ns into the outbox as PENDING, in one statement: every
// notification must be on a channel this instance runs (a row for another
// would wait for good) and within the bounds (outbox.Validate); the first
// one that is not is refused, Invalid, naming its position and field. A
// repeated idempotency key returns the original with Duplicate set. Each new
// notification keeps traceParent (its enqueue's trace; "" = none). A new
// notification on a channel stopped on this instance is still written, with
// a Warning saying it waits until the channel runs (docs/design.md §1).
func (s *Service) Enqueue(ctx context.Context, ns []wire.Notification, traceParent string) ([]wire.Enqueued, error) {
	rows := make([]outbox.NewNotification, len(ns))
	for i, n := range ns {
		if !s.Configured(n.Channel) {
			return nil, refuse(Invalid, "notification %d: channel %q is not configured", i, n.Channel)
		}
		rows[i] = outbox.NewNotification{
			Channel: n.Channel, Recipient: n.Recipient, Payload: n.Payload,
			IdempotencyKey: n.IdempotencyKey, DueAt: n.SendAt, TraceParent: traceParent,
		}
	}
	if err := outbox.Validate(rows); err != nil {
		return nil, refuse(Invalid, "%v", err)
	}
	res, err := s.store.Insert(ctx, rows)
	if err != nil {
		return nil, err
	}
	out := make([]wire.Enqueued, len(res))
	created := map[string]bool{}
	for i, in := range res {
		out[i] = wire.Enqueued{ID: in.ID, Status: in.Status, Duplicate: in.Duplicate}
		if !in.Duplicate {
			created[ns[i].Channel] = true
		}
	}
	warnings := s.StoppedWarnings(ctx, slices.Collect(maps.Keys(created))...)
	for i := range out {
		out[i].Warning = warnings[ns[i].Channel]
	}
	return out, nil
}

// Notification reads one notification with its attempt history, its receipt
// and what holds it back (Waiting); an unknown id is NotFound.
func (s *Service) Notification(ctx context.Context, id int64) (wire.NotificationInfo, error) {
	n, err := s.store.Get(ctx, id)
	if errors.Is(err, outbox.ErrNotFound) {
		return wire.NotificationInfo{}, refuse(NotFound, "notification %d does not exist", id)
	}
	if err != nil {
		return wire.NotificationInfo{}, fmt.Errorf("read notification %d: %w", id, err)
	}
	out := notificationInfo(n, true)
	out.Waiting = s.waiting(ctx, n.Channel, n.Status)
	return out, nil
}

// NotificationByKey reads the notification of an idempotency key, without
// its history; NotFound when none has it.
func (s *Service) NotificationByKey(ctx context.Context, key string) (wire.NotificationInfo, error) {
	n, err := s.store.GetByIdempotencyKey(ctx, key)
	if errors.Is(err, outbox.ErrNotFound) {
		return wire.NotificationInfo{}, refuse(NotFound, "no notification has the idempotency key %q", wire.Truncate(key, 100))
	}
	if err != nil {
		return wire.NotificationInfo{}, fmt.Errorf("read notification by idempotency key: %w", err)
	}
	return notificationInfo(n, false), nil
}

// RecipientLimitMax bounds the limit of NotificationsByRecipient.
const RecipientLimitMax = 1000

// NotificationsByRecipient lists a recipient's notifications, newest first,
// with ids below before (0: from the newest): at most limit (1 to
// RecipientLimitMax) and at most outbox.MaxPageBytes past the first.
// NextBefore is the last id of a page that may have more after it.
func (s *Service) NotificationsByRecipient(ctx context.Context, recipient string, before int64, limit int) (wire.RecipientPage, error) {
	if limit <= 0 || limit > RecipientLimitMax {
		return wire.RecipientPage{}, refuse(Invalid, "limit %d: want 1 to %d", limit, RecipientLimitMax)
	}
	rows, cut, err := s.store.ListByRecipient(ctx, recipient, before, limit)
	if err != nil {
		return wire.RecipientPage{}, fmt.Errorf("list notifications by recipient: %w", err)
	}
	page := wire.RecipientPage{Notifications: notificationInfos(rows)}
	if len(rows) == limit || (cut && len(rows) > 0) {
		page.NextBefore = rows[len(rows)-1].ID
	}
	return page, nil
}

// waiting says what holds an unfinished notification back beyond its due
// time, when it is its channel: "channel paused: <reason>", "channel breaker
// open until <time>" or "channel breaker half-open: probing"; "" otherwise
// (and always without an engine).
func (s *Service) waiting(ctx context.Context, channel, status string) string {
	if s.engine == nil || (status != outbox.StatusPending && status != outbox.StatusQueued) {
		return ""
	}
	for _, st := range s.engine.Channels(ctx) {
		if st.Name != channel {
			continue
		}
		switch {
		case st.Paused:
			return "channel paused: " + st.Reason
		case st.Breaker == "open":
			return "channel breaker open until " + st.BreakerUntil.UTC().Format(time.RFC3339) + " (the provider kept failing; sends resume with a few probes)"
		case st.Breaker == "half-open":
			return "channel breaker half-open: probing whether the provider answers again"
		}
	}
	return ""
}

// notificationInfo is the wire form of a row; history only for a single read.
func notificationInfo(n *outbox.Notification, history bool) wire.NotificationInfo {
	out := wire.NotificationInfo{
		ID: n.ID, Channel: n.Channel, Recipient: n.Recipient, Payload: n.Payload,
		IdempotencyKey: n.IdempotencyKey, Status: n.Status, Attempts: n.AttemptCount,
		DueAt: n.DueAt, NextAttemptAt: n.NextAttemptAt, LastError: n.LastError, Result: n.Result,
		JobID: n.JobID, CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt, SentAt: n.SentAt,
	}
	if n.Status != outbox.StatusQueued {
		// Only a retry's due time is a next attempt (while PROCESSING the
		// column keeps a taken-over claim's start: outbox.Claim).
		out.NextAttemptAt = time.Time{}
	}
	if history {
		out.History, out.HistoryCut = make([]wire.Attempt, len(n.Attempts)), n.AttemptsCut
		for i, a := range n.Attempts {
			out.History[i] = wire.Attempt{
				Attempt: a.Attempt, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt,
				DurationSeconds: a.Duration().Seconds(), Outcome: a.Outcome,
				ProviderStatus: a.ProviderStatus, ProviderCode: a.ProviderCode, Error: a.Error,
			}
		}
		if r := n.Receipt; r != nil {
			out.Receipt = &wire.Receipt{
				Outcome: r.Outcome, Attempt: r.Attempt, Detail: r.Detail, ProviderCode: r.ProviderCode,
				ReportedAt: r.ReportedAt, ReceivedAt: r.ReceivedAt,
			}
		}
	}
	return out
}

func notificationInfos(rows []outbox.Notification) []wire.NotificationInfo {
	out := make([]wire.NotificationInfo, len(rows))
	for i := range rows {
		out[i] = notificationInfo(&rows[i], false)
	}
	return out
}
