// Package traceparent carries one W3C Trace Context traceparent
// ("00-<trace id>-<span id>-<flags>", 55 bytes) between a context.Context and
// the places notifyd keeps it as text: the outbox's trace_parent column, the
// plugin protocol's per-message field. It is the one formatter and parser of
// that text on both sides (the daemon, the SDK, txoutbox), and it imports
// the OpenTelemetry trace API alone.
//
// Only traceparent travels: tracestate (vendors' data, up to 512 bytes) is
// not kept with a notification, so the outbox row stays small; the trace
// continues by its id.
package traceparent

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Len is the length of every traceparent this package writes (version 00),
// and the most the outbox stores.
const Len = 55

// FromContext is the traceparent of ctx's span, "" when ctx carries no valid
// span context.
func FromContext(ctx context.Context) string {
	return Format(trace.SpanContextFromContext(ctx))
}

// Format writes sc as a version-00 traceparent, "" when sc is not valid.
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	var c carrier
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), &c)
	return c.tp
}

// Parse reads a traceparent; ok is false for anything that is not a valid
// one (empty, malformed, an all-zero id), which callers ignore: a bad value
// never fails what carries it.
func Parse(s string) (sc trace.SpanContext, ok bool) {
	if s == "" {
		return trace.SpanContext{}, false
	}
	c := carrier{tp: s}
	sc = trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), &c))
	return sc, sc.IsValid()
}

// Valid says s is a traceparent Parse accepts and no longer than Len.
func Valid(s string) bool {
	if len(s) != Len {
		return false
	}
	_, ok := Parse(s)
	return ok
}

// ContextWith returns ctx carrying s as its remote parent span context, so
// spans started from it (and propagators injecting from it) continue that
// trace; ctx itself when s is not a valid traceparent.
func ContextWith(ctx context.Context, s string) context.Context {
	sc, ok := Parse(s)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// carrier holds the one header TraceContext reads and writes, without the
// map a propagation.MapCarrier allocates.
type carrier struct{ tp string }

func (c *carrier) Get(key string) string {
	if key == "traceparent" {
		return c.tp
	}
	return ""
}

func (c *carrier) Set(key, value string) {
	if key == "traceparent" {
		c.tp = value
	}
}

func (c *carrier) Keys() []string { return []string{"traceparent"} }
