package api

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/trace"

	"github.com/notifyd/notifyd/internal/httpguard"
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
	out, err := s.ops.Enqueue(ctx, ns, tp)
	if err != nil {
		return err
	}
	// 202 when one is new. A stopped channel's notification is 202 too, with
	// a warning: the outbox keeps it (docs/design.md §1).
	status := http.StatusOK
	created := map[string]int{}
	for i, in := range out {
		if !in.Duplicate {
			status = http.StatusAccepted
			created[ns[i].Channel]++
		}
	}
	for ch, n := range created {
		s.metrics.Delivery().Enqueued(ch, n)
	}
	if batch {
		writeJSON(w, status, wire.EnqueuedBatch{Notifications: out})
	} else {
		writeJSON(w, status, out[0])
	}
	return nil
}

// getNotification: GET /v1/notifications/{id}, holding the row's read
// bound (httpguard.NotificationGetBytes: its payload, result and attempt
// log, ~9 MiB at their largest) of the bound on answers in flight until it
// has answered, as a page does.
func (s *Server) getNotification(w http.ResponseWriter, r *http.Request) error {
	id, e := parseID(r, "notification")
	if e != nil {
		return e
	}
	return answerHeld(w, r, httpguard.NotificationGetBytes, http.StatusOK, func(ctx context.Context) (wire.NotificationInfo, error) {
		return s.ops.Notification(ctx, id)
	})
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
	writeJSON(w, http.StatusOK, wire.Cancelled{ID: id, Status: wire.StatusCancelled})
	return nil
}
