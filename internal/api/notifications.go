package api

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/traceparent"
	"github.com/notifyd/notifyd/sdk/wire"
)

// enqueue: POST /v1/notifications. 202 with {id, status} (a list for a
// batch); 200 when every notification was a repeat of its idempotency key.
// With tracing on, the request is a server span (a child of the caller's
// traceparent, if it sent a valid one) and each new notification keeps
// its trace (docs/design.md §11).
func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) (err error) {
	ctx := r.Context()
	var tp string
	if s.tracer != nil {
		var span trace.Span
		ctx, span = startEnqueueSpan(ctx, s.tracer, r)
		defer func() { endEnqueueSpan(span, err) }()
		tp = traceparent.FromContext(ctx)
	}
	ns, batch, e := decodeEnqueue(r.Body, enqueueRules{
		maxPayload: s.cfg.HTTP.MaxPayloadBytes,
		configured: func(ch string) bool { _, ok := s.cfg.Channels[ch]; return ok },
	})
	if e != nil {
		return e
	}
	if tp != "" {
		for i := range ns {
			ns[i].TraceParent = tp
		}
	}
	res, err := s.ops.Enqueue(ctx, ns)
	if err != nil {
		return err
	}
	out := make([]wire.Enqueued, len(res))
	status := http.StatusOK
	created := map[string]int{}
	for i, in := range res {
		out[i] = wire.Enqueued{ID: in.ID, Status: in.Status, Duplicate: in.Duplicate}
		if !in.Duplicate {
			status = http.StatusAccepted
			created[ns[i].Channel]++
		}
	}
	for ch, n := range created {
		s.metrics.Delivery().Enqueued(ch, n)
	}
	// Still 202: the outbox keeps what a stopped channel cannot send yet,
	// but the caller learns it will wait (docs/design.md §1).
	warnings := s.ops.StoppedWarnings(ctx, slices.Collect(maps.Keys(created))...)
	for i := range out {
		out[i].Warning = warnings[ns[i].Channel]
	}
	if batch {
		writeJSON(w, status, wire.EnqueuedBatch{Notifications: out})
	} else {
		writeJSON(w, status, out[0])
	}
	return nil
}

// getNotification: GET /v1/notifications/{id}.
func (s *Server) getNotification(w http.ResponseWriter, r *http.Request) error {
	id, e := parseID(r, "notification")
	if e != nil {
		return e
	}
	n, err := s.ops.Notification(r.Context(), id)
	if err != nil {
		return err
	}
	out := notificationInfo(n, true)
	out.Waiting = s.ops.Waiting(r.Context(), n)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// cancel: POST /v1/notifications/{id}/cancel. PENDING and QUEUED become
// CANCELLED; cancelling a CANCELLED one again is a success; any other state
// is 409.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) error {
	id, e := parseID(r, "notification")
	if e != nil {
		return e
	}
	if _, err := s.ops.Cancel(r.Context(), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.Cancelled{ID: id, Status: outbox.StatusCancelled})
	return nil
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
		out.History = make([]wire.Attempt, len(n.Attempts))
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
