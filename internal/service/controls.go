package service

import (
	"context"

	"github.com/notifyd/notifyd/internal/outbox"
)

// Pause stops every instance sending on channel; its messages wait in the
// queue. The pause is kept in Postgres, so it survives a Redis wipe and a
// restart. reason (at most outbox.MaxReasonLen bytes) is shown to
// operators.
func (s *Service) Pause(ctx context.Context, channel, reason string) error {
	if err := s.needEngine(); err != nil {
		return err
	}
	if !s.Configured(channel) {
		return refuse(NotFound, "channel %q is not configured", channel)
	}
	if len(reason) > outbox.MaxReasonLen {
		return refuse(Invalid, "reason: %d bytes long, at most %d", len(reason), outbox.MaxReasonLen)
	}
	if err := outbox.CheckText(reason); err != nil {
		return refuse(Invalid, "reason %v", err)
	}
	return s.engine.Pause(ctx, channel, reason)
}

// Resume lets a paused channel send again.
func (s *Service) Resume(ctx context.Context, channel string) error {
	if err := s.needEngine(); err != nil {
		return err
	}
	if !s.Configured(channel) {
		return refuse(NotFound, "channel %q is not configured", channel)
	}
	return s.engine.Resume(ctx, channel)
}

// Cancel cancels a PENDING or QUEUED notification in Postgres; if it is in
// a Redis queue, the claim drops it. Cancelling a cancelled notification
// succeeds with changed false (a repeated request changes nothing); any
// other state is a Conflict, and an unknown id NotFound.
func (s *Service) Cancel(ctx context.Context, id int64) (changed bool, err error) {
	ids, err := s.store.Cancel(ctx, []int64{id})
	if err != nil || len(ids) == 1 {
		return len(ids) == 1, err
	}
	st, err := s.store.Statuses(ctx, []int64{id})
	if err != nil {
		return false, err
	}
	cur, ok := st[id]
	switch {
	case !ok:
		return false, refuse(NotFound, "notification %d does not exist", id)
	case cur.Status != outbox.StatusCancelled:
		return false, refuse(Conflict, "notification %d is %s; only PENDING or QUEUED notifications can be cancelled", id, cur.Status)
	}
	return false, nil
}
