package api

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// startEnqueueSpan starts the enqueue's server span under the caller's W3C
// traceparent and tracestate. A header that is not a valid traceparent is
// ignored (the span starts a new trace): garbage in a header never fails an
// enqueue.
func startEnqueueSpan(ctx context.Context, tracer trace.Tracer, r *http.Request) (context.Context, trace.Span) {
	ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
	return tracer.Start(ctx, "POST /v1/notifications", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("http.route", "/v1/notifications"),
		))
}

// endEnqueueSpan records a refusal's status and ends the span.
func endEnqueueSpan(span trace.Span, err error) {
	if err != nil {
		status := http.StatusInternalServerError
		var e *Error
		if errors.As(err, &e) {
			status = e.Status
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}
