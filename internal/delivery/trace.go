package delivery

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/tracing"
	"github.com/notifyd/notifyd/sdk/traceparent"
)

// Each delivery attempt of a traced notification is one span,
// "notifyd.deliver", a child of the trace it was enqueued in (the row's
// trace_parent; docs/design.md §11): from its claim to its settle, with the
// plugin's span and the provider request beneath it. Untraced rows and a
// tracer-less engine (tracing off) never get here: send checks both first.

// startAttempt opens the attempt span of a claimed, traced row.
func (c *channel) startAttempt(cl *outbox.Claimed, claimedAt time.Time) trace.Span {
	ctx := traceparent.ContextWith(context.Background(), cl.TraceParent)
	_, span := c.e.tracer.Start(ctx, "notifyd.deliver",
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(claimedAt),
		trace.WithAttributes(
			tracing.AttrNotificationID.Int64(cl.ID),
			tracing.AttrChannel.String(c.name),
			tracing.AttrPlugin.String(c.cfg.Plugin),
			tracing.AttrAttempt.Int(cl.Attempt),
		))
	return span
}

// endAttempt records the settled outcome and ends the span. applied false:
// the settle changed nothing (a newer claim owns the row).
func endAttempt(span trace.Span, s *outbox.Settlement, applied bool) {
	span.SetAttributes(
		tracing.AttrOutcome.String(s.Outcome),
		tracing.AttrResult.String(s.Result.String()),
	)
	if s.ProviderStatus != 0 {
		span.SetAttributes(tracing.AttrProviderStatus.Int(s.ProviderStatus))
	}
	if s.ProviderCode != "" {
		span.SetAttributes(tracing.AttrProviderCode.String(s.ProviderCode))
	}
	switch {
	case !applied:
		span.SetStatus(codes.Error, "settle not applied: the row was claimed again")
	case s.Outcome != outbox.OutcomeSuccess:
		// The outcome, never the provider's detail: it may quote the message.
		span.SetStatus(codes.Error, s.Outcome)
	}
	span.End()
}

// abandonAttempts ends the spans (nil ones skipped) of attempts whose
// outcome this process will not record (a simulated crash, a kill): the row
// is claimed again later.
func abandonAttempts(spans ...trace.Span) {
	for _, span := range spans {
		if span != nil {
			span.SetStatus(codes.Error, "abandoned: outcome not recorded by this process")
			span.End()
		}
	}
}
