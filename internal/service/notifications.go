package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
)

// Enqueue writes ns into the outbox as PENDING, in one statement: every
// notification must be on a channel this instance runs (a row for another
// would wait for good) and within the bounds (outbox.Validate); the first
// one that is not is refused, Invalid, naming its position and field. A
// repeated idempotency key returns the original with Duplicate set.
func (s *Service) Enqueue(ctx context.Context, ns []outbox.NewNotification) ([]outbox.Inserted, error) {
	for i, n := range ns {
		if !s.Configured(n.Channel) {
			return nil, refuse(Invalid, "notification %d: channel %q is not configured", i, n.Channel)
		}
	}
	if err := outbox.Validate(ns); err != nil {
		return nil, refuse(Invalid, "%v", err)
	}
	return s.store.Insert(ctx, ns)
}

// Notification reads one notification with its attempt history; an unknown
// id is NotFound.
// Waiting says what holds an unfinished notification back beyond its due
// time, when it is its channel: "channel paused: <reason>", "channel breaker
// open until <time>" or "channel breaker half-open: probing"; "" otherwise
// (and always without an engine).
func (s *Service) Waiting(ctx context.Context, n *outbox.Notification) string {
	if s.engine == nil || (n.Status != outbox.StatusPending && n.Status != outbox.StatusQueued) {
		return ""
	}
	for _, st := range s.engine.Channels(ctx) {
		if st.Name != n.Channel {
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

func (s *Service) Notification(ctx context.Context, id int64) (*outbox.Notification, error) {
	n, err := s.store.Get(ctx, id)
	if errors.Is(err, outbox.ErrNotFound) {
		return nil, refuse(NotFound, "notification %d does not exist", id)
	}
	if err != nil {
		return nil, fmt.Errorf("read notification %d: %w", id, err)
	}
	return n, nil
}
